"""The index as one server process shares it between request threads and an ingestion.

An ``Index`` holds one SQLite connection, and a connection is one transaction at a time: a search
that rebuilds its retrievers (a read snapshot) and an ingestion committing a document (a write
transaction) cannot share one, and neither can two searches rebuilding at once. So each request
borrows an ``Index`` of its own from a small pool, and ingestion and deletion write through another
one. The local store is made for this: readers never block, and a reader whose retriever files lag
a commit builds the missing part in memory (``store/local.py``), once per process for the whole
pool, and at most every ``READ_LAG`` seconds while an ingestion commits document after document.

PDFium is not thread-safe (not even across documents): every call into it in the process, by any
of the indexes or the MCP tools, holds ``render.sources.PDFIUM_LOCK``.

Stores other than the local one (Qdrant's local mode allows one client per folder) are served
through the one index given, borrowed in turn by reads and writes.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pagesight.errors import IndexLockedError
from pagesight.index import Index
from pagesight.store.local import LocalStore
from pagesight.vectors.ann import one_thread_here

WRITE_WAIT = 10.0  # seconds a write waits for a reader that is repairing stale retriever files
READ_LAG = 2.0  # seconds searches may lag an ingestion (LocalStore.max_lag): one rebuild per 2 s at most


class IndexPool:
    def __init__(self, index: Index, readers: int = 4):
        self.index = index
        self._write_lock = threading.Lock()  # one writer in this process: the store's lock is per process
        self._free: queue.Queue[Index] = queue.Queue()
        self._opened: list[Index] = []
        separate = isinstance(index.store, LocalStore)
        self.readers = max(1, readers) if separate else 1
        indexes = [index] + [self._open_like(index) for _ in range(self.readers - 1)]
        for reader in indexes:
            if separate:
                reader.store.max_lag = READ_LAG
            self._free.put(reader)
        self._writer = self._open_like(index) if separate else None

    def _open_like(self, index: Index) -> Index:
        """Another ``Index`` on the same store with the same device and leave to run a model's own
        code, sharing the loaded visual encoder (a model loaded once per process, not once per
        connection)."""
        opened = Index.open(
            index.store.location,
            create=False,
            device=index.device,
            trust_remote_code=index.trust_remote_code,
        )
        if index.settings.visual_encoder is not None:
            opened._visual = index.visual_encoder()
        self._opened.append(opened)
        return opened

    @contextmanager
    def reading(self) -> Iterator[Index]:
        """An index for this thread alone until the block ends; the thread searches vectors on
        one OpenMP thread (``vectors.ann.one_thread_here``)."""
        one_thread_here()
        index = self._free.get()
        try:
            yield index
        finally:
            self._free.put(index)

    @contextmanager
    def writing(self, wait: float | None = None) -> Iterator[Index]:
        """The writing index, once no other write of this process runs (waiting up to ``wait``
        seconds, then ``IndexLockedError``; None: as long as it takes). A reader of this process may hold the store's lock
        for a moment to repair stale retriever files, so the store's lock is retried for
        ``WRITE_WAIT`` seconds by ``retry_locked``."""
        if not self._write_lock.acquire(timeout=-1 if wait is None else wait):
            raise IndexLockedError(f"{self.index.root}: another write to this index is running")
        try:
            if self._writer is not None:
                yield self._writer
            else:
                with self.reading() as index:
                    yield index
        finally:
            self._write_lock.release()

    def close(self) -> None:
        """Close the indexes the pool opened; the one it was given stays its owner's."""
        for index in self._opened:
            index.close()


def retry_locked(write, wait: float = WRITE_WAIT):
    """``write()``, tried again while the store's lock is held (by a reader repairing retriever
    files, or another process), for up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return write()
        except IndexLockedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)
