"""Background work at a lower CPU priority than searches (``priority.py``)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from pagesight.priority import BACKGROUND, lower_this_thread


@pytest.mark.timeout(30)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads have their own niceness on Linux")
def test_a_background_thread_is_niced_and_the_others_are_not():
    found = {}

    def work():
        lower_this_thread()
        found["thread"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert found["thread"] == min(19, max(before, BACKGROUND))
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before  # the caller's stays
