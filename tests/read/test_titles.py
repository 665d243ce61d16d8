"""A document's context: the title block of its first page and the words of its file name, indexed
with every page so that a question naming the document finds the page that holds the answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from reportlab.lib.pagesizes import LETTER
from reportlab.pdfgen import canvas

from pagesight import Index
from pagesight.read.titles import context, heading, name_words
from pagesight.records import Span
from pagesight.settings import Settings

pytestmark = pytest.mark.timeout(120)


def test_the_title_block_is_the_tallest_horizontal_lines_at_the_top():
    spans = [
        Span("arXiv:2501.17981v1 [cs.IR] 29 Jan 2025", (20, 200, 40, 900), "pdf"),  # vertical stamp
        Span("Can Generative LLMs Create", (100, 100, 700, 130), "pdf"),
        Span("Query Variants?", (100, 132, 400, 162), "pdf"),
        Span("Marwah Alaofi  Luke Gallagher", (100, 180, 500, 200), "pdf"),  # further off
        Span("ABSTRACT", (100, 260, 180, 272), "pdf"),  # body size: not the title
        Span("A FOOTER IN HUGE TYPE", (100, 1000, 700, 1040), "pdf"),  # below the top of the page
    ]
    assert heading(spans, 1100) == "Can Generative LLMs Create Query Variants?"
    assert heading([], 1100) == ""


def test_file_names_become_words():
    assert name_words("acme_10-K.2021") == "acme 10 K 2021"
    assert name_words("AnnualReport2022") == "Annual Report2022"
    assert context("AR-00417", {"title": "Halvorsen Glassworks"}) == "Halvorsen Glassworks\nAR 00417"


def _report(path: Path, company: str, year: int, revenue: int) -> Path:
    page = canvas.Canvas(str(path), pagesize=LETTER)
    page.setFont("Helvetica-Bold", 24)
    page.drawString(72, 700, company)
    page.setFont("Helvetica", 16)
    page.drawString(72, 670, f"Annual Report {year}")
    page.showPage()
    page.setFont("Helvetica", 11)
    page.drawString(72, 700, f"Revenue for the year: {revenue:,} thousand euros")
    page.showPage()
    page.save()
    return path


@pytest.mark.parametrize("weight", [0, 3])
def test_a_question_naming_the_document_finds_its_page(tmp_path: Path, weight: int):
    # The figure pages read alike; only the covers (and not the archive-numbered file names) tell
    # the companies and years apart.
    reports = [
        _report(tmp_path / f"AR-{n}.pdf", company, year, 1000 + n)
        for n, (company, year) in enumerate(
            [("Halvorsen Glassworks", 2021), ("Halvorsen Glassworks", 2022), ("Brightmere Optics", 2022)]
        )
    ]
    index = Index.open(tmp_path / "index", settings=Settings(dense_model=None, context_weight=weight))
    assert index.add(reports).ok
    assert index.catalog.document("AR-1").meta["title"] == "Halvorsen Glassworks Annual Report 2022"
    hits = index.search("Halvorsen Glassworks revenue 2022", k=3, mode="lexical")
    if weight:
        assert hits[0].page_id == "AR-1_2"
    else:  # the page alone cannot know: no hit, or the cover
        assert not hits or hits[0].page_id != "AR-1_2"
    index.close()
