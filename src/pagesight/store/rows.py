"""The records a catalog gives back, the same for every store (``store/base.py``'s ``Catalog``): a
document's row and a tile's, with its spans, links and region; the one way both stores write a
tile's spans, links and region (plain lists, boxes to a tenth of a pixel) and read a region back;
and what both keep of tiles in memory (``Kept``, ``RowCache``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from pagesight.records import Link, Region, Span, Tile


@dataclass
class DocumentRow:
    id: str
    source: Path
    sha256: str
    type: str
    size: int
    mtime_ns: int
    n_pages: int
    meta: dict = field(default_factory=dict)


@dataclass
class TileRow:
    id: int
    doc_id: str
    page: int
    idx: int
    box: tuple[float, float, float, float]
    spans: list
    page_size: tuple[int, int]
    kind: str = ""
    links: list = field(default_factory=list)  # [anchor text, url, [box, ...]] per link
    region: Region | None = None  # a table or figure searched as its own unit; its box is the tile's


def span_rows(spans: list[Span]) -> list[list]:
    """A tile's spans as stored: [text, box, source, confidence] each."""
    return [[s.text, [round(v, 1) for v in s.box], s.source, s.conf] for s in spans]


def link_rows(links: list[Link]) -> list[list]:
    """A tile's hyperlinks as stored: [anchor text, url, [box, ...]] each."""
    return [[k.text, k.url, [[round(v, 1) for v in b] for b in k.boxes]] for k in links]


def region_row(tile: Tile) -> list | None:
    """A unit's region as stored, [kind, score]; None for a band."""
    return [tile.region.kind, tile.region.score] if tile.region is not None else None


def region_of(row: list | None, box) -> Region | None:
    """A stored region back (its box is the unit's); None for a band."""
    return Region(row[0], tuple(box), row[1]) if row else None


V = TypeVar("V")
KEPT = 200_000  # tiles whose heading, or whose document and page, a catalog keeps (``Kept``)


class Kept(Generic[V]):
    """Values that never change for a tile id (ids are not reused and a document is stored whole),
    read in batches and kept, ``KEPT`` of them at most: past that the store starts again (a reader
    holding the old one keeps reading it)."""

    def __init__(self, size: int = KEPT):
        self.size = size
        self._values: dict[int, V] = {}

    def get(self, tile_ids: Iterable[int], read: Callable[[list[int]], dict[int, V]]) -> dict[int, V]:
        """The values of ``tile_ids`` that exist: those kept, and the others from ``read`` (given
        the missing ids, it may give more, such as a whole document's)."""
        kept = self._values
        found, missing = {}, []
        for tile_id in map(int, tile_ids):  # numpy integers bind as blobs
            value = kept.get(tile_id, _MISSING)
            if value is _MISSING:
                missing.append(tile_id)
            else:
                found[tile_id] = value
        if missing:
            new = read(missing)
            found.update((tile_id, new[tile_id]) for tile_id in missing if tile_id in new)
            if len(kept) + len(new) > self.size:
                kept = self._values = {}
            kept.update(new)
        return found


_MISSING = object()


class RowCache:
    """The last ``size`` tile rows read with their spans, by tile id: a search's hits read their
    lines (snippets, evidence boxes) from here rather than decoding them again from the catalog.
    Any value kept by tile id (``Catalog.derived``)."""

    def __init__(self, size: int = 4096):
        self.size = size
        self._rows: OrderedDict[int, TileRow] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, tile_ids) -> dict[int, TileRow]:
        with self._lock:
            found = {}
            for tile_id in tile_ids:
                row = self._rows.get(int(tile_id))
                if row is not None:
                    self._rows.move_to_end(int(tile_id))
                    found[int(tile_id)] = row
            return found

    def put(self, rows: dict[int, TileRow]) -> None:
        with self._lock:
            self._rows.update(rows)
            while len(self._rows) > self.size:
                self._rows.popitem(last=False)
