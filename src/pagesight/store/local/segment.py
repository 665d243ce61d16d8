"""A segment: the tiles one commit or one merge wrote, as one immutable object that owns its BM25
postings (``postings.py``), its vector parts (``DENSE``: text chunks, ``VISUAL``: the visual
encoder's, each of the same tiles) and its delete bitset (tantivy's per-segment deletes, with
their count in the pointer). A delete gives a new ``Segment`` over the same postings and part files
with a new bitset (``deleting``); each segment reads its parts for itself and removes its deleted
tiles from its own copy (``part``), so no generation's deletes reach another's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pagesight.store.local import dense, layout, visual
from pagesight.store.local.layout import Bitset, Pointer, write_deletes
from pagesight.store.local.parts import Held, Saved
from pagesight.store.local.postings import Postings

OPENED = {layout.DENSE: dense.stored, layout.VISUAL: visual.stored}  # a part's file or folder, opened


class Segment:
    """Postings, parts and deletes of some tiles (the module docstring); ``name`` its folder under
    ``retrievers/`` once saved, ``deletes_file`` the file of its bitset once written."""

    def __init__(
        self,
        postings: Postings,
        parts: Mapping[str, Saved | Held] | None = None,
        deleted: np.ndarray | None = None,
        name: str | None = None,
        deletes_file: Bitset | None = None,
    ):
        self.postings = postings
        self.parts = dict(parts or {})
        self.deleted = np.zeros(len(postings), dtype=bool) if deleted is None else deleted
        self.deleted.flags.writeable = False
        self.deleted_count = int(self.deleted.sum())
        self.name = name
        self.deletes_file = deletes_file  # its pointer entry
        self._read: dict[str, Any] = {}  # each part as read, its deletes removed
        self._lock = threading.Lock()

    @classmethod
    def of(cls, postings: Postings, parts: Mapping[str, Any] | None = None) -> Segment:
        """A new segment, not saved: ``postings`` and the ``parts`` made for the same tiles."""
        return cls(postings, {kind: Held(part) for kind, part in (parts or {}).items()})

    def __len__(self) -> int:
        return len(self.postings)

    @property
    def tile_ids(self) -> np.ndarray:
        return self.postings.tile_ids

    @property
    def live(self) -> int:
        return len(self) - self.deleted_count

    def deleting(self, tile_ids: np.ndarray) -> Segment:
        """This segment with those of ``tile_ids`` it holds deleted too (itself when none)."""
        added = np.isin(self.tile_ids, tile_ids) & ~self.deleted
        if not added.any():
            return self
        return Segment(self.postings, self.parts, self.deleted | added, self.name)

    def part(self, kind: str):
        """Its ``kind`` part, read the first time, its deleted tiles removed from its own copy."""
        with self._lock:
            if kind not in self._read:
                read = self.parts[kind].load()
                if self.deleted_count:
                    read.remove(self.tile_ids[self.deleted])
                self._read[kind] = read
            return self._read[kind]

    def save(self, folder: Path) -> Segment:
        """Written to ``folder`` (new) and named after it: the postings and each part; the segment
        as saved keeps the parts it has read."""
        self.postings.save(folder)
        for kind in self.parts:
            self.part(kind).save(folder / kind)
        saved = Segment(
            self.postings,
            {kind: OPENED[kind](folder / kind) for kind in self.parts},
            self.deleted,
            folder.name,
        )
        saved._read = dict(self._read)
        return saved

    def with_deletes_saved(self, folder: Path, generation: int) -> Segment:
        """This segment (saved in ``folder``) with its delete bitset written, when it changed since
        last written: a commit writes the bitsets of the segments its deletes reached, no other."""
        if not self.deleted_count or self.deletes_file is not None:
            return self
        entry = write_deletes(folder, self.name, self.deleted, generation)
        saved = Segment(self.postings, self.parts, self.deleted, self.name, entry)
        saved._read = dict(self._read)
        return saved

    @classmethod
    def open(cls, folder: Path, name: str, kinds: Iterable[str], pointer: Pointer | None = None) -> Segment:
        """The segment saved in ``folder / name``: postings mapped, parts opened, and the deletes
        ``pointer`` names for it (None: none)."""
        postings = Postings.load(folder / name)
        if pointer is None:
            deleted, entry = None, None
        else:
            deleted, entry = pointer.deleted(folder, name, postings.tile_ids), pointer.deletes.get(name)
        return cls(
            postings, {kind: OPENED[kind](folder / name / kind) for kind in kinds}, deleted, name, entry
        )

    @classmethod
    def merge(cls, segments: list[Segment], joins: Mapping[str, Callable[[list], Any]]) -> Segment:
        """One segment of the live tiles of ``segments``: their postings merged (nothing analysed
        again) and each kind of part joined by ``joins``."""
        postings = Postings.merge([(s.postings, s.deleted) for s in segments])
        return cls.of(
            postings, {kind: join([s.part(kind) for s in segments]) for kind, join in joins.items()}
        )


def opened(folder: Path, pointer: Pointer) -> list[Segment]:
    """The segments ``pointer`` names in ``folder``, with their deletes: postings mapped, each part
    read when first searched."""
    kinds = pointer.kinds()
    return [Segment.open(folder, name, kinds, pointer) for name in pointer.segments]


def joins(dim: int | None, config: Mapping | None) -> dict[str, Callable[[list], Any]]:
    """How a merge joins each kind of part of an index whose dense parts are ``dim`` wide and whose
    visual parts are made by ``config`` (None: it has none)."""
    found: dict[str, Callable[[list], Any]] = {}
    if dim:
        found[layout.DENSE] = lambda parts: dense.DenseRetriever.joined(parts, dim)
    if config:
        found[layout.VISUAL] = lambda parts: visual.VisualRetriever.joined(parts, config)
    return found
