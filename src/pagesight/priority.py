"""Work that can wait, at a lower CPU priority than searches: a server's ingestion jobs and their
worker processes, and the retrievers a server rebuilds beside its searches.

On Linux a thread has a niceness of its own (``setpriority`` on its native id), so the thread that
ingests an upload or rebuilds BM25 yields the cores to the request threads of the same process;
elsewhere only whole processes can be lowered, and a thread is left as it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

BACKGROUND = 10  # niceness of work a search should not wait for


def lower_this_thread(nice: int = BACKGROUND) -> None:
    """Run the calling thread at niceness ``nice`` (Linux; a no-op elsewhere or when refused)."""
    if not sys.platform.startswith("linux") or nice <= 0:
        return
    with contextlib.suppress(OSError):  # a container that forbids it: the thread keeps its priority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


def lower_this_process(nice: int) -> None:
    """Add ``nice`` to the calling process's niceness (a worker process of a background ingestion)."""
    if nice > 0 and hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(nice)
