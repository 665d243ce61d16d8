"""The single-writer lock of an index directory (POSIX ``flock``; released if the process dies).

A writer that finds it held waits ``WAIT`` seconds for it before ``IndexLockedError``: the merger
holds it only to swap a merged segment into the pointer (milliseconds), and a writer arriving in
that moment should not be refused; another writer's commit holds it far longer, and is refused."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from pagesight.errors import IndexLockedError
from pagesight.store.local.layout import WRITE_LOCK

WAIT = 1.0  # seconds a writer waits for the lock before it is refused
POLL = 0.02


class WriteLock:
    def __init__(self, root: Path):
        self.path = root / WRITE_LOCK
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock if free; False when another process holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WriteLock:
        deadline = time.monotonic() + WAIT
        while not self.acquire():
            if time.monotonic() < deadline:
                time.sleep(POLL)
                continue
            try:
                holder = self.path.read_text().strip() or "unknown"
            except OSError:
                holder = "unknown"
            raise IndexLockedError(
                f"{self.path.parent}: another process (pid {holder}) is writing this index"
            )
        return self

    def __exit__(self, *exc) -> None:
        self.release()
