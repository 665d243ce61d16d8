"""The index as one server process shares it between request threads and an ingestion.

An ``Index`` holds one SQLite connection, and a connection is one transaction at a time: a search
that rebuilds its retrievers (a read snapshot) and an ingestion committing a document (a write
transaction) cannot share one, and neither can two searches rebuilding at once. So each request
borrows an ``Index`` of its own from a small pool, and ingestion and deletion write through another
one. The local store is made for this: readers never block, and a reader whose retriever files lag
a commit builds the missing part in memory (``store/local/store.py``), once per process for the whole
pool, and at most every ``READ_LAG`` seconds while an ingestion commits document after document.

PDFium is not thread-safe (not even across documents): every call into it in the process, by any
of the indexes or the MCP tools, holds ``render.sources.PDFIUM_LOCK``.

Stores other than the local one (Qdrant's local mode allows one client per folder) are served
through the one index given, borrowed in turn by reads and writes.

An answer borrows an index for each thing it reads (``Lending``: a search, a tile's text, a tile's
image) and gives it back at once, so a model reading the tiles, or an agent deciding its next
search, holds none of the pool's indexes while it thinks: four slow asks never leave another
tenant's search waiting for an index.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from PIL import Image

from pagesight.encode.visual.batching import QueryBatcher
from pagesight.errors import IndexLockedError
from pagesight.index import Index
from pagesight.records import Hit
from pagesight.settings import Settings
from pagesight.store.local import LocalStore
from pagesight.vectors.ann import one_thread_here

WRITE_WAIT = 10.0  # seconds a write waits for a reader that is repairing stale retriever files
READ_LAG = 2.0  # seconds searches may lag an ingestion (LocalStore.max_lag): one rebuild per 2 s at most


def one_blas_thread() -> None:
    """NumPy's BLAS on one thread in this process, for a server: its requests side by side are its
    parallelism, and OpenBLAS's threads, spinning between the small products of a search (MaxSim,
    MUVERA's query encoding), took 15 ms of CPU a visual search against 5 ms on one
    (BENCHMARKS.md, "Visual search served to many clients at once")."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


class IndexPool:
    def __init__(self, index: Index, readers: int = 4):
        one_blas_thread()  # the process's BLAS: request threads side by side are a server's parallelism
        self.index = index
        self._write_lock = threading.Lock()  # one writer in this process: the store's lock is per process
        self._free: queue.Queue[Index] = queue.Queue()
        self._opened: list[Index] = []
        separate = isinstance(index.store, LocalStore)
        self.readers = max(1, readers) if separate else 1
        queries = batched(index)
        indexes = [index] + [self._open_like(index) for _ in range(self.readers - 1)]
        for reader in indexes:
            if separate:
                reader.store.max_lag = READ_LAG
            if queries is not None:
                reader.use_visual_encoder(queries)
            self._free.put(reader)
        self._writer = self._open_like(index) if separate else None
        if self._writer is not None and queries is not None:
            self._writer.use_visual_encoder(queries.encoder)  # ingestion batches its own pages

    def _open_like(self, index: Index) -> Index:
        """Another ``Index`` on the same store with the same device, leave to run a model's own
        code and model endpoint (its visual encoder is the pool's, shared: ``batched``)."""
        opened = Index.open(
            index.store.location,
            create=False,
            device=index.device,
            trust_remote_code=index.trust_remote_code,
            visual_endpoint=index.visual_endpoint,
        )
        opened.endpoint = index.endpoint  # the server's one endpoint for model calls
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


class Lending:
    """What answering needs of an index (``answer.base.Searchable``), each search and each tile read
    through an index that ``borrow()`` lends for that call alone (``IndexPool.reading``, or a lock
    on one index). ``index`` is one of them, read for what it holds: its settings and its store's
    location (``search.engine.reads_images``); it is never searched from here."""

    def __init__(self, borrow: Callable[[], AbstractContextManager[Index]], index: Index):
        self._borrow = borrow
        self.store = index.store
        self.catalog = _LentCatalog(borrow, index.settings)

    @property
    def settings(self) -> Settings:
        return self.catalog.settings

    def search(
        self,
        query: Any,
        k: int | None = None,
        *,
        evidence: bool = True,
        timings: dict | None = None,
        **options: Any,
    ) -> list[Hit]:
        """``Index.search``, its stages before and after a rerank each on an index borrowed for
        them, and the rerank on none: the reranker's model reads the candidates, their rows and
        images lent call by call, while other requests have every index."""
        from pagesight.search import engine
        from pagesight.search.rerank import rerank_stage

        with self._borrow() as index:
            request, reranker = index.search_request(query, k, **options)
            if reranker is None:
                return index.search(request, evidence=evidence, timings=timings)
            first = engine.first_stage(
                index.store, request, visual_encoder=index.visual_encoder, timings=timings
            )
        stage = rerank_stage(
            self.catalog, self.settings, self.tile_image, reranker, request.rerank_candidates
        )
        ranking = engine.reranked(first, stage, timings)
        with self._borrow() as index:
            return engine.finish(index.catalog, ranking, evidence, timings)

    def search_image(self, *args: Any, **options: Any) -> list[Hit]:
        with self._borrow() as index:
            return index.search_image(*args, **options)

    def tile_image(self, *args: Any, **options: Any) -> Image.Image:
        with self._borrow() as index:
            return index.tile_image(*args, **options)


class _LentCatalog:
    """The catalog reads answering makes (a tile's row, a page's layout regions, a document's
    tiles for the extractive reader's check) and a rerank's (the candidates' rows, their stored
    visual vectors and their encoder's spec), each through an index borrowed for it."""

    def __init__(self, borrow: Callable[[], AbstractContextManager[Index]], settings: Settings):
        self._borrow = borrow
        self.settings = settings  # fixed when the index was made

    def tile_at(self, doc_id: str, page: int, tile: int):
        with self._borrow() as index:
            return index.catalog.tile_at(doc_id, page, tile)

    def page_regions(self, doc_id: str, page: int):
        with self._borrow() as index:
            return index.catalog.page_regions(doc_id, page)

    def tiles(self, tile_ids: list[int], spans: bool = True):
        with self._borrow() as index:
            return index.catalog.tiles(tile_ids, spans)

    def tile_ids_of(self, doc_ids: Iterable[str]):
        with self._borrow() as index:
            return index.catalog.tile_ids_of(doc_ids)

    def visual_spec(self):
        with self._borrow() as index:
            return index.catalog.visual_spec()

    def visual_vectors(self, tile_ids):
        with self._borrow() as index:
            return index.catalog.visual_vectors(tile_ids)


def batched(index: Index) -> QueryBatcher | None:
    """``index``'s visual encoder, loaded now (so a server's first query does not wait for it) and
    its queries gathered across request threads (``encode.visual.batching``), set on ``index``;
    None when it has none. An encoder batched already is kept."""
    encoder = index.visual_encoder()
    if encoder is None:
        return None
    if not isinstance(encoder, QueryBatcher):
        encoder = QueryBatcher(encoder)
        index.use_visual_encoder(encoder)
    return encoder
