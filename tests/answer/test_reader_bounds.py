"""The extractive reader attacked with what a request may send (issue 60): a question whose
patterns backtracked (a 4,000-character "what is X" and spaces, a ratio with many sides), a
formula of many cell phrases over a long table document, a formula past a float's range. Each
costs what its length does, or is declined: never a frozen server, never an error."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from reportlab.pdfgen.canvas import Canvas

from pagesight.answer.base import ContextItem
from pagesight.answer.extractive import ExtractiveReader, formulas
from pagesight.eval.typeset import ITEMS, PAGE, draw_table
from pagesight.records import Hit
from pagesight.text.tables import read_tables
from tests.answer.test_tables import SIZE, context, typeset

MAX_QUESTION = 4000  # request.MAX_QUERY


def cpu(call: Callable[[], object], repeats: int = 3) -> float:
    """The least CPU seconds of ``repeats`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


def grows_linearly(make: Callable[[int], str], read: Callable[[str], object]) -> tuple[bool, float, float]:
    """Whether ``read`` of ``make(n)`` costs at most about 4x at 4x the length (with a wide margin:
    a quadratic reading costs 16x, a cubic one 64x), CPU time ignored under 20 ms."""
    short, long = cpu(lambda: read(make(MAX_QUESTION // 4))), cpu(lambda: read(make(MAX_QUESTION)))
    return long < 0.02 or long < 9 * max(short, 0.001), short, long


@pytest.fixture(scope="module")
def statement(tmp_path_factory) -> list[ContextItem]:
    from tests.answer.test_tables import SPEC

    return context(typeset(tmp_path_factory.mktemp("bounds") / "costs.pdf", SPEC))


@pytest.mark.timeout(300)
def test_a_question_of_what_is_x_and_spaces_costs_what_its_length_does(statement):
    """Defect 1: "what is X" + spaces + "!" (its subject read by a pattern that backtracked
    cubically: 51.6 s of CPU at 4,000 characters, the whole server held)."""
    reader = ExtractiveReader(dense=False)

    def question(n: int) -> str:
        return "what is X" + " " * (n - len("what is X!")) + "!"

    assert len(question(MAX_QUESTION)) == MAX_QUESTION
    linear, short, long = grows_linearly(question, lambda q: reader.read(q, statement))
    assert linear, f"{short:.3f} s of CPU at {MAX_QUESTION // 4} characters, {long:.3f} s at {MAX_QUESTION}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("side", ["what is a to ", "calculate a to ", "ratio of a to "])
def test_a_ratio_of_many_sides_costs_what_its_length_does(statement, side):
    """Defect 2: a ratio's sides read by lazy groups between " to "s, from each opening on (cubic:
    6.8 s of CPU at 4,000 characters)."""
    reader = ExtractiveReader(dense=False)

    opening = "The FY2021 ratio: "  # a question of a year's ratio has its sides read

    def question(n: int) -> str:
        return opening + side * ((n - len(opening) - 1) // len(side)) + "!"

    linear, short, long = grows_linearly(question, lambda q: reader.read(q, statement))
    assert linear, f"{short:.3f} s of CPU at {MAX_QUESTION // 4} characters, {long:.3f} s at {MAX_QUESTION}"


NAMES = [
    "alfa",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
    "kilo",
    "lima",
    "mike",
]
PLACES = ["north", "south", "east", "west", "central", "inland", "coastal", "upland"]


def label(n: int) -> str:
    """The ``n``-th row label of a long statement (each a distinct combination of words)."""
    item, rest = ITEMS[n % len(ITEMS)], n // len(ITEMS)
    return f"{item} {NAMES[rest % len(NAMES)]} {PLACES[rest // len(NAMES) % len(PLACES)]}"


def statement_pages(folder, pages: int, rows: int = 30) -> list[ContextItem]:
    """A long statement: ``pages`` pages of ``rows`` rows each, every label distinct."""
    items = []
    for page in range(pages):
        labels = [label(page * rows + r) for r in range(rows)]
        spec = {
            "caption": f"Table {page + 1}. Consolidated results",
            "unit": "(in millions)",
            "spanning": "Year ended December 31,",
            "columns": ["2024", "2023", "2022"],
            "rows": [[label, [100 + r, 200 + r, 300 + r]] for r, label in enumerate(labels)],
            "footnote": 0,
        }
        path = folder / f"page{page}.pdf"
        canvas = Canvas(str(path), pagesize=PAGE, invariant=True)
        draw_table(canvas, spec)
        canvas.showPage()
        canvas.save()
        spans = typeset(path, spec)
        hit = Hit("statement", page + 1, 0, 1.0 - page / 100, {}, "", [], SIZE, (0.0, 0.0, *map(float, SIZE)))
        items.append(ContextItem(hit=hit, spans=spans))
    return items


def formula(phrases: int) -> str:
    parts = [f"FY2024 {label(n).lower()}" for n in range(phrases)]
    return "The score is defined as: " + " + ".join(parts) + ". What is the FY2024 score?"


@pytest.mark.timeout(120)
def test_a_formula_of_many_phrases_stems_each_row_label_once(tmp_path, monkeypatch):
    """Defect 3: a formula of many cell phrases over a long table document (195 phrases over 40
    pages: 29.8 s of CPU an ask, every phrase stemming every row label again). Each label is
    stemmed once, however many phrases read it; the figure is still computed from every cell."""
    context = statement_pages(tmp_path, pages=4)
    labels = {cell.label for item in context for t in read_tables(item.spans) for cell in t.cells()}
    question = formula(40)
    read: list[str] = []
    stem = formulas.terms
    monkeypatch.setattr(formulas, "terms", lambda text: read.append(text) or stem(text))
    offer = ExtractiveReader(dense=False).offer(question, context)
    expected = sum(100 + n % 30 for n in range(40))  # each phrase's FY2024 cell
    (computed,) = [c for c in offer.candidates if c.kind == "formula"]
    assert computed.text.startswith(f"{expected:,.2f}"), computed
    assert sum(len(boxes) for boxes in computed.cited.values()) == 40  # every cell cited
    stemmed_labels = [text for text in read if text.strip() in labels]
    assert len(stemmed_labels) <= len(labels), f"{len(stemmed_labels)} stemmings of {len(labels)} labels"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("written", ["9" * 400, "(" + "9" * 300 + ") * (" + "9" * 300 + ")"])
def test_a_formula_past_a_floats_range_is_declined_not_an_error(statement, written):
    """Defect 8: a formula whose figure no float holds answered 500 (OverflowError)."""
    question = f"The figure is defined as: {written} / FY2024 net sales. What is the figure?"
    reading = ExtractiveReader(dense=False).read(question, statement)
    assert "inf" not in reading.text.lower()
