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
        lines = [text for text, *_ in tile.spans]  # the row's pieces, as the text layer cut it
        assert lines[lines.index("Interest expense (1)") + 1 :][:3] == ["312", "298", "305"]
        assert "2023 Interest expense" not in lines
        text = dict(index.catalog.tile_texts())[tile.id].split(
            "\n"
        )  # the printed lines: only BM25 reads the cells
        assert "Interest expense (1) 312 298 305" in text and "2023 Interest expense" not in text


def _statement(path: Path) -> list[Span]:
    """A statement set as reports set them: headings over each column, a section label, a label
    wrapped onto two lines, a row whose last column is blank, and a unit of "£m"."""
    import pypdfium2 as pdfium

    from pagesight.text.textlayer import text_layer_spans

    pdf = canvas.Canvas(str(path), pagesize=LETTER, invariant=True)
    pdf.setFont("Helvetica", 9)
    rights = (400, 480, 560)
    for right, heading in zip(rights, ("30 June 2031", "30 June 2030", "Change")):
        pdf.drawRightString(right, 700, heading)
    for right, unit in zip(rights, ("£m", "£m", "%")):
        pdf.drawRightString(right, 688, unit)
    rows = [
        ("Operating costs:", ()),
        ("Staff", ("412.5", "398.0", "4%")),
        ("Premises", ("77.1", "80.3", "(4%)")),
        ("Amortisation of acquired intangible assets and", ()),
        ("impairment of goodwill", ("15.0", "(2.2)", "")),
        ("Total", ("504.6", "476.1", "6%")),
    ]
    y = 672
    for label, figures in rows:
        pdf.drawString(72, y, label)
        for right, figure in zip(rights, figures):
            pdf.drawRightString(right, y, figure)
        y -= 13
    pdf.showPage()
    pdf.save()
    page = pdfium.PdfDocument(str(path))[0]
    return text_layer_spans(page, (850, 1100))


def test_the_text_layer_cuts_a_row_into_its_pieces(tmp_path: Path):
    spans = _statement(tmp_path / "statement.pdf")
    texts = [span.text for span in spans]
    assert texts[texts.index("Staff") :][:4] == ["Staff", "412.5", "398.0", "4%"]
    staff, figure = spans[texts.index("Staff")], spans[texts.index("412.5")]
    assert staff.box[2] < figure.box[0]  # each piece its own box, in its place


def test_cells_stand_under_their_headings_with_their_section_and_whole_labels(tmp_path: Path):
    (table,) = read_tables(_statement(tmp_path / "statement.pdf"))
    assert table.unit == "million"
    assert [column.split(" / ")[0] for column in table.columns] == [
        "30 June 2031",
        "30 June 2030",
        "Change",
    ]
    cells = {(c.label, c.column.split(" / ")[0][-4:]): c for c in table.cells()}
    assert cells["Staff", "2031"].value == 412.5 and cells["Staff", "2031"].section == "Operating costs:"
    assert cells["Premises", "ange"].percent and cells["Premises", "ange"].value == -4
    wrapped = "Amortisation of acquired intangible assets and impairment of goodwill"
    assert cells[wrapped, "2030"].value == -2.2  # the row's last column is blank, not its figures'
    assert (wrapped, "ange") not in cells
