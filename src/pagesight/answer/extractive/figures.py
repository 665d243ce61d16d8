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

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pagesight.answer.base import ContextItem, Reading
from pagesight.answer.extractive.questions import asked_kind
from pagesight.answer.extractive.ratios import definition, sides
from pagesight.answer.extractive.support import Evidence, asked, is_figure
from pagesight.encode.lexical import terms
from pagesight.search.words import YEAR
from pagesight.text.tables import Cell, read_tables

_DEFINED = re.compile(
    r"(?:\bis defined as|\bdefine [^.]*? as\b|\bcalculated? [^.]*? as\b|=)\s*:?\s*(.+?)(?:\.(?:\s|$)|\?|$)",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"\d+(?:\.\d+)?(?![\w])|[*/+×÷()]|\s-\s|[^*/+×÷()]+?(?=\s-\s|[*/+×÷()]|$)")
_CHANGE = re.compile(r"\b(year[- ]over[- ]year|percent(?:age)? change|growth|change in)\b", re.IGNORECASE)
# how much one year's figure exceeds another's ("how much higher"; "how much lower" the other
# way), or the difference between two years
_HOW_MUCH = r"how much (?:higher|lower|more|less|greater|larger|smaller|bigger)"
_EXCEEDS = re.compile(rf"\b{_HOW_MUCH}\b", re.IGNORECASE)
_DIFFERENCE = re.compile(rf"\b(?:{_HOW_MUCH}|difference)\b", re.IGNORECASE)
_LESS = re.compile(r"\bhow much (?:lower|less|smaller)\b", re.IGNORECASE)
# a figure combined from several (a sum, a comparison, a ratio): never one cell's
_COMBINED = re.compile(
    rf"\b(?:sum|combined|altogether|in total|together|compared (?:to|with)|than|versus|vs\.?|ratio|"
    rf"difference|{_HOW_MUCH})\b",
    re.IGNORECASE,
)
_AVERAGE = re.compile(r"\baverage\b", re.IGNORECASE)
# a quotient asked for: "ratio", or a figure to round to some decimal places
_RATIO = re.compile(r"\bratio\b|\bround[^.]*?\bdecimal", re.IGNORECASE)
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
    "(?<!cost of )sales": ("revenues", "total revenues", "net sales"),
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
    """Every table cell of a context, found by the phrase naming its row and by its year: each
    label's and heading's words read once, and the cells indexed by their label's words, so a
    formula of many phrases reads only the cells that share a word with each."""

    def __init__(self, context: Sequence[ContextItem], thesaurus: str | None, question: str = ""):
        """The cells of ``context``'s tables; of the documents ``question`` names only, when it
        names some of them ("COGS for Microsoft": not a Best Buy statement ranked above)."""
        self.thesaurus = thesaurus
        self.cells: list[Used] = []
        named = _named_documents(question, context)
        for i, item in enumerate(context):
            if named and item.hit.doc_id not in named:
                continue
            for table in read_tables(item.spans):
                self.cells += [Used(c, i, table.unit) for c in table.cells() if c.value is not None]
        self.used: list[Used] = []
        labels: dict[str, frozenset[str]] = {}
        for used in self.cells:
            if used.cell.label not in labels:
                labels[used.cell.label] = _label_terms(used.cell.label)
        self._labels = [labels[used.cell.label] for used in self.cells]
        self._headings: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._by_word: dict[str, list[int]] = {}
        for n, label in enumerate(self._labels):
            for word in label:
                self._by_word.setdefault(word, []).append(n)
        self._phrases: dict[str, tuple[set[str], set[str]]] = {}

    def find(self, phrase: str, year: str) -> float | None:
        """The value of the row ``phrase`` names in the column of ``year`` (None: no row does);
        a phrase naming revenue or net profit also reads as the names statements print them by."""
        for name in _names(phrase):
            found = self._find(name, year)
            if found is not None:
                return found
        return None

    def _find(self, phrase: str, year: str) -> float | None:
        if phrase not in self._phrases:
            asked = set(terms(phrase)) - _GENERIC
            extra = set(terms(_expanded(phrase, self.thesaurus))) - asked - _GENERIC if asked else set()
            self._phrases[phrase] = asked, extra  # extra: not "total" alone
        asked, extra = self._phrases[phrase]
        if not asked:
            return None
        held: dict[int, list[int]] = {}  # a cell's label words the phrase holds: its own, the thesaurus's
        for kind, words in enumerate((asked, extra)):
            for word in words:
                for n in self._by_word.get(word, ()):
                    held.setdefault(n, [0, 0])[kind] += 1
        best, best_score = None, (MIN_MATCH, 0)
        for n in sorted(held):  # a cell whose label shares no word with the phrase scores nothing
            used = self.cells[n]
            if not self._column(used.cell.column, year, asked):
                continue
            own, expanded = held[n]
            score = ((own + EXPANDED * expanded) / max(len(self._labels[n]), 1), own + expanded)
            if score > best_score:
                best, best_score = used, score
        if best is None:
            return None
        self.used.append(best)
        return best.cell.value

    def _column(self, heading: str, year: str, asked: set[str]) -> bool:
        """The column is the one asked for: its headings hold the year, or, in a table by segment
        or region (no year heading it), they name one the question names."""
        if heading not in self._headings:
            years = frozenset(YEAR.findall(heading))
            self._headings[heading] = years, frozenset() if years else frozenset(terms(heading)) - _GENERIC
        years, named = self._headings[heading]
        if years:
            return year in years
        return bool(named) and named <= asked


def _named_documents(question: str, context: Sequence[ContextItem]) -> set[str]:
    """The documents of ``context`` whose name or title holds one of the names ``question`` asks
    about (none when it names none of them)."""
    names = [w for w in asked(question) if not is_figure(w)]
    names += [f"{a} {b}" for a, b in zip(names, names[1:])]  # "Coca" "Cola": COCACOLA's
    headings = {
        item.hit.doc_id: Evidence(f"{item.hit.doc_id.replace('_', ' ')}\n{item.title}") for item in context
    }
    return {doc for doc, heading in headings.items() if any(heading.holds(name) for name in names)}


def _names(phrase: str) -> list[str]:
    """``phrase``, after it with each of its terms statements print otherwise in their words."""
    found = []
    for term, names in _PRINTED.items():
        if re.search(rf"\b{term}\b", phrase, re.IGNORECASE):
            found += [re.sub(rf"\b{term}\b", name, phrase, flags=re.IGNORECASE) for name in names]
    return found + [phrase]


def _label_terms(label: str) -> frozenset[str]:
    """A row label's words, less what its brackets hold ("(PP&E)", "(used in)") and generic ones."""
    found = frozenset(terms(re.sub(r"\([^)]*\)", " ", label)))
    return found - _GENERIC or found


def _expanded(phrase: str, thesaurus: str | None) -> str:
    if not thesaurus:
        return phrase
    from pagesight.search.expansion import expand

    return expand(phrase, thesaurus)


def table_reading(
    question: str, context: Sequence[ContextItem], thesaurus: str | None, abstain: bool = True
) -> Reading | None:
    """The answer read from the context's table cells, or None when the question is no table's;
    declined (``abstain``) when the cells deny the question's premise."""
    years = YEAR.findall(question)
    if not years or asked_kind(question) not in (None, "quantity") or _NOT_A_FIGURE.search(question):
        return None  # a figure of a year is asked for, not a name, a yes or a no
    if _PART_OF_YEAR.search(question):
        return None
    cells = Cells(context, thesaurus, question)
    if not cells.cells:
        return None
    result = _computed(question, years, cells)
    if result is None:
        return None
    value, kind = result
    reading = _reading(question, value, kind, cells)
    if abstain and value < 0 and _EXCEEDS.search(question):
        # "how much higher was it in 2003" when 2003's figure is the lower: a premise the
        # cells deny, so no amount answers it
        cells_read = "; ".join(reading.quotes.values())
        return Reading(
            "",
            cited=reading.cited,
            quotes=reading.quotes,
            usage={**reading.usage, "declined_answer": reading.text},
            answered=False,
            reason=f"the tables do not bear out the question: {cells_read}",
        )
    return reading


def _computed(question: str, years: list[str], cells: Cells) -> tuple[float, str] | None:
    """The figure the question asks for and its kind ("figure": in its cells' unit, "percent", or
    "ratio": a quotient, without a unit): a formula it defines, a change or an average between its
    years, an "X margin" (X over revenue), a figure or a ratio named by its textbook name or by its
    two sides (``ratios``), or one cell."""
    defined = _DEFINED.search(question)
    target = years[-1]
    margin = _MARGIN.search(question)
    if defined and not margin:
        return _formula_figure(defined.group(1), target, cells, bool(_PERCENT.search(question)))
    subject = _subject(question)
    if _CHANGE.search(question) and len(set(years)) >= 2:
        first, last = sorted(set(years))[0], sorted(set(years))[-1]
        a, b = cells.find(subject, first), cells.find(subject, last)
        return None if a in (None, 0) or b is None else (100 * (b - a) / abs(a), "percent")
    if margin:
        return _margin(question, margin, defined, years, cells)
    if _DIFFERENCE.search(question) and len(set(years)) >= 2:
        return _difference(question, subject, years, cells)
    if _AVERAGE.search(question) and len(set(years)) >= 2:
        found = [cells.find(subject, year) for year in _span(years)]
        return None if None in found else (sum(found) / len(found), "figure")
    both = sides(subject) if _RATIO.search(question) else None
    if both is not None:  # "sales to working capital ratio": a ratio whose sides may be named figures
        top, bottom = (_side(side, target, cells) for side in both)
        if top is not None and bottom:
            return top / bottom, "ratio"
    named = definition(subject)
    if named is not None and (found := _formula_figure(named, target, cells)) is not None:
        return found
    if _COMBINED.search(question):
        return None  # a sum or a comparison is not what one cell says
    value = cells.find(subject, target)
    return None if value is None else (value, "figure")


def _formula_figure(formula: str, year: str, cells: Cells, percent: bool = False) -> tuple[float, str] | None:
    value = _formula(formula, year, cells)
    if value is None:
        return None
    return value, "percent" if percent else "ratio" if "/" in formula else "figure"


def _margin(question: str, margin: re.Match, defined: re.Match | None, years: list[str], cells: Cells):
    """An "X margin": the row a table prints so, or X over revenue (averaged over the years when
    the question asks for an average), in percent."""
    averaged = _AVERAGE.search(question)
    if not defined and not averaged:
        printed = _printed_margin(margin.group(0), years[-1], cells)
        if printed is not None:
            return printed
    span = _span(years) if averaged else [years[-1]]
    name = re.sub(r"\b(average|year|\d+)\b", " ", margin.group(1), flags=re.IGNORECASE)
    found = [_ratio(name, defined and defined.group(1), year, cells) for year in span]
    if any(r is None for r in found):
        return None
    return 100 * sum(found) / len(found), "percent"


def _side(phrase: str, year: str, cells: Cells) -> float | None:
    """One side of a ratio: a figure by its textbook name (``ratios``) or a cell."""
    named = definition(phrase)
    return _formula(named, year, cells) if named else _phrase(phrase, year, cells)


def _difference(question: str, subject: str, years: list[str], cells: Cells) -> tuple[float, str] | None:
    """How much the figure of one year exceeds another's: the first year named less the second
    ("how much higher ... in 2003 compared to 2002"), the other way for "how much lower"; a
    "difference between" two years is the later less the earlier."""
    first, second = list(dict.fromkeys(years))[:2]  # in the order the question names them
    if not _EXCEEDS.search(question):  # "the difference between": the later less the earlier
        first, second = max(first, second), min(first, second)
    a, b = cells.find(subject, first), cells.find(subject, second)
    if a is None or b is None:
        return None
    return (b - a if _LESS.search(question) else a - b), "figure"


def _printed_margin(phrase: str, year: str, cells: Cells) -> tuple[float, str] | None:
    """An "X margin" a table prints as a row of its own (a row labelled so, in percent)."""
    value = cells.find(phrase, year)
    if value is None:
        return None
    if "margin" in cells.used[-1].cell.label.lower():
        return value, "figure"  # the cell as printed, in its table's unit (%)
    cells.used.pop()  # a row of another name: the margin is computed instead
    return None


def _subject(question: str) -> str:
    """The words of the sentence that names the figure (the one with the year)."""
    for sentence in re.split(r"(?<=[.?!])\s+", question):
        if YEAR.search(sentence):
            return sentence
    return question


def _span(years: list[str]) -> list[str]:
    low, high = int(min(years)), int(max(years))
    return [str(y) for y in range(low, high + 1)]


def _ratio(name: str, formula: str | None, year: str, cells: Cells) -> float | None:
    """An "X margin" of ``year``: X (the cell named, or the formula defining it) over revenue."""
    top = _formula(formula, year, cells) if formula else _side(name, year, cells)
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
    years = YEAR.findall(phrase) or [year]
    words = YEAR.sub(" ", re.sub(r"\b(?:FY|between|and|from|to)\b", " ", phrase, flags=re.IGNORECASE))
    if re.match(r"average\b", words.lstrip(), re.IGNORECASE):  # of one year: it and the one before
        span = _span(years) if len(set(years)) > 1 else [str(int(years[0]) - 1), years[0]]
        found = [cells.find(words, y) for y in span]
        return None if None in found else sum(found) / len(found)
    if re.match(r"change in\b", words.lstrip(), re.IGNORECASE) and len(years) >= 2:
        a, b = cells.find(words, min(years)), cells.find(words, max(years))
        return None if a is None or b is None else b - a
    return cells.find(words, years[-1])


def _evaluate(expression: list[str]) -> float | None:
    """The arithmetic of ``expression`` (numbers, operators, brackets), by Python's own parser on
    nothing but those tokens; None when it does not parse, divides by zero or leaves the range of
    a float (a figure no table holds)."""
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
        value = float(eval(compile(tree, "<formula>", "eval"), {"__builtins__": {}}))
    except (ZeroDivisionError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _reading(question: str, value: float, kind: str, cells: Cells) -> Reading:
    """The figure as the answer, at the scale and precision asked (a figure of cells in one unit
    is in that unit; a ratio has none); each cell cited with its box and its row, column and
    printed text."""
    units = {used.unit for used in cells.used}
    unit = units.pop() if len(units) == 1 and kind == "figure" else ""
    percent = kind == "percent"
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
    if percent or unit == "%":
        text = text if text.endswith("%") else f"{text}%"
    else:
        text = f"{text} {unit}".strip()
    cited: dict[int, list] = {}
    quotes: dict[int, list[str]] = {}
    read = {(used.item, used.cell.box): used for used in cells.used}.values()  # each cell once
    for used in read:
        cited.setdefault(used.item, []).append(used.cell.box)
        quotes.setdefault(used.item, []).append(f"{used.cell.label}, {used.cell.column}: {used.cell.text}")
    return Reading(
        text=text,
        cited=cited,
        quotes={item: "; ".join(q) for item, q in quotes.items()},
        usage={"cells": len(read)},
    )
