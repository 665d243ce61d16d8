"""Crash safety and concurrent reading: real processes, real SIGKILL."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pagesight import Index, IndexLockedError
from pagesight.settings import Settings
from tests.conftest import make_pdf

N_DOCS = 24


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(N_DOCS):
        make_pdf(folder / f"doc{i:02d}.pdf", [[f"document {i} page {p} about topic{i}"] for p in (1, 2)])
    return folder


# The writer: a real ingestion in its own process that waits DELAY seconds after each committed
# document (through the progress callback), so the test can act while it is mid-way.
WRITER = """
import sys, time
from pagesight import Index
index = Index.open(sys.argv[1], create=False)
report = index.add(sys.argv[2], jobs=1, progress=lambda path, outcome, pages: time.sleep(float(sys.argv[3])))
sys.exit(0 if report.ok else 1)
"""
DELAY = 0.25


def start_ingest(index: Path, corpus: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(index), str(corpus), str(DELAY)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def committed(index: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{index / 'catalog.sqlite'}?mode=ro", uri=True, timeout=30)
        try:
            return db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0


def wait_for(condition, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def assert_whole(index: Index) -> None:
    db = index.catalog.db
    for doc_id, n_pages in db.execute("SELECT id, n_pages FROM documents"):
        pages = db.execute("SELECT COUNT(*) FROM pages WHERE doc_id = ?", (doc_id,)).fetchone()[0]
        tiled = db.execute("SELECT COUNT(DISTINCT page) FROM tiles WHERE doc_id = ?", (doc_id,)).fetchone()[0]
        assert pages == tiled == n_pages > 0, doc_id


def test_sigkill_mid_ingest_leaves_whole_documents_and_rerun_completes(tmp_path: Path, corpus: Path):
    index_dir = tmp_path / "ix"
    keeper = Index.open(index_dir, settings=Settings(dense_model=None))
    keeper.add(make_pdf(tmp_path / "keeper.pdf", [["indexed before any crash"]]))
    keeper.close()

    for kill_after in (3, 8):  # two crashes at different points of the run
        process = start_ingest(index_dir, corpus)
        wait_for(lambda n=kill_after, p=process: committed(index_dir) >= n + 1 or p.poll() is not None)
        assert process.poll() is None, "ingest finished before it could be killed"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

        index = Index.open(index_dir, create=False)
        count = len(index.documents())
        assert kill_after + 1 <= count < N_DOCS + 1
        assert_whole(index)
        assert index.search("indexed before any crash")[0].doc_id == "keeper"
        assert index.search("topic2")[0].doc_id == "doc02"  # retrievers rebuilt from the catalog
        index.close()

    process = start_ingest(index_dir, corpus)
    assert process.wait(timeout=300) == 0, process.stderr.read().decode()
    index = Index.open(index_dir, create=False)
    assert len(index.documents()) == N_DOCS + 1
    assert_whole(index)
    assert index.info()["retrievers_generation"] == index.catalog.generation()
    assert not [p for p in (index_dir / "retrievers").iterdir() if p.name.startswith("current.json.")]


def test_search_while_another_process_writes(tmp_path: Path, corpus: Path):
    index_dir = tmp_path / "ix"
    first = Index.open(index_dir, settings=Settings(dense_model=None))
    first.add(make_pdf(tmp_path / "early.pdf", [["present from the start"]]))
    reader = Index.open(index_dir, create=False)
    process = start_ingest(index_dir, corpus)
    visible, refusals = [], []
    wait_for(lambda: committed(index_dir) >= 2)
    try:
        while process.poll() is None:
            hits = reader.search("document page about", k=50)
            visible.append(len({hit.doc_id for hit in hits}))
            assert reader.search("present from the start")[0].doc_id == "early"
            try:  # a second writer is refused while the first works, never interleaved
                reader.add(tmp_path / "absent.pdf")
                refusals.append(False)
            except IndexLockedError:
                refusals.append(True)
    finally:
        process.wait(timeout=300)
    assert process.returncode == 0
    assert len(visible) > 3 and refusals[0]
    # Refused until the writer let go of the lock (it may take a moment more to exit), then accepted.
    assert refusals == sorted(refusals, reverse=True)
    # Each committed document became searchable while the writer was still at work.
    assert 0 < visible[0] < N_DOCS and visible == sorted(visible)
    assert {hit.doc_id for hit in reader.search("document page about", k=100)} == {
        f"doc{i:02d}" for i in range(N_DOCS)
    }
