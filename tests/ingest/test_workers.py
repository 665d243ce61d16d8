"""The worker pool on real processes: a file that kills its worker or hangs fails alone."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from pagesight import Index
from pagesight.ingest.options import TextOptions
from pagesight.ingest.workers import Crashed, FileTask, TimedOut, TimeLimit, read_files
from pagesight.settings import Settings
from tests.conftest import make_pdf


def read_or_die(path: str, doc_id: str, known_sha256, settings, text_options, on_page) -> str:
    """Runs in the workers: SIGKILLs itself on 'crash*' files, sleeps on 'hang*', reads 'pagesN'
    in N pages of 0.4 s each and 'stallN' in N pages before hanging, else reads at once."""
    if doc_id.startswith("crash"):
        os.kill(os.getpid(), signal.SIGKILL)
    if doc_id.startswith(("pages", "stall")):
        for page in range(1, int(doc_id[5:]) + 1):
            time.sleep(0.4)
            on_page(page)
    if doc_id.startswith(("hang", "stall")):
        time.sleep(60)
    return f"read {doc_id} in {os.getpid()}"


def ocr_threads(path: str, doc_id: str, known_sha256, settings, text_options, on_page) -> int:
    from pagesight.text.ocr import threads

    return threads()


def niceness(path: str, doc_id: str, known_sha256, settings, text_options, on_page) -> int:
    return os.nice(0)


def tasks(*names: str) -> list[FileTask]:
    return [FileTask(Path(f"/nowhere/{name}.pdf"), name, None) for name in names]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_that_kills_its_worker_fails_alone(workers: int):
    names = ["a", "crash1", "b", "c", "crash2", "d", "e", "f", "g", "crash3"]
    outcomes = dict(
        (task.doc_id, outcome)
        for task, outcome in read_files(
            tasks(*names),
            Settings(),
            TextOptions(),
            workers=workers,
            limit=TimeLimit(30),
            max_memory=None,
            extractor=read_or_die,
        )
    )
    assert list(outcomes) == names  # every file answered once, in order
    for name, outcome in outcomes.items():
        if name.startswith("crash"):
            assert isinstance(outcome, Crashed), (name, outcome)
            assert str(outcome).startswith("reader process crashed")
        else:
            assert outcome.startswith(f"read {name} in "), (name, outcome)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_workers_share_the_cores_for_ocr(workers: int):
    results = read_files(
        tasks("a", "b"),
        Settings(),
        TextOptions(),
        workers=workers,
        limit=TimeLimit(30),
        max_memory=None,
        extractor=ocr_threads,
    )
    assert {outcome for _, outcome in results} == {max(1, (os.cpu_count() or 1) // workers)}


@pytest.mark.timeout(120)
def test_a_background_ingestion_reads_at_a_lower_priority():
    """A server's ingestion (``IngestOptions.nice``) runs its worker processes niced, so searches
    keep the cores; a plain one at the caller's priority."""
    mine = os.nice(0)
    for nice in (0, 10):
        results = read_files(
            tasks("a"), Settings(), TextOptions(), workers=1, limit=TimeLimit(30), max_memory=None,
            extractor=niceness, nice=nice,
        )  # fmt: skip
        assert [outcome for _, outcome in results] == [min(19, mine + nice)]


@pytest.mark.timeout(120)
def test_a_file_that_hangs_times_out_alone():
    names = ["a", "hang", "b", "c"]
    results = read_files(
        tasks(*names),
        Settings(),
        TextOptions(),
        workers=2,
        limit=TimeLimit(2),
        max_memory=None,
        extractor=read_or_die,
    )
    outcomes = {task.doc_id: outcome for task, outcome in results}
    hang = outcomes.pop("hang")
    assert isinstance(hang, TimedOut) and str(hang) == "timed out after 2 s"
    assert all(outcome.startswith("read ") for outcome in outcomes.values())


@pytest.mark.timeout(120)
def test_the_time_limit_grows_with_the_pages_read():
    # 1.5 s and 1 s a page: 12 pages of 0.4 s (4.8 s in all) are read; a file that stalls after
    # 3 pages is stopped at 1.5 + 3 s, one that never reads a page at 1.5 s.
    names = ["pages12", "hang", "stall3", "a"]
    limit = TimeLimit(1.5, per_page=1.0)
    results = read_files(
        tasks(*names),
        Settings(),
        TextOptions(),
        workers=2,
        limit=limit,
        max_memory=None,
        extractor=read_or_die,
    )
    outcomes = {task.doc_id: outcome for task, outcome in results}
    assert list(outcomes) == names
    assert outcomes["pages12"].startswith("read pages12") and outcomes["a"].startswith("read a")
    assert str(outcomes["hang"]) == "timed out after 1.5 s"
    assert str(outcomes["stall3"]) == "timed out after 4.5 s (3 pages read, 1 s a page)"
    # Without the allowance a page, the long file is stopped like the hanging one.
    (outcome,) = (
        o
        for _, o in read_files(
            tasks("pages12"),
            Settings(),
            TextOptions(),
            workers=1,
            limit=TimeLimit(1.5, 0),
            max_memory=None,
            extractor=read_or_die,
        )
    )
    assert isinstance(outcome, TimedOut) and outcome.pages < 12


def test_a_time_limit_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        TimeLimit(0)
    with pytest.raises(ValueError, match="positive"):
        TimeLimit(10, per_page=-1)


@pytest.mark.timeout(180)
def test_index_reports_a_timed_out_file_and_keeps_the_rest(tmp_path: Path):
    folder = tmp_path / "docs"
    folder.mkdir()
    make_pdf(folder / "quick.pdf", [["a short page about lighthouses"]])
    scans = []
    for number in range(30):  # image-only pages of 40 lines: each needs seconds of OCR, 30 more than 10 s
        scan = Image.new("RGB", (850, 1100), "white")
        draw = ImageDraw.Draw(scan)
        for row in range(40):
            draw.text((60, 60 + 25 * row), f"ledger page {number} line {row} received", fill="black")
        scans.append(scan)
    scans[0].save(folder / "slow.pdf", save_all=True, append_images=scans[1:])
    index = Index.open(tmp_path / "ix", settings=Settings(dense_model=None))
    report = index.add(folder, timeout=10, page_timeout=0)
    assert report.added == ["quick"]
    assert report.failed == [(str(folder / "slow.pdf"), "timed out after 10 s")]
    assert index.search("lighthouses")[0].doc_id == "quick"
    # With time for each page read, the same long scan is indexed whole (10 s are enough for the
    # worker to start and read its first page on a busy machine).
    report = index.add(folder, timeout=10)
    assert report.added == ["slow"] and not report.failed
    assert index.search("ledger page 29 line 7")[0].page_id == "slow_30"
