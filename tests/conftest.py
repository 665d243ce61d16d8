"""Fixtures of the whole suite.

The model code's device: tests/test_on_device.py runs every torch model family on the device named
by the environment variable ``PAGESIGHT_TEST_DEVICE`` (default ``cpu``, where it checks the
bfloat16 path; ``cuda`` or ``cuda:N`` on a GPU machine), against float32 on the CPU. On a machine
without the indexing stack, run it alone with ``--noconftest`` (it needs none of these fixtures).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from reportlab.lib.pagesizes import letter
from reportlab.pdfgen import canvas
from typer.testing import CliRunner

from pagesight import Index
from pagesight.cli import app
from pagesight.eval.dataset import Dataset
from pagesight.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples" / "corpus"
SHARED = ROOT.parent / "shared" / "data"


def make_pdf(path: Path, pages: list[list[str]], blocks: list | None = None, **canvas_options) -> Path:
    """A Letter PDF with one line of text per entry, 14 pt apart, from the top left (72, 720).

    ``blocks`` gives each page a filled rectangle under its text, ``(x, y, width, height, (r, g, b))``
    in points, so pages also differ in their pixels.
    """
    pdf = canvas.Canvas(str(path), pagesize=letter, invariant=1, **canvas_options)
    for number, lines in enumerate(pages):
        if blocks:
            x, y, width, height, colour = blocks[number]
            pdf.setFillColorRGB(*colour)
            pdf.rect(x, y, width, height, stroke=0, fill=1)
            pdf.setFillColorRGB(0, 0, 0)
        pdf.setFont("Helvetica", 12)
        for row, line in enumerate(lines):
            pdf.drawString(72, 720 - 14 * row, line)
        pdf.showPage()
    pdf.save()
    return path


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """A pagesight command run in this process: what it prints and its exit code, as a subprocess
    would give them, without an interpreter start and a model load per call. Tests of the command
    line as a program (start-up, signals, exit codes of the process) use ``tests.test_cli.pagesight``.
    """
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    if check and result.exit_code != 0:
        raise AssertionError(f"pagesight {' '.join(args)} exited {result.exit_code}: {result.stderr}") from (
            result.exception
            if result.exit_code == 1 and not isinstance(result.exception, SystemExit)
            else None
        )
    return subprocess.CompletedProcess(["pagesight", *args], result.exit_code, result.stdout, result.stderr)


@pytest.fixture(scope="session", autouse=True)
def _model_cache(tmp_path_factory):
    """Derived model files (the ONNX export of MiniLM) go to a folder of this run, not the home."""
    os.environ.setdefault("PAGESIGHT_CACHE", str(tmp_path_factory.mktemp("model-cache")))


@pytest.fixture(scope="session")
def questions() -> list[dict]:
    """The sample dataset's questions as {"question", "doc_id", "page", "answer"}."""
    samples = Dataset.load(ROOT / "samples")
    rows = []
    for qid, judged in samples.qrels.items():
        (page_id,) = judged
        doc_id, page = page_id.rsplit("_", 1)
        rows.append(
            {
                "question": samples.queries[qid],
                "doc_id": doc_id,
                "page": int(page),
                "answer": samples.answers[qid]["answer"],
            }
        )
    return rows


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory) -> Index:
    """The bundled sample corpus, ingested once with dense vectors and OCR."""
    index = Index.open(tmp_path_factory.mktemp("samples") / "index")
    report = index.add([SAMPLES])
    assert report.ok, report.failed
    return index


@pytest.fixture(scope="session")
def lexical_samples(tmp_path_factory) -> Index:
    """The bundled sample corpus, lexical only and without OCR (the scans have no text): indexed in
    about two seconds, for tests of what is built on search rather than of search itself."""
    index = Index.open(
        tmp_path_factory.mktemp("lexical-samples") / "index", settings=Settings(dense_model=None)
    )
    report = index.add([SAMPLES], ocr="never")
    assert report.ok, report.failed
    return index
