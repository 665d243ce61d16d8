"""The server's pool of indexes (``serve/pool.py``): an index per request thread, one writer."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.errors import IndexLockedError
from pagesight.serve.pool import IndexPool
from tests.conftest import make_pdf


@pytest.mark.timeout(60)
def test_each_reader_has_an_index_of_its_own_and_one_write_runs_at_a_time(tmp_path: Path):
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add([make_pdf(tmp_path / "owls.pdf", [["barn owls"]])], jobs=1).ok
    pool = IndexPool(index, readers=2)
    try:
        with pool.reading() as first, pool.reading() as second:
            assert first is not second and first.documents() == second.documents() == ["owls"]
            waited = threading.Event()

            def third_reader():
                with pool.reading():
                    waited.set()

            thread = threading.Thread(target=third_reader)
            thread.start()
            assert not waited.wait(0.3)  # both indexes are lent: the third request waits
        thread.join(5)
        assert waited.is_set()
        with pool.writing() as writer:
            assert writer is not index
            busy = pytest.raises(IndexLockedError, match="another write to this index is running")
            with busy, pool.writing(wait=0.1):
                pass
    finally:
        pool.close()
    assert index.documents() == ["owls"]  # the index given stays open: it is its owner's
    index.close()


@pytest.mark.timeout(60)
def test_a_store_that_one_client_holds_is_shared_by_turns(tmp_path: Path):
    pytest.importorskip("qdrant_client")
    index = Index.open(f"qdrant:{tmp_path / 'q'}", settings={"dense_model": None})
    pool = IndexPool(index, readers=4)
    try:
        assert pool.readers == 1
        with pool.reading() as reader:
            assert reader is index
        with pool.writing() as writer:
            assert writer is index
    finally:
        pool.close()
        index.close()


@pytest.mark.timeout(60)
def test_a_request_thread_searches_vectors_on_one_thread_and_leaves_the_others_theirs(tmp_path: Path):
    faiss = pytest.importorskip("faiss")
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    pool = IndexPool(index, readers=1)
    seen = {}

    def in_a_thread(name, borrow):
        def run():
            seen[name] = faiss.omp_get_max_threads()
            if borrow:
                with pool.reading():
                    seen["searching"] = faiss.omp_get_max_threads()

        thread = threading.Thread(target=run)
        thread.start()
        thread.join(5)

    try:
        in_a_thread("request", borrow=True)
        in_a_thread("other", borrow=False)
        # every core for a thread of its own (2 on the CI's machines), one for a request's searches
        assert seen["searching"] == 1 and seen["other"] == seen["request"] >= 1
    finally:
        pool.close()
        index.close()


@pytest.mark.timeout(60)
def test_a_serving_process_runs_numpys_products_on_one_blas_thread(tmp_path: Path):
    """OpenBLAS's threads spinning between a search's small products took three times the CPU
    of a visual search served (BENCHMARKS.md, "Visual search served to many clients at once")."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # put back as it was afterwards
        pool = IndexPool(index, readers=1)
        try:
            blas = [
                found["num_threads"]
                for found in threadpoolctl.threadpool_info()
                if found["user_api"] == "blas"
            ]
            assert blas and set(blas) == {1}
        finally:
            pool.close()
            index.close()
