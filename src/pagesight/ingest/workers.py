"""Reader worker processes: each file is read in a worker with a time and memory limit.

The workers start from a fork server, so they inherit neither the caller's threads (torch, the
encoders) nor its open SQLite handles. multiprocessing would also run the caller's ``__main__``
again in every worker, so that functions defined there can be unpickled; the workers only run
pagesight code, and re-running a user's script there (no main guard, ``python -``, a notebook)
ingests again, waits on the index lock or fails on a path that is not a file. So workers are
launched with ``__main__`` left out of what they are told about their parent.

A pool that breaks (pebble's ``BrokenProcessPool``) is started again: the files that were in
flight are read once more one at a time, so a file that kills its worker before the pool learns
which file it had fails alone. A pool whose workers cannot even run a trivial task raises one
``PagesightError`` naming the cause instead of failing every file.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import popen_forkserver
from multiprocessing.context import ForkServerContext, ForkServerProcess
from pathlib import Path

from pebble import ProcessExpired, ProcessPool

from pagesight.errors import PagesightError
from pagesight.ingest.extract import extract, limit_memory
from pagesight.read.ocr import set_threads
from pagesight.settings import Settings

_MAIN_LOCK = threading.Lock()


@dataclass
class Job:
    path: Path
    doc_id: str
    known_sha256: str | None


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


class _Context(ForkServerContext):
    """The fork-server start method, without running the parent's ``__main__`` in workers."""

    Process = _Process


class Crashed(Exception):
    """The worker reading this file died (a crash in a native library, a signal)."""

    def __init__(self, exitcode: int | None = None):
        code = f" (exit code {exitcode})" if exitcode is not None else ""
        super().__init__(f"reader process crashed{code}")


def _start_worker(max_memory: int | None, threads: int) -> None:
    """Each worker: its address-space cap, and its share of the cores for OCR."""
    limit_memory(max_memory)
    set_threads(threads)


@contextmanager
def worker_pool(workers: int, max_memory: int | None, start_timeout: float) -> Iterator[ProcessPool]:
    """A started pool of ``workers`` processes, each under ``max_memory`` bytes of address space
    and running OCR on its share of the cores.

    Raises ``PagesightError`` when the workers cannot run a trivial task within ``start_timeout``.
    """
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = ProcessPool(
        max_workers=workers, initializer=_start_worker, initargs=(max_memory, threads), context=_Context()
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


def read_files(
    todo: Sequence[Job],
    settings: Settings,
    ocr: str,
    *,
    workers: int,
    timeout: float,
    max_memory: int | None,
    reader: Callable = extract,
) -> Iterator[tuple[Job, object]]:
    """(job, Document | UNCHANGED | exception) for every job, in order, a few in flight at a time.

    ``reader(path, doc_id, known_sha256, settings, ocr)`` runs in the workers (``extract``). A
    file's own failure comes back as its exception (``FutureTimeout``, ``MemoryError``,
    ``Crashed``, ``InputError``, ...); only a pool that cannot start raises.
    """
    queue = deque(todo)
    alone = 0  # how many jobs at the head of the queue run one at a time (suspects of a crash)
    window = workers * 4
    while queue:
        with worker_pool(workers, max_memory, start_timeout=max(timeout, 60.0)) as pool:
            in_flight: deque = deque()
            try:
                while queue or in_flight:
                    while queue and len(in_flight) < (1 if alone else window):
                        job = queue[0]
                        args = (str(job.path), job.doc_id, job.known_sha256, settings, ocr)
                        in_flight.append((job, pool.schedule(reader, args, timeout=timeout)))
                        queue.popleft()
                    job, future = in_flight[0]
                    outcome = _outcome(future)
                    in_flight.popleft()
                    alone = max(0, alone - 1)
                    yield job, outcome
            except BrokenProcessPool:
                if alone and in_flight:  # it ran alone, so it broke the pool
                    job, _ = in_flight.popleft()
                    alone -= 1
                    yield job, Crashed()
                queue.extendleft(job for job, _ in reversed(in_flight))
                alone += len(in_flight)


def _outcome(future):
    try:
        return future.result()
    except BrokenProcessPool:
        raise
    except ProcessExpired as exc:
        return Crashed(exc.exitcode)
    except Exception as exc:  # every failure of one file is reported, never raised
        return exc
