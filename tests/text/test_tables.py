"""Table cells as BM25 fields (issue 54): each cell of a tile's tables indexed as its column heading
and row label together (``text.tables.cell_text``), so a question naming a row and a year
finds the table that holds that cell, while the tile's text, lines and boxes stay as read."""

from pathlib import Path

import pytest
from reportlab.lib.pagesizes import LETTER
from reportlab.pdfgen import canvas

from pagesight import Index
from pagesight.eval.typeset import draw_table
from pagesight.records import Span
from pagesight.settings import Settings
from pagesight.text.tables import cell_text, read_tables

COSTS = {
    "caption": "Table 1. Consolidated costs",
    "unit": "(in millions)",
    "spanning": "Year ended December 31,",
    "columns": ["2024", "2023", "2022"],
    "rows": [
        ["Net sales", [9120, 8450, 7990]],
        ["Cost of sales", [4410, 4020, 3975]],
        ["Restructuring charges", [-215, 0, -48]],
        ["Interest expense", [312, 298, 305]],
    ],
    "footnote": 3,
}
PROSE = [
    "Our interest expense depends on the rates of our credit facility. In 2023 we repaid part",
    "of the term loan, and interest expense on the remaining notes is fixed. We expect interest",
    "expense to stay near its level as long as the facility is undrawn.",
]


def _filing(path: Path) -> Path:
    """A filing: its costs table on page 1, a note that talks about interest expense on page 2."""
    pdf = canvas.Canvas(str(path), pagesize=LETTER, invariant=True)
    draw_table(pdf, COSTS)
    pdf.showPage()
    pdf.setFont("Helvetica-Bold", 14)
    pdf.drawString(72, 712, "NOTE 8. Debt")
    pdf.setFont("Helvetica", 11)
    for row, line in enumerate(PROSE):
        pdf.drawString(72, 680 - 16 * row, line)
    pdf.showPage()
    pdf.save()
    return path


def _line(text: str, top: float) -> Span:
    return Span(text, (72.0, top, 72.0 + 7 * len(text), top + 12), "pdf")


def test_each_cell_is_its_column_heading_and_row_label():
    spans = [_line("(in millions) 2024 2023", 10), _line("Net sales 9,120 8,450", 30)]
    spans.append(_line("Interest expense 312 (298)", 50))
    assert cell_text(spans).split("\n") == [
        "2024 Net sales",
        "2023 Net sales",
        "2024 Interest expense",
        "2023 Interest expense",
    ]


def test_prose_and_headingless_figures_give_no_cells():
    prose = [_line(text, 10 + 20 * row) for row, text in enumerate(PROSE)]
    assert cell_text(prose) == ""
    headless = [_line("Net sales 9,120 8,450", 10), _line("Interest expense 312 298", 30)]
    assert read_tables(headless) and cell_text(headless) == ""  # a table, but no column named


def test_rows_of_years_alone_are_no_table():
    """Dates in two rows (a table's headings with no body below them) read as no table rather than
    stopping the reader (the finder once raised StopIteration on them)."""
    assert read_tables([_line("2024 2023", 10), _line("2022 2021", 30)]) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("store", ["local", "qdrant"])
@pytest.mark.parametrize("weight", [0, 1])
def test_a_question_naming_a_row_and_a_year_finds_the_table(tmp_path: Path, weight: int, store: str):
    filing = _filing(tmp_path / "acme-10k.pdf")
    settings = Settings(dense_model=None, table_weight=weight, thesaurus=None, heading_weight=0)
    location = tmp_path / "index" if store == "local" else f"qdrant:{tmp_path / 'q'}"
    with Index.open(location, settings=settings) as index:
        assert index.add(filing).ok
        hits = index.search("2023 interest expense", k=5, mode="lexical")
        if weight:
            assert hits[0].page_id == "acme-10k_1"
        else:  # the note says "interest expense" three times, the table once, its year far above
            assert hits[0].page_id == "acme-10k_2"
        tile = index.catalog.tile_at("acme-10k", 1, 0)
        lines = [text for text, *_ in tile.spans]
        assert "Interest expense (1) 312 298 305" in lines and not any(
            line.startswith("2023") for line in lines
        )
        assert dict(index.catalog.tile_texts())[tile.id] == "\n".join(lines)  # only BM25 reads the cells
