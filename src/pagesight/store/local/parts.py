"""Vectors in parts, one beside each BM25 segment of the same position (``store/retrievers.py``):
a commit adds the part of its new tiles, a merge joins the parts of the segments it merges, and a
search asks every part and keeps the best, so a commit never rewrites the vectors already written.
``DenseSegments`` (text chunks) and ``VisualSegments`` (the visual encoder's vectors) are such.

A part saved as one file is opened with its segment and read when first searched or merged
(``Saved``), so a writer that only adds a part reads none of them, and a merge that removes the
file meanwhile takes nothing from a search that holds it. Tombstones (tiles removed) are kept and
applied to each part as it is read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar

import numpy as np

P = TypeVar("P")


class Saved:
    """A part's file, opened at once and read by ``read`` when first asked for: each ``load`` reads
    a part of one's own from the start of the open file."""

    def __init__(self, path: Path, read: Callable[[BinaryIO], Any]):
        self._file = open(path, "rb")  # noqa: SIM115 - held open until the part is read
        self._read = read
        self._lock = threading.Lock()

    def load(self):
        with self._lock:
            return self._read(self._file)

    def __del__(self):
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()


class Parts(Generic[P]):
    """Parts of one kind beside the BM25 segments (the module docstring). A subclass says how a
    saved part is held (``_held``), how parts are joined into one (``_joined``) and what it is made
    with (``_options``, given again to each set of parts made from this one)."""

    def __init__(self, parts: list, gone: np.ndarray | None = None):
        self._gone = np.zeros(0, dtype=np.int64) if gone is None else gone  # removed before a part was read
        self._lock = threading.Lock()
        self.parts = [self._read(part) if isinstance(part, Path) else part for part in parts]

    def _read(self, path: Path) -> Saved | P:
        """The part saved at ``path`` as ``_held`` holds it; one read at once loses the tombstones."""
        held = self._held(path)
        if not isinstance(held, Saved) and len(self._gone):
            held.remove(self._gone)
        return held

    def _held(self, path: Path) -> Saved | P:
        raise NotImplementedError

    def _joined(self, parts: list[P]) -> P:
        raise NotImplementedError

    def _options(self) -> dict:
        return {}

    def _again(self, parts: list) -> Parts[P]:
        return type(self)(parts, gone=self._gone, **self._options())

    def part(self, i: int) -> P:
        """Part ``i``, read from its file the first time, the tombstones applied."""
        with self._lock:
            found = self.parts[i]
            if isinstance(found, Saved):
                found = found.load()
                found.remove(self._gone)
                self.parts[i] = found
            return found

    def __len__(self) -> int:
        return sum(len(self.part(i)) for i in range(len(self.parts)))

    def remove(self, tile_ids: np.ndarray) -> None:
        """Remove ``tile_ids`` from the parts read (their files stay), and from the others when read."""
        with self._lock:
            self._gone = np.union1d(self._gone, np.asarray(tile_ids, dtype=np.int64))
            for part in self.parts:
                if not isinstance(part, Saved):
                    part.remove(tile_ids)

    def with_part(self, part: P) -> Parts[P]:
        return self._again([*self.parts, part])

    def taking(self, positions: list[int]) -> Parts[P]:
        return self._again([self.parts[i] for i in positions])

    def swapped(self, positions: list[int], merged: Path) -> Parts[P]:
        """The parts at ``positions`` replaced by the part saved at ``merged``, as
        ``LexicalRetriever.swapped`` replaces their segments."""
        kept = [part for i, part in enumerate(self.parts) if i not in positions]
        return self._again([*kept, merged])

    def merged(self, plans: list[list[int]]) -> Parts[P]:
        """The parts merged as the BM25 segments are (``LexicalRetriever.merged``): the parts not
        merged in their order, then each plan's parts joined."""
        merged = {i for plan in plans for i in plan}
        kept = [part for i, part in enumerate(self.parts) if i not in merged]
        return self._again(kept + [self._joined([self.part(i) for i in plan]) for plan in plans])
