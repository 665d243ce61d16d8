"""Questions answered from table cells: a lookup (the cell whose row label and column heading the
question names) or a figure computed from cells (a percent change, an average, an "X margin", or a
formula the question writes out: "DPO is defined as: 365 * (average accounts payable between
FY2016 and FY2017) / (FY2017 COGS + change in inventory between FY2016 and FY2017)").

A row answers a phrase when the phrase, with the words a thesaurus gives its terms ("capex" ->
"purchases of property plant and equipment"), holds most of the row's label; a column when its
headings hold the year asked for. Every cell used is cited with its box; the answer is the figure
with its unit, the row and column it was read from in the citation's text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pagesight.answer.base import ContextItem, Reading
from pagesight.answer.extractive.questions import asked_kind
from pagesight.answer.extractive.tables import Cell, read_tables
from pagesight.encode.lexical import terms

_YEAR = re.compile(r"(?<!\d)((?:19|20)\d\d)(?!\d)")
_DEFINED = re.compile(
    r"(?:\bis defined as|\bdefine [^.]*? as\b|\bcalculated? [^.]*? as\b|=)\s*:?\s*(.+?)(?:\.(?:\s|$)|\?|$)",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"\d+(?:\.\d+)?(?![\w])|[*/+×÷()]|\s-\s|[^*/+×÷()]+?(?=\s-\s|[*/+×÷()]|$)")
_CHANGE = re.compile(r"\b(year[- ]over[- ]year|percent(?:age)? change|growth|change in)\b", re.IGNORECASE)
_AVERAGE = re.compile(r"\baverage\b", re.IGNORECASE)
_MARGIN = re.compile(r"\b([\w&]+(?: [\w&]+){0,2}?) (?:% )?margin\b", re.IGNORECASE)
_PERCENT = re.compile(r"\b(percent|percentage|in %|as a %|% margin|margin)\b", re.IGNORECASE)
_DECIMALS = re.compile(r"\bround[^.]*?\b(one|two|three|\d) decimal", re.IGNORECASE)
_SCALE = re.compile(r"\b(?:in|usd|\$)\s*(?:usd\s+)?(thousands|millions|billions)\b", re.IGNORECASE)
_NOT_A_FIGURE = re.compile(
    r"^\s*(is|are|was|were|does|do|did|has|have|can)\b|\b(which|who|where|when)\b", re.I
)
# a part of a year (a quarter, a half, some months): its figure is not a year's column, so such a
# question is left to the line reader (benchmarks/reader r01: "net sales in Q4 of fiscal 2022")
_PART_OF_YEAR = re.compile(
    r"\b(?:Q[1-4]|H[12]|quarter|quarterly|half|halves|(?:three|six|nine) months)\b", re.IGNORECASE
)
_GENERIC = frozenset(terms("the a of for in on and total amount year end fy value what is was how much its"))
# what statements print for terms questions use (a thesaurus adds words; these replace them)
_PRINTED = {
    "revenues?": ("total revenues", "total net sales", "net sales"),
    "net profit": ("net income", "net earnings"),
}
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
_PLACES = {"one": 1, "two": 2, "three": 3}
MIN_MATCH = 0.5  # the share of a row label's words a phrase must hold ("inventories" holds half of "Merchandise inventories")
EXPANDED = 0.8  # a label word the thesaurus gave counts this much


@dataclass
class Used:
    """A cell read for an answer, with the context item it stands in and its table's unit."""

    cell: Cell
    item: int
    unit: str


class Cells:
    """Every table cell of a context, found by the phrase naming its row and by its year."""

    def __init__(self, context: Sequence[ContextItem], thesaurus: str | None):
        self.thesaurus = thesaurus
        self.cells: list[Used] = []
        for i, item in enumerate(context):
            for table in read_tables(item.spans):
                self.cells += [Used(c, i, table.unit) for c in table.cells() if c.value is not None]
        self.used: list[Used] = []

    def find(self, phrase: str, year: str) -> float | None:
        """The value of the row ``phrase`` names in the column of ``year`` (None: no row does);
        a phrase naming revenue or net profit also reads as the names statements print them by."""
        for name in _names(phrase):
            found = self._find(name, year)
            if found is not None:
                return found
        return None

    def _find(self, phrase: str, year: str) -> float | None:
        asked = set(terms(phrase)) - _GENERIC
        if not asked:
            return None
        extra = set(terms(_expanded(phrase, self.thesaurus))) - asked
        best, best_score = None, (MIN_MATCH, 0)
        for used in self.cells:
            if not _column(used.cell.column, year, asked):
                continue
            label = _label_terms(used.cell.label)
            held = sum(1.0 if t in asked else EXPANDED if t in extra else 0.0 for t in label)
            score = (held / max(len(label), 1), len(label & (asked | extra)))
            if score[1] and score > best_score:
                best, best_score = used, score
        if best is None:
            return None
        self.used.append(best)
        return best.cell.value


def _column(heading: str, year: str, asked: set[str]) -> bool:
    """The column is the one asked for: its headings hold the year, or, in a table by segment or
    region (no year heading it), they name one the question names."""
    years = _YEAR.findall(heading)
    if years:
        return year in years
    named = set(terms(heading)) - _GENERIC
    return bool(named) and named <= asked


def _names(phrase: str) -> list[str]:
    """``phrase``, after it with each of its terms statements print otherwise in their words."""
    found = []
    for term, names in _PRINTED.items():
        if re.search(rf"\b{term}\b", phrase, re.IGNORECASE):
            found += [re.sub(rf"\b{term}\b", name, phrase, flags=re.IGNORECASE) for name in names]
    return found + [phrase]


def _label_terms(label: str) -> set[str]:
    """A row label's words, less what its brackets hold ("(PP&E)", "(used in)") and generic ones."""
    found = set(terms(re.sub(r"\([^)]*\)", " ", label)))
    return found - _GENERIC or found


def _expanded(phrase: str, thesaurus: str | None) -> str:
    if not thesaurus:
        return phrase
    from pagesight.search.expansion import expand

    return expand(phrase, thesaurus)


def table_reading(question: str, context: Sequence[ContextItem], thesaurus: str | None) -> Reading | None:
    """The answer read from the context's table cells, or None when the question is no table's."""
    years = _YEAR.findall(question)
    if not years or asked_kind(question) not in (None, "quantity") or _NOT_A_FIGURE.search(question):
        return None  # a figure of a year is asked for, not a name, a yes or a no
    if _PART_OF_YEAR.search(question):
        return None
    cells = Cells(context, thesaurus)
    if not cells.cells:
        return None
    result = _computed(question, years, cells)
    if result is None:
        return None
    value, percent = result
    return _reading(question, value, percent, cells)


def _computed(question: str, years: list[str], cells: Cells) -> tuple[float, bool] | None:
    """The figure the question asks for and whether it is a percentage: a formula it defines, a
    change or an average between its years, an "X margin" (X over revenue), or one cell."""
    defined = _DEFINED.search(question)
    target = years[-1]
    margin = _MARGIN.search(question)
    if defined and not margin:
        value = _formula(defined.group(1), target, cells)
        return None if value is None else (value, bool(_PERCENT.search(question)))
    subject = _subject(question)
    if _CHANGE.search(question) and len(set(years)) >= 2:
        first, last = sorted(set(years))[0], sorted(set(years))[-1]
        a, b = cells.find(subject, first), cells.find(subject, last)
        return None if a in (None, 0) or b is None else (100 * (b - a) / abs(a), True)
    if margin:
        span = _span(years) if _AVERAGE.search(question) else [target]
        name = re.sub(r"\b(average|year|\d+)\b", " ", margin.group(1), flags=re.IGNORECASE)
        ratios = [_ratio(name, defined and defined.group(1), year, cells) for year in span]
        if any(r is None for r in ratios):
            return None
        return 100 * sum(ratios) / len(ratios), True
    if _AVERAGE.search(question) and len(set(years)) >= 2:
        found = [cells.find(subject, year) for year in _span(years)]
        return None if None in found else (sum(found) / len(found), False)
    value = cells.find(subject, target)
    return None if value is None else (value, False)


def _subject(question: str) -> str:
    """The words of the sentence that names the figure (the one with the year)."""
    for sentence in re.split(r"(?<=[.?!])\s+", question):
        if _YEAR.search(sentence):
            return sentence
    return question


def _span(years: list[str]) -> list[str]:
    low, high = int(min(years)), int(max(years))
    return [str(y) for y in range(low, high + 1)]


def _ratio(name: str, formula: str | None, year: str, cells: Cells) -> float | None:
    """An "X margin" of ``year``: X (the cell named, or the formula defining it) over revenue."""
    top = _formula(formula, year, cells) if formula else cells.find(name, year)
    bottom = cells.find("revenue", year)
    return None if top is None or not bottom else top / bottom


def _formula(text: str, year: str, cells: Cells) -> float | None:
    """A formula written out: numbers, + - * / and brackets between phrases, each phrase a cell
    ("FY2017 COGS"), an average ("average accounts payable between FY2016 and FY2017") or a
    change ("change in inventory between ..."); a phrase without a year is of ``year``."""
    tokens = [t.strip() for t in _TOKEN.findall(text) if t.strip()]
    expression = []
    for token in tokens:
        if token in "*/+×÷()-":
            expression.append({"×": "*", "÷": "/"}.get(token, token))
        elif re.fullmatch(r"\d+(?:\.\d+)?", token):
            expression.append(token)
        else:
            value = _phrase(token, year, cells)
            if value is None:
                return None
            expression.append(repr(value))
    return _evaluate(expression)


def _phrase(phrase: str, year: str, cells: Cells) -> float | None:
    years = _YEAR.findall(phrase) or [year]
    words = _YEAR.sub(" ", re.sub(r"\b(?:FY|between|and|from|to)\b", " ", phrase, flags=re.IGNORECASE))
    if re.match(r"\s*average\b", words, re.IGNORECASE):
        found = [cells.find(words, y) for y in _span(years)]
        return None if None in found else sum(found) / len(found)
    if re.match(r"\s*change in\b", words, re.IGNORECASE) and len(years) >= 2:
        a, b = cells.find(words, min(years)), cells.find(words, max(years))
        return None if a is None or b is None else b - a
    return cells.find(words, years[-1])


def _evaluate(expression: list[str]) -> float | None:
    """The arithmetic of ``expression`` (numbers, operators, brackets), by Python's own parser on
    nothing but those tokens; None when it does not parse or divides by zero."""
    import ast

    source = " ".join(expression)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        return None
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)
    if not all(isinstance(node, allowed) for node in ast.walk(tree)):
        return None
    try:
        return float(eval(compile(tree, "<formula>", "eval"), {"__builtins__": {}}))
    except ZeroDivisionError:
        return None


def _reading(question: str, value: float, percent: bool, cells: Cells) -> Reading:
    """The figure as the answer, at the scale and precision asked; each cell cited with its box
    and its row, column and printed text."""
    unit = cells.used[0].unit if len(cells.used) == 1 else ""
    scale = _SCALE.search(question)
    if unit in _SCALES and scale and scale.group(1).lower().rstrip("s") != unit:
        value, unit = (
            value * _SCALES[unit] / _SCALES[scale.group(1).lower().rstrip("s")],
            scale.group(1).rstrip("s"),
        )
    places = _DECIMALS.search(question)
    digits = _PLACES.get(places.group(1).lower()) if places else None
    if digits is None and places:
        digits = int(places.group(1))
    if len(cells.used) == 1 and digits is None and unit == cells.used[0].unit:
        text = cells.used[0].cell.figure.lstrip("$€£¥")
    else:
        text = f"{value:,.{2 if digits is None else digits}f}"
    text = f"{text}%" if percent and not text.endswith("%") else f"{text} {unit}".strip()
    cited: dict[int, list] = {}
    quotes: dict[int, list[str]] = {}
    for used in cells.used:
        cited.setdefault(used.item, []).append(used.cell.box)
        quotes.setdefault(used.item, []).append(f"{used.cell.label}, {used.cell.column}: {used.cell.text}")
    return Reading(
        text=text,
        cited=cited,
        quotes={item: "; ".join(q) for item, q in quotes.items()},
        usage={"cells": len(cells.used)},
    )
