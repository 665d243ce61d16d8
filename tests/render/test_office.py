"""Office files through LibreOffice: a slide deck, a Word document and a spreadsheet are ingested as
pages with a text layer, searched, and rendered again for answers; a broken file fails alone, and a
machine without LibreOffice gets one line saying what to install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.render.sources import open_source
from pagesight.settings import Settings

pptx = pytest.importorskip("pptx")
docx = pytest.importorskip("docx")
openpyxl = pytest.importorskip("openpyxl")
pytestmark = [
    pytest.mark.skipif(
        shutil.which("soffice") is None, reason="no LibreOffice (apt-get install libreoffice-core)"
    ),
    pytest.mark.timeout(240),
]

SLIDES = [
    ("Quarterly review", "Revenue grew 12 percent in the northern region"),
    ("Hiring plan", "Forty engineers join the Lisbon office in spring"),
    ("Risks", "Supplier Brightmere Supply may miss the March deadline"),
]


def deck(path: Path) -> Path:
    presentation = pptx.Presentation()
    for title, body in SLIDES:
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    presentation.save(path)
    return path


def letter(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("Warehouse relocation", level=1)
    document.add_paragraph("The Delta warehouse moves to Rotterdam on 4 May; orders ship from there.")
    document.add_page_break()
    document.add_paragraph("Appendix: the lens blank lot 22K stays in the old building.")
    document.save(path)
    return path


def sheet(path: Path) -> Path:
    book = openpyxl.Workbook()
    rows = [("Region", "Q1", "Q2"), ("West", 4215, 4460), ("East", 3905, 4020)]
    for row in rows:
        book.active.append(row)
    book.save(path)
    return path


@pytest.fixture(scope="module")
def office_index(tmp_path_factory) -> Index:
    folder = tmp_path_factory.mktemp("office")
    deck(folder / "board deck.pptx")
    letter(folder / "relocation.docx")
    sheet(folder / "revenue.xlsx")
    (folder / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    index = Index.open(tmp_path_factory.mktemp("office-index") / "index", settings=Settings(dense_model=None))
    report = index.add([folder])
    index.report = report
    return index


def test_slides_pages_and_sheets_become_searchable_pages(office_index: Index):
    report = office_index.report
    assert sorted(report.added) == ["board deck", "relocation", "revenue"], report.failed
    assert [Path(path).name for path, _ in report.failed] == ["broken.docx"]
    documents = {d["id"]: d for d in office_index.document_list()}
    assert documents["board deck"]["pages"] == 3 and documents["board deck"]["type"] == "office"
    assert documents["relocation"]["pages"] == 2
    assert [h.page_id for h in office_index.search("Lisbon engineers", k=1)] == ["board deck_2"]
    assert [h.page_id for h in office_index.search("lens blank lot", k=1)] == ["relocation_2"]
    hit = office_index.search("West region", k=1)[0]
    assert hit.page_id == "revenue_1" and hit.boxes  # a text layer with boxes, not OCR
    assert "4215" in hit.snippet or "4,215" in hit.snippet
    assert (
        office_index.ask("Which supplier may miss the March deadline?").citations[0].page_id == "board deck_3"
    )


def test_pages_render_again_from_the_cached_pdf(office_index: Index, tmp_path: Path):
    image = office_index.page_image("board deck", 1)
    assert image.width > image.height  # a slide is landscape
    assert image.convert("L").getextrema()[0] < 100  # something is drawn on it
    # The cache holds the conversion of the indexed content: the file may even be gone.
    row = office_index.catalog.document("relocation")
    moved = tmp_path / "moved.docx"
    shutil.move(row.source, moved)
    try:
        assert open_source(row.source, "office", row.sha256).n_pages == 2
    finally:
        shutil.move(moved, row.source)


def test_a_machine_without_libreoffice_gets_one_line(tmp_path: Path):
    # A fresh process (ingestion's workers start from a fork server made with the caller's PATH).
    environment = {**os.environ, "PATH": str(tmp_path), "PAGESIGHT_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "pagesight", "ingest", str(deck(tmp_path / "deck.pptx"))]
        + ["--index", str(tmp_path / "index"), "--no-dense"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=200,
    )
    assert done.returncode == 1
    failures = [line for line in done.stderr.splitlines() if "deck.pptx:" in line]
    assert len(failures) == 1 and "apt-get install libreoffice-core" in failures[0], done.stderr
