"""A document's context: the title block of its first page and the words of its file name, indexed
with every page so that a question naming the document finds the page that holds the answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from reportlab.lib.pagesizes import LETTER
from reportlab.pdfgen import canvas

from pagesight import Index
from pagesight.records import Span
from pagesight.settings import Settings
from pagesight.text.titles import context, heading, name_words, page_headings
from tests.conftest import make_pdf

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
    else:  # the page alone cannot know: the figure pages' own words score alike
        figures = {hit.page_id: hit.scores["bm25"] for hit in hits if hit.page == 2}
        assert len(set(figures.values())) <= 1
    index.close()


def test_a_page_heading_is_its_opening_short_lines_without_running_ones():
    running = "Table of Contents\nAcme Corporation"
    pages = [
        f"{running}\n12\nConsolidated Statements of Cash Flows\nYears ended December 31, 2018\nNet income 1,204 1,150",
        f"{running}\nNOTE 7. Supplemental Balance Sheet Information\nAccounts payable include the amounts below.",
        f"{running}\nThe company reported a strong year, with sales up in every segment and region.\nOutlook",
        "Acme Corporation\nRisk Factors",  # the company's name opens it too: still running
        "ACME CORP.\nConsolidated Balance Sheets\nAssets",  # a name's full stop ends no sentence
        "of the agreement.\nNotes on the Accounts",  # a sentence's end from the page before
    ]
    assert page_headings(pages) == [
        "Consolidated Statements of Cash Flows\nYears ended December 31, 2018",  # not its rows
        "NOTE 7. Supplemental Balance Sheet Information",
        "",  # it opens with prose
        "Risk Factors",
        "ACME CORP.\nConsolidated Balance Sheets\nAssets",
        "",
    ]
    # Two pages cannot tell a running line from a heading: both keep theirs.
    assert page_headings(["Balance Sheet\nCash 10", "Balance Sheet\nDebt 4"]) == ["Balance Sheet"] * 2
    assert page_headings([]) == []


def _filing(path: Path) -> Path:
    """A filing whose balance sheet (page 2) is a page of numbers under its heading, while a note
    (page 3) talks about the balance sheet in prose."""
    pdf = canvas.Canvas(str(path), pagesize=LETTER)
    rows = [("Cash and equivalents", "1,204"), ("Inventories", "877"), ("Total current assets", "3,961")]
    rows += [("Accounts payable", "640"), ("Total current liabilities", "2,118"), ("Long-term debt", "900")]
    for heading_line, body in (
        ("Acme Corporation", ["Annual Report on Form 10-K for the fiscal year 2018"]),
        ("Consolidated Balance Sheets", [f"{label} {value}" for label, value in rows]),
        (
            "NOTE 9. Leases",
            [
                "Operating lease liabilities are shown in the balance sheet within current liabilities",
                "and other liabilities. The right-of-use assets are also in the balance sheet, and the",
                "amounts are reconciled to the total current liabilities in this note.",
            ],
        ),
        (
            "Consolidated Statements of Operations",
            ["Net sales 9,870", "Cost of sales 6,020", "Net income 1,150"],
        ),
        ("Risk Factors", ["Demand for our products may fall when the economy weakens in our markets."]),
        ("NOTE 4. Inventories", ["Inventories are stated at the lower of cost and net realizable value."]),
    ):
        pdf.setFont("Helvetica", 9)
        pdf.drawString(72, 740, "Table of Contents")
        pdf.setFont("Helvetica-Bold", 14)
        pdf.drawString(72, 712, heading_line)
        pdf.setFont("Helvetica", 11)
        for row, line in enumerate(body):
            pdf.drawString(72, 680 - 16 * row, line)
        pdf.showPage()
    pdf.save()
    return path


@pytest.mark.parametrize("weight", [0, 4])
def test_a_question_naming_a_statement_finds_the_statement_not_the_note(tmp_path: Path, weight: int):
    filing = _filing(tmp_path / "acme-10k.pdf")
    settings = Settings(dense_model=None, heading_weight=weight, thesaurus=None)
    index = Index.open(tmp_path / "index", settings=settings)
    assert index.add(filing).ok
    hits = index.search("total current liabilities in the balance sheet", k=5, mode="lexical")
    if weight:
        assert [hit.page_id for hit in hits[:2]] == ["acme-10k_2", "acme-10k_3"]
    else:  # the note says "balance sheet" twice, the statement only in its heading
        assert hits[0].page_id == "acme-10k_3"
    index.close()


def test_a_tile_without_text_is_not_found_by_its_documents_name(tmp_path: Path):
    pdf = make_pdf(tmp_path / "halvorsen-annual-report.pdf", [["Revenue rose to 12 million."]])
    with Index.open(tmp_path / "index", settings=Settings(dense_model=None, tile_height=400)) as index:
        assert index.add(pdf).ok
        assert index.info()["tiles"] >= 2  # the text in the first, blank paper below
        hits = index.search("Halvorsen annual report", k=5)
        assert [(hit.page_id, hit.tile) for hit in hits] == [("halvorsen-annual-report_1", 0)]
