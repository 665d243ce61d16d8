"""How a segment holds its vector parts (``store.local.segment``): each ``load`` gives a part of the
caller's own, so the deletes a segment applies to its part never reach another segment sharing the
same files (an earlier generation's, a search's).

A part saved as one file is opened with its segment and read when first asked for (``Saved``), so a
writer that only adds a segment reads none of the others, and a merge that removes the file
meanwhile takes nothing from a search that holds it. A MUVERA part (a folder of arrays) is read
when its segment is opened, and a part made by a commit or a merge is held before it is saved
(``Held``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


class Saved:
    """A part's file, opened at once: each ``load`` reads a part of one's own from the open file."""

    def __init__(self, path: Path, read: Callable[[BinaryIO], Any]):
        self._file = open(path, "rb")  # noqa: SIM115 - held open while a segment may read it
        self._read = read
        self._lock = threading.Lock()

    def load(self):
        with self._lock:
            return self._read(self._file)

    def __del__(self):
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()


class Held:
    """A part in memory: the first ``load`` takes it (its first segment owns it); a later one reads
    ``path`` again, or, for a part not saved yet (``path`` None), refuses: deletes are applied to
    saved segments only (a build's new segment holds none)."""

    def __init__(self, part: Any, path: Path | None = None, read: Callable[[Path], Any] | None = None):
        self._part, self._path, self._read = part, path, read
        self._lock = threading.Lock()

    def load(self):
        with self._lock:
            part, self._part = self._part, None
        if part is not None:
            return part
        if self._path is None:
            raise RuntimeError("a part not saved yet is read by its one segment")
        return self._read(self._path)
