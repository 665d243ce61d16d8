"""Tables read as tables (issue 54): typeset tables' cells with their row labels, column headings
(a spanning heading over years, regions), units, bracketed negatives, footnote marks and totals,
from the text layer and through OCR; the extractive reader's lookups and computed figures citing
each cell's box; quotes that start mid-sentence marked so."""

import json
import random
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from reportlab.pdfgen.canvas import Canvas

from pagesight.answer.base import ContextItem
from pagesight.answer.extractive import ExtractiveReader
from pagesight.answer.extractive.lines import answer_candidates
from pagesight.eval.typeset import PAGE, draw_table, generate, table_spec
from pagesight.records import Hit, Span
from pagesight.text.tables import read_tables, value
from pagesight.text.textlayer import text_layer_spans
from tests.text.test_tables import COSTS

DPI = 100
SIZE = (round(PAGE[0] * DPI / 72), round(PAGE[1] * DPI / 72))


def typeset(path: Path, spec: dict) -> list[Span]:
    canvas = Canvas(str(path), pagesize=PAGE, invariant=True)
    draw_table(canvas, spec)
    canvas.showPage()
    canvas.save()
    return text_layer_spans(pdfium.PdfDocument(str(path))[0], SIZE)


def context(spans: list[Span]) -> list[ContextItem]:
    hit = Hit("report", 1, 0, 1.0, {}, "", [], SIZE, (0.0, 0.0, *map(float, SIZE)))
    return [ContextItem(hit=hit, spans=spans)]


SPEC = COSTS  # the typeset statement the table finder's own tests read


@pytest.fixture(scope="module")
def table_spans(tmp_path_factory) -> list[Span]:
    return typeset(tmp_path_factory.mktemp("tables") / "costs.pdf", SPEC)


def cells_by(spans: list[Span]) -> dict[tuple[str, str], object]:
    (table,) = read_tables(spans)
    return {(c.label, c.column.split(" / ")[-1]): c for c in table.cells()}


@pytest.mark.timeout(30)
def test_columns_under_a_spanning_heading_are_its_years(table_spans):
    (table,) = read_tables(table_spans)
    assert [c.split(" / ")[-1] for c in table.columns] == ["2024", "2023", "2022"]
    assert len(table.rows) == 5  # four rows and the total


@pytest.mark.timeout(30)
def test_unit_in_the_header(table_spans, tmp_path):
    assert read_tables(table_spans)[0].unit == "million"
    other = typeset(tmp_path / "thousands.pdf", {**SPEC, "unit": "(in thousands)"})
    assert read_tables(other)[0].unit == "thousand"


@pytest.mark.timeout(30)
def test_negative_figures_in_brackets_and_dashes(table_spans):
    cells = cells_by(table_spans)
    assert cells["Restructuring charges", "2024"].value == -215
    assert cells["Restructuring charges", "2023"].value is None  # a dash: nil
    assert value("(1,048.5)") == (-1048.5, False)
    assert value("12.5%") == (12.5, True)


@pytest.mark.timeout(30)
def test_footnote_marks_stay_out_of_the_cells(table_spans):
    cells = cells_by(table_spans)
    marked = cells["Interest expense (1)", "2022"]  # the label's mark, not a fourth figure
    assert marked.value == 305
    starred = cells["Net sales", "2024"]
    assert starred.text == "9,120*" and starred.value == 9120 and starred.figure == "9,120"


@pytest.mark.timeout(30)
def test_totals_row_sums_the_rows_read(table_spans):
    (table,) = read_tables(table_spans)
    for c in range(3):
        column = [row[c].value or 0 for row in table.rows]
        assert table.rows[-1][c].label == "Total"
        assert column[-1] == sum(column[:-1])


@pytest.mark.timeout(60)
def test_lookup_cites_the_row_of_its_cell_and_quotes_the_cell_with_its_labels(table_spans):
    reading = ExtractiveReader(dense=False).read("What was cost of sales in 2023?", context(table_spans))
    assert reading.text == "4,020 million"
    cell = cells_by(table_spans)["Cost of sales", "2023"]
    assert reading.cited == {0: [cell.row_box]}  # the label says what the figure is
    label, _, figure = reading.quotes[0].rpartition(": ")
    assert label.startswith("Cost of sales, ") and label.endswith("2023") and figure == "4,020"
    x0, y0, x1, y1 = cell.box
    rx0, ry0, rx1, ry1 = cell.row_box
    pieces = [s.box for s in table_spans if ry0 <= s.box[1] and s.box[3] <= ry1]
    assert rx0 == min(b[0] for b in pieces) and rx1 == max(b[2] for b in pieces)  # the whole row
    assert ry0 <= y0 < y1 <= ry1 and rx0 < x0 < x1 <= rx1  # the cell on it, right of the label


@pytest.mark.timeout(60)
def test_computed_figures_cite_each_row_they_read_once(table_spans):
    reader = ExtractiveReader(dense=False)
    change = reader.read("What was the percent change in net sales from 2022 to 2024?", context(table_spans))
    assert change.text == f"{100 * (9120 - 7990) / 7990:.2f}%"
    assert len(change.cited[0]) == 1  # two cells of one row
    assert "2022" in change.quotes[0] and "2024" in change.quotes[0]  # each cell quoted
    average = reader.read("What was the average interest expense in 2023 and 2024?", context(table_spans))
    assert average.text == f"{(312 + 298) / 2:,.2f} million"  # the cells' unit
    assert len(average.cited[0]) == 1 and average.quotes[0].count("Interest expense") == 2
    margin = reader.read(
        "What is the FY2024 gross ratio? It is defined as: (net sales - cost of sales) / net sales. "
        "Round your answer to two decimal places.",
        context(table_spans),
    )
    ratio = (9120 - 4410) / 9120  # a quotient is offered bare and in percent
    assert (
        margin.text in (f"{ratio:.2f}", f"{100 * ratio:.2f}%") and len(margin.cited[0]) == 2
    )  # each row once


@pytest.mark.timeout(60)
def test_counts_of_periods_past_a_bound_and_of_a_tables_rows_are_offered(table_spans):
    """A count is offered both ways (above the question's bound and below: the scorer weighs
    which the question asks), from its row's periods, and as the rows of the table; the reader
    answers the years net sales exceeded a bound with how many did."""
    reader = ExtractiveReader(dense=False)
    question = "How many years did net sales exceed $8,000 million?"
    counts = {
        (c.text, c.features.get("count_under", 0.0), c.features.get("count_rows", 0.0))
        for c in reader.offer(question, context(table_spans)).candidates
        if c.kind == "count"
    }
    assert ("2", 0.0, 0.0) in counts and ("1", 1.0, 0.0) in counts  # 9,120 and 8,450; 7,990
    assert ("5", 0.0, 1.0) in counts  # four rows and the total
    assert reader.read(question, context(table_spans)).text == "2"


@pytest.mark.timeout(120)
def test_typeset_corpus_cells_read_from_the_text_layer(tmp_path):
    folder = generate(tmp_path, n_tables=6, seed=11)
    right = total = 0
    for line in (folder / "truth.jsonl").open():
        truth = json.loads(line)
        spans = text_layer_spans(pdfium.PdfDocument(str(folder / "corpus" / f"{truth['doc']}.pdf"))[0], SIZE)
        found = {(c.label.removesuffix(" (1)"), c.text) for t in read_tables(spans) for c in t.cells()}
        for cell in truth["cells"]:
            total += 1
            right += (cell["label"], cell["text"]) in found
    assert right >= 0.95 * total


@pytest.mark.timeout(180)
def test_scanned_table_through_ocr(tmp_path):
    pytest.importorskip("tesserocr")
    from pagesight.text.ocr import ocr_spans

    path = tmp_path / "scan.pdf"
    typeset(path, SPEC)
    image = pdfium.PdfDocument(str(path))[0].render(scale=200 / 72).to_pil()
    spans = ocr_spans(image, scale=DPI / 200)
    tables = read_tables(spans)
    assert tables, [s.text for s in spans]
    cells = {(c.label, c.column.split(" / ")[-1]): c.value for c in tables[0].cells()}
    assert cells.get(("Cost of sales", "2023")) == 4020
    assert cells.get(("Restructuring charges", "2022")) == -48


@pytest.mark.timeout(30)
def test_a_quote_read_from_mid_sentence_opens_with_an_ellipsis():
    spans = [
        Span("documents, reaching up to 71.1% overlap at a pool depth of 100.", (10, 10, 500, 24), "pdf"),
        Span("The variants were generated by GPT-3.5 for each topic.", (10, 26, 480, 40), "pdf"),
    ]
    first, second = answer_candidates(context(spans))[:2]
    assert first.answer.startswith("… documents, reaching")
    assert second.answer.startswith("The variants")
    box = first.boxes_of("71.1%")[0]
    assert 10 < box[0] < box[2] < 500  # the value's own box, not the line's


@pytest.mark.timeout(30)
def test_spec_generator_is_deterministic():
    assert table_spec(random.Random(3), 0) == table_spec(random.Random(3), 0)


@pytest.mark.timeout(60)
def test_a_margin_the_table_prints_is_read_not_computed(tmp_path):
    spec = {
        **SPEC,
        "unit": "(%)",
        "rows": [["Gross margin", [41.2, 40.1, 39.5]], ["Operating margin", [12.5, 11.0, 9.8]]],
    }
    spans = typeset(tmp_path / "margins.pdf", spec)
    reader = ExtractiveReader(dense=False)
    question = "What was the operating margin in 2023?"
    assert not [c for c in reader.offer(question, context(spans)).candidates if c.kind == "formula"]
    reading = reader.read(question, context(spans))
    assert reading.text == "11.0%" and len(reading.cited[0]) == 1  # the table's "%", the printed row


STATEMENT = {
    **SPEC,
    "caption": "Consolidated statement (selected lines)",
    "rows": [
        ["Net sales", [9120, 8450, 7990]],
        ["Cost of sales", [4410, 4020, 3975]],
        ["Operating income", [1210, 1105, 990]],
        ["Depreciation and amortization", [340, 325, 310]],
        ["Cash and cash equivalents", [1310, 1190, 1020]],
        ["Accounts receivable", [905, 870, 790]],
        ["Inventories", [1480, 1320, 1275]],
        ["Accounts payable", [1120, 1040, 985]],
        ["Total current assets", [5230, 4870, 4410]],
        ["Total current liabilities", [2615, 2440, 2390]],
        ["Long-term debt", [1850, 1900, 2010]],
        ["Total liabilities", [5120, 5015, 4980]],
    ],
}


@pytest.mark.timeout(60)
def test_figures_named_by_their_textbook_names_are_offered_from_their_cells(tmp_path):
    """definitions.txt's formulas read from the cells each phrase names (an average of one year is
    of it and the year before), each row cited once; a metric's variable name and runs of spaces
    read as words."""
    spans = typeset(tmp_path / "statement.pdf", STATEMENT)
    reader = ExtractiveReader(dense=False)

    def offered(question: str) -> dict[str, object]:
        return {c.text: c for c in reader.offer(question, context(spans)).candidates if c.kind == "formula"}

    assert f"{5230 / 2615:.2f}" in offered("What is the current ratio in FY2024?")
    turnover = offered("What is the FY2024 inventory turnover ratio?")[f"{4410 / ((1480 + 1320) / 2):.2f}"]
    assert len(turnover.cited[0]) == 2  # the cost of sales, and two years' inventories: one row
    assert f"{4870 - 2440:,.2f} million" in offered("What is working capital in FY2023?")
    assert f"{990 + 310:,.2f} million" in offered("What is EBITDA for FY2022?")
    assert f"{1310 / 2615:.2f}" in offered("What is cash_ratio in FY2024?")
    assert f"{4410 / ((1120 + 1040) / 2):.2f}" in offered("What is payables  turnover in FY2024?")
    days = [
        365 * ((1480 + 1320) / 2) / 4410,
        365 * ((905 + 870) / 2) / 9120,
        365 * ((1120 + 1040) / 2) / 4410,
    ]
    cycle = offered("What is the cash conversion cycle in FY2024?")[f"{days[0] + days[1] - days[2]:.2f}"]
    assert len(cycle.cited[0]) == 5  # each row once: five rows, eight cells
    assert not offered("What is the lighthouse keeper's ratio in FY2024?")  # no definition, no formula


@pytest.mark.timeout(30)
def test_dates_heading_two_columns_on_two_lines_each_and_section_labels_above_the_rows():
    """A balance sheet's heading as a text layer gives it: "August 29," over "2021" beside
    "August 30," over "2020", then section labels before the first row (COSTCO's 10-K)."""
    lines = [
        ("(amounts in millions, except par value and share data)", (264, 159, 586, 173)),
        ("August 29,", (564, 189, 622, 201)),
        ("2021", (581, 200, 606, 212)),
        ("August 30,", (722, 189, 779, 201)),
        ("2020", (738, 200, 763, 212)),
        ("ASSETS", (249, 216, 294, 228)),
        ("CURRENT ASSETS", (27, 231, 129, 243)),
        ("Cash and cash equivalents $ 11,258 $ 12,277", (49, 246, 820, 260)),
        ("Short-term investments 917 1,028", (49, 262, 820, 275)),
        ("Receivables, net 1,803 1,550", (49, 277, 820, 292)),
    ]
    (table,) = read_tables([Span(text, box, "pdf") for text, box in lines])
    assert table.columns == ["August 29, / 2021", "August 30, / 2020"] and table.unit == "million"
    cells = {(c.label, c.column[-4:]): c.text for c in table.cells()}
    assert cells[("Short-term investments", "2021")] == "917"


@pytest.mark.timeout(30)
def test_a_long_row_label_does_not_shift_dates_to_the_next_column():
    """A cell's place is estimated from its characters' place in its line, which a long label
    skews to the right; the dates side by side above still head the columns in their order."""
    lines = [
        ("(amounts in millions)", (362, 158, 488, 172)),
        ("52 Weeks Ended 52 Weeks Ended 52 Weeks Ended", (501, 183, 812, 194)),
        ("August 29,", (515, 197, 566, 208)),
        ("2021", (529, 207, 551, 218)),
        ("August 30,", (631, 197, 682, 208)),
        ("2020", (645, 207, 667, 218)),
        ("September 1,", (741, 197, 804, 208)),
        ("2019", (762, 207, 784, 218)),
        ("CASH FLOWS FROM OPERATING ACTIVITIES", (27, 222, 245, 233)),
        ("Net income including noncontrolling interests $ 5,079 $ 4,059 $ 3,704", (36, 235, 819, 246)),
        ("Depreciation and amortization 1,781 1,645 1,492", (41, 272, 819, 283)),
        ("Non-cash lease expense 286 194 —", (41, 286, 819, 297)),
    ]
    (table,) = read_tables([Span(text, box, "pdf") for text, box in lines])
    assert [c.rsplit(" / ", 1)[-1] for c in table.columns] == ["2021", "2020", "2019"]
    cells = {(c.label, c.column[-4:]): c.text for c in table.cells()}
    assert cells[("Depreciation and amortization", "2021")] == "1,781"


@pytest.mark.timeout(60)
def test_the_document_a_question_names_is_told_to_the_scorer(table_spans, tmp_path):
    other = typeset(tmp_path / "other.pdf", {**SPEC, "rows": [["Cost of sales", [7310, 7020, 6875]]]})

    def item(doc_id: str, spans: list[Span]) -> ContextItem:
        hit = Hit(doc_id, 1, 0, 1.0, {}, "", [], SIZE, (0.0, 0.0, *map(float, SIZE)))
        return ContextItem(hit=hit, spans=spans)

    ranked = [item("QUAYSIDE_2031_10K", other), item("LANTERNFISH_2031_10K", table_spans)]
    reader = ExtractiveReader(dense=False)
    for question, named in (
        ("What was the FY2023 cost of sales for Lanternfish?", 1),
        ("What was the FY2023 cost of sales for Quayside?", 0),
    ):
        offer = reader.offer(question, ranked)
        cells = [
            c
            for c in offer.candidates
            if c.kind == "cell" and "Cost of sales" in next(iter(c.quotes.values()))
        ]
        assert {c.item for c in cells if c.features["document_named"]} == {named}
        assert reader.read(question, ranked).cited.keys() == {named}
