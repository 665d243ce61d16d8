"""Office uploads converted to PDF beside the ingestion, so that a slow conversion holds no other
tenant's upload.

A server ingests in one thread, in turns between tenants (``serve/jobs.py``), and LibreOffice may
take up to its time limit on one small file (``render.office.CONVERT_TIMEOUT``, 100 s: a 20,000-row
table in an 8 KB .docx does). Converted within a turn, such a file held every tenant's ingestion
that long. So a job's office files are converted as soon as the job is queued, here: into the
office cache (``render.office.office_pdf``, with its limits and sandbox), by ``CONVERTERS`` worker
processes of their own (the ingestion's memory limit, at background priority), taking turns
between tenants as the ingestion does; a tenant converts in all of them but one at most, so
another tenant's file never waits for its slow ones. Meanwhile the ingestion thread passes over a job whose next
files are still converting and takes the other tenants' turns; once they are converted the job's
turn finds their PDFs in the cache and reads them like any PDF, and a file whose conversion failed
fails in its turn with the conversion's reason, not converted again.

Why here and not in the ingestion: converting needs no index and no writer's lock and writes
nothing but the cache, so it can run before the turn and beside it, while ingestion stays one loop
(``ingest/pipeline.py``) whose files cost what PDFs cost. A library or CLI ingestion converts in
its worker processes, as before (its files are all its own).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import wait
from pathlib import Path

from pagesight.errors import InputError
from pagesight.priority import BACKGROUND, lower_this_thread
from pagesight.render.office import CONVERT_TIMEOUT, OFFICE_SUFFIXES, office_pdf
from pagesight.render.sources import file_sha256

log = logging.getLogger(__name__)
CONVERTERS = 2  # office files converted at once
START_TIMEOUT = 60.0  # seconds for the conversion processes to start
STOP_AFTER = 30.0  # seconds past LibreOffice's own limit before a conversion's process is stopped
POLL = 0.5  # seconds between looks at whether the server is closing, during a conversion


class Conversions:
    """Office files converted into the cache beside the ingestion (the module docstring): ``submit``
    a job's files, ask whether one is ``pending``, take a failed one's reason (``failure``).
    ``on_done`` is called after each conversion (the ingestion thread waits on it)."""

    def __init__(self, on_done: Callable[[], None], max_memory: int | None, workers: int = CONVERTERS):
        self._on_done = on_done
        self._max_memory = max_memory
        self._workers = workers
        self._turns: OrderedDict[str | None, deque[Path]] = OrderedDict()  # tenant -> files, in turn
        self._converting: Counter[str | None] = Counter()  # tenant -> its files converting now
        self._per_tenant = max(1, workers - 1)
        self._pending: set[Path] = set()  # submitted, not converted yet
        self._failed: dict[Path, str] = {}  # file -> why it could not be converted
        self._wake = threading.Condition()
        self._closed = False
        self._pool = None  # the worker processes, started at the first office file
        self._stack = contextlib.ExitStack()
        self._starting = threading.Lock()  # the pool started once (not under _wake: it takes seconds)
        self._threads = [
            threading.Thread(target=self._loop, name=f"pagesight-convert-{n}", daemon=True)
            for n in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, tenant: str | None, paths: list[Path]) -> None:
        """Convert the office files among ``paths`` (of ``tenant``'s job), in turn with other tenants'."""
        office = [path for path in paths if path.suffix.lower() in OFFICE_SUFFIXES]
        with self._wake:
            for path in office:
                if path not in self._pending:
                    self._pending.add(path)
                    self._turns.setdefault(tenant, deque()).append(path)
            self._wake.notify_all()

    def pending(self, path: Path) -> bool:
        """Whether ``path`` is still waiting for its conversion or in it."""
        with self._wake:
            return path in self._pending

    def failure(self, path: Path) -> str | None:
        """Why ``path`` could not be converted (forgotten once asked), or None."""
        with self._wake:
            return self._failed.pop(path, None)

    def forget(self, paths: list[Path]) -> None:
        """The failures of files no longer to ingest (their job ended)."""
        with self._wake:
            for path in paths:
                self._failed.pop(path, None)

    def close(self) -> None:
        """Stop: conversions running are ended (their processes stopped, LibreOffice with them);
        what waits is left to the next server, whose jobs submit it again."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        with self._starting:
            pool = self._pool
        if pool is not None:
            pool.stop()  # its processes and their LibreOffice; each thread sees _closed within POLL
        for thread in self._threads:
            thread.join()
        self._stack.close()

    def _take(self) -> tuple[str | None, Path] | None:
        """The next file of the tenant whose turn it is among those converting fewer than
        ``_per_tenant`` files now; that tenant goes to the end of the turns."""
        with self._wake:
            while not self._closed:
                for tenant, waiting in self._turns.items():
                    if waiting and self._converting[tenant] < self._per_tenant:
                        self._turns.move_to_end(tenant)
                        self._converting[tenant] += 1
                        return tenant, waiting.popleft()
                self._wake.wait()
            return None

    def _loop(self) -> None:
        lower_this_thread()  # hashing the files too: searches first
        while (taken := self._take()) is not None:
            tenant, path = taken
            reason = self._convert(path)
            with self._wake:
                self._pending.discard(path)
                self._converting[tenant] -= 1
                if reason is not None and path.exists():  # else its job is gone
                    self._failed[path] = reason
                self._wake.notify_all()  # the tenant may take a converter again
            self._on_done()

    def _convert(self, path: Path) -> str | None:
        """Convert ``path`` into the cache in a worker process; None, or why it failed."""
        try:
            sha256 = file_sha256(path)
        except OSError:  # its job ended meanwhile
            return None
        try:
            pool = self._processes()
            future = pool.schedule(office_pdf, (path, sha256), timeout=CONVERT_TIMEOUT + STOP_AFTER)
            while not wait([future], timeout=POLL).done:  # a stopped pool never answers
                if self._closed:
                    future.cancel()  # pebble stops its process, LibreOffice dies with it
                    return None
            future.result()
        except Exception as exc:  # a crash, a time-out, a pool that broke: this file alone
            if self._closed:
                return None  # stopped by close: converted again by the next server
            if isinstance(exc, InputError):  # the file's own reason: limits, LibreOffice's failure
                return str(exc)
            log.warning("conversion of %s failed: %s: %s", path.name, type(exc).__name__, exc)
            self._reset()
            said = " ".join(str(exc).split())[:200]
            return f"its conversion to PDF failed ({type(exc).__name__}{f': {said}' if said else ''})"
        return None

    def _processes(self):
        """The worker processes (started once, at the first office file)."""
        from pagesight.ingest.workers import worker_pool

        with self._starting:
            if self._closed:
                raise InputError("the server is stopping")
            if self._pool is None:
                pool = worker_pool(self._workers, self._max_memory, START_TIMEOUT, nice=BACKGROUND)
                self._pool = self._stack.enter_context(pool)
            return self._pool

    def _reset(self) -> None:
        """After a failure the pool may be broken: the next conversion starts a new one."""
        with self._starting:
            if self._pool is not None and not self._pool.active:
                self._stack.close()
                self._stack, self._pool = contextlib.ExitStack(), None
