"""Worker processes: each file is read in a worker with a time and memory limit.

The workers start from a fork server, so they inherit neither the caller's threads (torch, the
encoders) nor its open SQLite handles. multiprocessing would also run the caller's ``__main__``
again in every worker, so that functions defined there can be unpickled; the workers only run
pagesight code, and re-running a user's script there (no main guard, ``python -``, a notebook)
ingests again, waits on the index lock or fails on a path that is not a file. So workers are
launched with ``__main__`` left out of what they are told about their parent.

A file's time limit grows with the pages it has read (``TimeLimit``: a base plus seconds a page),
so a long scanned report is indexed on a busy machine while a file that hangs still fails: each
worker writes when it started and how many pages it has read into its slot of a shared array
(no lock, so a worker killed mid-write blocks nobody), and the parent stops a worker whose file is
past its limit.

A pool that breaks (pebble's ``BrokenProcessPool``) is started again: the files that were in
flight are read once more one at a time, so a file that kills its worker before the pool learns
which file it had fails alone. A pool whose workers cannot even run a trivial task raises one
``PagesightError`` naming the cause instead of failing every file.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import popen_forkserver
from multiprocessing.context import ForkServerContext, ForkServerProcess
from pathlib import Path

from pebble import ProcessExpired, ProcessPool

from pagesight.errors import PagesightError
from pagesight.ingest.extract import extract, limit_memory
from pagesight.ingest.options import TextOptions
from pagesight.priority import lower_this_process
from pagesight.settings import Settings
from pagesight.text.ocr import set_threads

_MAIN_LOCK = threading.Lock()
POLL = 0.25  # seconds between looks at the files in flight, for their time limits


@dataclass
class FileTask:
    """One file for a worker to extract: its path, its document's id and the content hash the index
    holds for it (None: a new document)."""

    path: Path
    doc_id: str
    known_sha256: str | None
    recorded: Path | None = None  # the path it stands for (IngestOptions.stands_for), if another


@dataclass(frozen=True)
class TimeLimit:
    """How long one file may take: ``base`` seconds, plus ``per_page`` for each page read."""

    base: float = 120.0
    per_page: float = 20.0

    def __post_init__(self):
        if not self.base > 0 or self.per_page < 0:
            raise ValueError(
                f"time limit must be positive seconds, got {self.base:g} + {self.per_page:g} a page"
            )

    def seconds(self, pages: int) -> float:
        return self.base + self.per_page * pages


class TimedOut(FutureTimeout):
    """A file read past its time limit; its worker was stopped."""

    def __init__(self, limit: TimeLimit, pages: int):
        self.limit, self.pages = limit, pages
        read = (
            f" ({pages} page{'s' if pages != 1 else ''} read, {limit.per_page:g} s a page)"
            if pages and limit.per_page
            else ""
        )
        super().__init__(f"timed out after {limit.seconds(pages):g} s{read}")


@contextmanager
def _main_hidden():
    """Let ``__main__`` look like an interactive session (no file, no module spec) meanwhile.

    The stand-in shares the real module's attributes, so a thread that looks something up in
    ``__main__`` during the launch still finds it.
    """
    with _MAIN_LOCK:
        main = sys.modules["__main__"]
        stand_in = types.ModuleType("__main__")
        stand_in.__dict__.update(
            (name, value) for name, value in vars(main).items() if name not in ("__file__", "__spec__")
        )
        sys.modules["__main__"] = stand_in
        try:
            yield
        finally:
            sys.modules["__main__"] = main


class _Popen(popen_forkserver.Popen):
    def _launch(self, process_obj):
        with _main_hidden():
            super()._launch(process_obj)


class _Process(ForkServerProcess):
    @staticmethod
    def _Popen(process_obj):
        return _Popen(process_obj)


class WorkerContext(ForkServerContext):
    """The fork-server start method, without running the parent's ``__main__`` in workers."""

    Process = _Process


class Crashed(Exception):
    """The worker reading this file died (a crash in a native library, a signal)."""

    def __init__(self, exitcode: int | None = None):
        code = f" (exit code {exitcode})" if exitcode is not None else ""
        super().__init__(f"reader process crashed{code}")


_BOARD = None  # in a worker: the shared array of (start time, pages read), two doubles a slot


def _start_worker(max_memory: int | None, threads: int, board, nice: int = 0) -> None:
    """Each worker: its address-space cap, its share of the cores for OCR, the progress board, its
    niceness (a server's ingestion: ``IngestOptions.nice``)."""
    global _BOARD
    lower_this_process(nice)
    limit_memory(max_memory)
    set_threads(threads)
    _BOARD = board


def _tracked(extractor: Callable, slot: int, args: tuple):
    """Run ``extractor(*args, on_page=...)`` in a worker, writing its progress into ``slot``."""
    board = _BOARD

    def on_page(pages: int) -> None:
        board[2 * slot + 1] = pages

    board[2 * slot + 1] = 0
    board[2 * slot] = time.time()
    return extractor(*args, on_page=on_page)


@contextmanager
def worker_pool(
    workers: int, max_memory: int | None, start_timeout: float, board=None, nice: int = 0
) -> Iterator[ProcessPool]:
    """A started pool of ``workers`` processes, each under ``max_memory`` bytes of address space,
    running OCR on its share of the cores and writing its files' progress into ``board``.

    Raises ``PagesightError`` when the workers cannot run a trivial task within ``start_timeout``.
    """
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = ProcessPool(
        max_workers=workers,
        initializer=_start_worker,
        initargs=(max_memory, threads, board, nice),
        context=WorkerContext(),
    )
    try:
        try:
            pool.schedule(os.getpid).result(timeout=start_timeout)
        except Exception as exc:
            raise PagesightError(_start_failure(exc, max_memory, start_timeout)) from None
        yield pool
    finally:
        pool.stop()
        pool.join()


def _start_failure(exc: BaseException, max_memory: int | None, start_timeout: float) -> str:
    while exc.__cause__ is not None:  # pebble wraps what stopped it in BrokenProcessPool
        exc = exc.__cause__
    if isinstance(exc, FutureTimeout):
        cause = f"no worker answered within {start_timeout:g} s"
    elif isinstance(exc, (BrokenProcessPool, ProcessExpired)):
        cause = "the workers exited before reading any file (their own error, if any, is printed above)"
        if max_memory:
            cause += f"; is the memory limit of {max_memory / (1 << 30):.2f} GiB per worker too small?"
    else:
        cause = f"{type(exc).__name__}: {exc}"
        try:
            os.getcwd()
        except FileNotFoundError:
            cause += " (the current directory no longer exists)"
    return f"ingestion worker processes could not start: {cause}"


@dataclass
class _Flight:
    """A task in the pool: its future, its progress slot, and why it was stopped, if it was."""

    task: FileTask
    future: object
    slot: int
    stopped: TimedOut | None = None


def read_files(
    todo: Sequence[FileTask],
    settings: Settings,
    text_options: TextOptions,
    *,
    workers: int,
    limit: TimeLimit,
    max_memory: int | None,
    extractor: Callable = extract,
    nice: int = 0,
) -> Iterator[tuple[FileTask, object]]:
    """(task, Document | UNCHANGED | exception) for every task, in order, a few in flight at a time.

    ``extractor(path, doc_id, known_sha256, settings, text_options, on_page=...)`` runs in the workers
    (``extract``) and calls ``on_page(n)`` as it reads its pages. A file's own failure comes back as
    its exception (``TimedOut``, ``MemoryError``, ``Crashed``, ``InputError``, ...); only a pool
    that cannot start raises.
    """
    queue = deque(todo)
    alone = 0  # how many tasks at the head of the queue run one at a time (suspects of a crash)
    window = workers * 4
    board = WorkerContext().RawArray("d", 2 * window)
    while queue:
        with worker_pool(workers, max_memory, max(limit.base, 60.0), board, nice) as pool:
            in_flight: deque[_Flight] = deque()
            free = list(range(window))
            try:
                while queue or in_flight:
                    while queue and len(in_flight) < (1 if alone else window):
                        task, slot = queue[0], free.pop()
                        board[2 * slot] = 0.0  # not started
                        args = (str(task.path), task.doc_id, task.known_sha256, settings, text_options)
                        in_flight.append(
                            _Flight(task, pool.schedule(_tracked, (extractor, slot, args)), slot)
                        )
                        queue.popleft()
                    outcome = _wait(in_flight, board, limit)
                    head = in_flight.popleft()
                    free.append(head.slot)
                    alone = max(0, alone - 1)
                    yield head.task, outcome
            except BrokenProcessPool:
                if alone and in_flight:  # it ran alone, so it broke the pool
                    head = in_flight.popleft()
                    alone -= 1
                    yield head.task, Crashed()
                queue.extendleft(flight.task for flight in reversed(in_flight))
                alone += len(in_flight)


def _wait(in_flight: deque[_Flight], board, limit: TimeLimit):
    """The outcome of the first task in flight; meanwhile every task past its limit is stopped."""
    head = in_flight[0]
    while head.stopped is None:
        if wait([head.future], timeout=POLL).done:
            return _outcome(head.future)
        now = time.time()
        for flight in in_flight:
            started, pages = board[2 * flight.slot], int(board[2 * flight.slot + 1])
            late = flight.stopped is None and started and now - started > limit.seconds(pages)
            if late and flight.future.cancel():  # pebble stops the worker running it
                flight.stopped = TimedOut(limit, pages)
    return head.stopped


def _outcome(future):
    try:
        return future.result()
    except BrokenProcessPool:
        raise
    except ProcessExpired as exc:
        return Crashed(exc.exitcode)
    except Exception as exc:  # every failure of one file is reported, never raised
        return exc
