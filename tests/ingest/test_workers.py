"""The reader pool on real processes: a file that kills its worker or hangs fails alone."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from pagesight import Index
from pagesight.ingest.workers import Crashed, Job, read_files
from pagesight.settings import Settings
from tests.conftest import make_pdf


def read_or_die(path: str, doc_id: str, known_sha256, settings, ocr) -> str:
    """Runs in the workers: SIGKILLs itself on 'crash*' files, sleeps on 'hang*', else reads."""
    if doc_id.startswith("crash"):
        os.kill(os.getpid(), signal.SIGKILL)
    if doc_id.startswith("hang"):
        time.sleep(60)
    return f"read {doc_id} in {os.getpid()}"


def ocr_threads(path: str, doc_id: str, known_sha256, settings, ocr) -> int:
    from pagesight.read.ocr import threads

    return threads()


def jobs(*names: str) -> list[Job]:
    return [Job(Path(f"/nowhere/{name}.pdf"), name, None) for name in names]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_that_kills_its_worker_fails_alone(workers: int):
    names = ["a", "crash1", "b", "c", "crash2", "d", "e", "f", "g", "crash3"]
    outcomes = dict(
        (job.doc_id, outcome)
        for job, outcome in read_files(
            jobs(*names), Settings(), "auto", workers=workers, timeout=30, max_memory=None, reader=read_or_die
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
        jobs("a", "b"), Settings(), "auto", workers=workers, timeout=30, max_memory=None, reader=ocr_threads
    )
    assert {outcome for _, outcome in results} == {max(1, (os.cpu_count() or 1) // workers)}


@pytest.mark.timeout(120)
def test_a_file_that_hangs_times_out_alone():
    names = ["a", "hang", "b", "c"]
    results = read_files(
        jobs(*names), Settings(), "auto", workers=2, timeout=2, max_memory=None, reader=read_or_die
    )
    outcomes = {job.doc_id: outcome for job, outcome in results}
    assert isinstance(outcomes.pop("hang"), FutureTimeout)
    assert all(outcome.startswith("read ") for outcome in outcomes.values())


@pytest.mark.timeout(180)
def test_index_reports_a_timed_out_file_and_keeps_the_rest(tmp_path: Path):
    folder = tmp_path / "docs"
    folder.mkdir()
    make_pdf(folder / "quick.pdf", [["a short page about lighthouses"]])
    scans = []
    for number in range(30):  # image-only pages: each needs OCR, 30 cannot fit in 1.5 s
        scan = Image.new("RGB", (850, 1100), "white")
        draw = ImageDraw.Draw(scan)
        for row in range(40):
            draw.text((60, 60 + 25 * row), f"ledger page {number} line {row} received", fill="black")
        scans.append(scan)
    scans[0].save(folder / "slow.pdf", save_all=True, append_images=scans[1:])
    index = Index.open(tmp_path / "ix", settings=Settings(dense_model=None))
    report = index.add(folder, timeout=1.5)
    assert report.added == ["quick"]
    assert report.failed == [(str(folder / "slow.pdf"), "timed out after 1.5 s")]
    assert index.search("lighthouses")[0].doc_id == "quick"
