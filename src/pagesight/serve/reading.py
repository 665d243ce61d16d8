"""The extractive reader's work on a server, in processes of its own, each reading within a deadline.

The extractive reader is CPU work in Python: a thread reading a question holds the interpreter's
lock, and every other request of the process (other tenants' searches, the health check) would wait
for it. So a server reads in a few worker processes (``ReadingPool``): a request thread sends the
question and its context's tiles (text, boxes, hits: no images, no index) and waits; a worker
asks back for a document's text when the reader's support check needs it (read by the request
thread through the index it borrows). A reading past its deadline is ended with its process
(``ReadingTimedOut``, answered 504): the next reading starts another. Worker processes start on
the first ask that needs one, so a server starts as fast without them; a free worker goes first to
a tenant holding fewer than ``per_tenant`` of them, so one tenant's readings never keep another's
waiting longer than one reading. ``pagesight ask`` and ``Index.ask`` read
in their own process, as always.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

from pagesight.answer.base import ContextItem, Reading
from pagesight.errors import PagesightError
from pagesight.ingest.workers import WorkerContext

READ_SECONDS = 30.0  # a reading's deadline: a question of 4,000 characters reads in well under 1 s
PROCESSES = 2  # reading processes of a server process (``--workers`` processes each have theirs)
START_SECONDS = 120.0  # a worker's start (its imports and the reader's model), beside the deadline
KEPT_READERS = 16  # readers a worker keeps, by options


class ReadingTimedOut(PagesightError):
    """A reading past its deadline, ended (answered 504)."""


class ReadingPool:
    """Worker processes reading with the extractive reader, ``processes`` of them at most, each
    reading given ``seconds``; ``per_tenant``: the workers a tenant may hold and still go first to a
    free one (None: all but one, at least one)."""

    def __init__(
        self, processes: int = PROCESSES, seconds: float = READ_SECONDS, per_tenant: int | None = None
    ):
        if processes < 1 or seconds <= 0:
            raise PagesightError("reading processes and their deadline must be positive")
        self.processes, self.seconds = processes, seconds
        self.per_tenant = per_tenant if per_tenant is not None else max(1, processes - 1)
        self._free: list[_Worker] = []
        self._started = 0  # workers alive, free or reading
        self._held: dict[Any, int] = {}  # workers held by each tenant
        self._waiting: list[list] = []  # [tenant] of each waiting reading, in arrival order
        self._changed = threading.Condition()
        self._closed = False

    def reader(self, options: dict[str, Any], tenant: Any = None) -> PooledReader:
        """The extractive reader built with ``options``, reading in this pool for ``tenant``."""
        from pagesight.answer.extractive import ExtractiveReader

        refused = sorted(set(options) - set(inspect.signature(ExtractiveReader).parameters))
        if refused:
            raise PagesightError(f"reader 'extractive' takes none of {', '.join(refused)}")
        return PooledReader(self, dict(options), tenant)

    def read(
        self, options: dict, question: str, context: Sequence[ContextItem], tenant: Any = None
    ) -> Reading:
        """``ExtractiveReader(**options).read(question, context)`` in a worker, within the deadline."""
        worker = self._take(tenant, time.monotonic() + self.seconds)
        try:
            reading = worker.read(options, question, context, self.seconds)
        except BaseException:
            worker.end()  # past its deadline, or broken: no reading is left in it
            self._give_back(tenant, None)
            raise
        self._give_back(tenant, worker)
        return reading

    def _take(self, tenant: Any, deadline: float) -> _Worker:
        """A free worker (started if none is and fewer than ``processes`` are), once this reading
        is the first waiting whose tenant holds fewer than ``per_tenant`` (or the first waiting,
        when every waiting one's tenant holds that many: no worker idles); ``ReadingTimedOut`` at
        the deadline."""
        me = [tenant]
        with self._changed:
            self._waiting.append(me)
            try:
                while True:
                    if self._closed:
                        raise PagesightError("the server is stopping")
                    under = [w for w in self._waiting if self._held.get(w[0], 0) < self.per_tenant]
                    eligible = under or self._waiting
                    available = self._free or self._started < self.processes
                    if eligible and eligible[0] is me and available:
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ReadingTimedOut(
                            f"no reader was free within {self.seconds:g} s (other answers are being read); "
                            "ask again shortly"
                        )
                    self._changed.wait(left)
                self._held[tenant] = self._held.get(tenant, 0) + 1
                worker = self._free.pop() if self._free else None
                if worker is None:
                    self._started += 1
            finally:
                self._waiting.remove(me)
                self._changed.notify_all()
        if worker is None:
            try:
                worker = _Worker()
            except BaseException:
                self._give_back(tenant, None)
                raise
        return worker

    def _give_back(self, tenant: Any, worker: _Worker | None) -> None:
        with self._changed:
            self._held[tenant] -= 1
            if not self._held[tenant]:
                del self._held[tenant]
            if worker is not None and not self._closed:
                self._free.append(worker)
            else:
                self._started -= 1
                if worker is not None:
                    worker.end()
            self._changed.notify_all()

    def close(self) -> None:
        """End the workers; a reading in progress fails."""
        with self._changed:
            self._closed = True
            free, self._free = self._free, []
            self._started -= len(free)
            self._changed.notify_all()
        for worker in free:
            worker.end()


class PooledReader:
    """The extractive reader as ``answer.base.Reader`` has it, reading in a ``ReadingPool``."""

    name = "extractive"
    inputs = "text"
    max_images = None

    def __init__(self, pool: ReadingPool, options: dict[str, Any], tenant: Any = None):
        self.pool, self.options, self.tenant = pool, options, tenant

    def for_tenant(self, tenant: Any) -> PooledReader:
        return PooledReader(self.pool, self.options, tenant)

    def read(self, question: str, context: Sequence[ContextItem]) -> Reading:
        return self.pool.read(self.options, question, context, self.tenant)


class _Worker:
    """One reading process and the pipe to it."""

    def __init__(self) -> None:
        # from the fork server: never a fork of the threaded server, nor its ``__main__`` run again
        context = WorkerContext()
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child,), name="pagesight-reader", daemon=True)
        self.process.start()
        child.close()
        if not self.conn.poll(START_SECONDS) or self._receive()[0] != "ready":
            self.end()
            raise PagesightError(f"the reading process did not start within {START_SECONDS:g} s")

    def read(self, options: dict, question: str, context: Sequence[ContextItem], seconds: float) -> Reading:
        """The reading, within ``seconds`` from when the worker has its reader (built on its first
        use of ``options``: a model loaded, within ``START_SECONDS``)."""
        shipped = [
            dataclasses.replace(item, load_image=None, load_document=None, _image=None) for item in context
        ]
        self.conn.send((options, question, shipped))
        documents = {item.hit.doc_id: item.load_document for item in context if item.load_document}
        if not self.conn.poll(START_SECONDS):
            raise PagesightError(f"the reader was not ready within {START_SECONDS:g} s")
        kind, value = self._receive()
        if kind != "reading from now":
            _raise(kind, value)
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.conn.poll(left):
                raise ReadingTimedOut(
                    f"the answer took longer than {seconds:g} s to read; ask a shorter or simpler question"
                )
            kind, value = self._receive()
            if kind == "document":  # the support check reads a document's other pages
                read = documents.get(value)
                self.conn.send(read() if read is not None else None)
            elif kind == "reading":
                return value
            else:
                _raise(kind, value)

    def _receive(self) -> tuple[str, Any]:
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            raise PagesightError("the reading process ended unexpectedly") from None

    def end(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=10)
        self.conn.close()


def _raise(kind: str, said: str) -> None:
    """A worker's refusal (a ``PagesightError`` of the reader's) or failure, raised here."""
    raise PagesightError(said if kind == "refused" else f"the reader failed: {said}")


def _serve(conn) -> None:
    """A worker's loop: read each question sent, asking back for documents' text."""
    from pagesight.answer.extractive import ExtractiveReader

    readers: dict[str, ExtractiveReader] = {}
    conn.send(("ready", None))
    while True:
        try:
            options, question, context = conn.recv()
        except EOFError:
            return
        key = json.dumps(options, sort_keys=True, default=str)
        try:
            if key not in readers:
                if len(readers) >= KEPT_READERS:
                    readers.pop(next(iter(readers)))
                readers[key] = ExtractiveReader(**options)
            conn.send(("reading from now", None))
            for item in context:
                item.load_document = _asker(conn, item.hit.doc_id)
            conn.send(("reading", readers[key].read(question, context)))
        except PagesightError as exc:
            conn.send(("refused", str(exc)))
        except Exception as exc:
            conn.send(("failed", f"{type(exc).__name__}: {exc}"))


def _asker(conn, doc_id: str):
    """The document's text page by page, asked of the request thread once."""
    kept: list = []

    def load() -> dict[int, str]:
        if not kept:
            conn.send(("document", doc_id))
            kept.append(conn.recv() or {})
        return kept[0]

    return load
