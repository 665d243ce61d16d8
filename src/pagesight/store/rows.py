"""The records a catalog gives back, the same for every store (``store/base.py``'s ``Catalog``): a
document's row and a tile's, with its spans, links and region; and the one way both stores write a
tile's spans, links and region (plain lists, boxes to a tenth of a pixel) and read a region back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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
