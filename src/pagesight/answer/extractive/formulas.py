"""Formulas read from table cells: one a question writes out ("DPO is defined as: 365 * (average
accounts payable between FY2016 and FY2017) / (FY2017 COGS + change in inventory between FY2016
and FY2017)"), or the textbook definition of a figure it names (``definitions.txt``: "current
ratio", "days sales outstanding").

A formula is numbers, + - * / and brackets between phrases. Each phrase is a table's row, read in
the column of its own period (or the period the question asks about): "average X" is X over its
two periods (over the period asked and the one before when it names one), "change in X" the later
less the earlier. A phrase's row is the one whose label holds most of the phrase's words, with the
words a thesaurus gives them ("COGS": cost of sales), as ``cells.Operands`` measures a question's.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pagesight.answer.extractive.cells import Operands, Placed, Tables, column_years, expanded
from pagesight.answer.extractive.program import PERIOD, full_year
from pagesight.encode.lexical import terms

DEFINITIONS = Path(__file__).with_name("definitions.txt")
MIN_COVER = 0.5  # the share of a row label's words a phrase must hold
_TOKEN = re.compile(r"\d+(?:\.\d+)?(?![\w])|[*/+×÷()]|\s-\s|[^*/+×÷()]+?(?=\s-\s|[*/+×÷()]|$)")
_OPERATORS = {"×": "*", "÷": "/"}


@cache
def definitions() -> tuple[tuple[tuple[str, ...], str], ...]:
    """Each definition's names (lower case) and formula, in the file's order."""
    found = []
    for raw in DEFINITIONS.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        names, _, formula = line.partition("=")
        found.append((tuple(name.strip().lower() for name in names.split("|")), formula.strip()))
    return tuple(found)


def defined(question: str, tables: Tables) -> str | None:
    """The formula of the first figure ``question`` names by a name ``definitions.txt`` gives
    (its words in a row, in any case), or None; None too when a row of the tables is labelled by
    that name: a figure the table prints is read, not computed."""
    plain = "".join(ch if ch.isalnum() or ch == "&" else " " for ch in question.lower())
    words = f" {' '.join(plain.split())} "
    for names, formula in definitions():
        named = [name for name in names if f" {name} " in words]
        if named:
            printed = {frozenset(_label_terms(p.cell.label)) for p in tables.cells}
            return None if any(set(_label_terms(name)) in printed for name in named) else formula
    return None


def _label_terms(text: str) -> list[str]:
    return [t for t in terms(text) if not t[:1].isdigit()]


@dataclass
class Computed:
    """A formula's value and the cells it read."""

    value: float
    used: list[Placed]


def evaluate(
    formula: str, year: str | None, tables: Tables, operands: Operands, thesaurus: str | None
) -> Computed | None:
    """``formula``'s value from the context's cells, its phrases without a period read in
    ``year``'s column; None when a phrase names no row, or the arithmetic fails."""
    tokens = [t.strip() for t in _TOKEN.findall(formula) if t.strip()]
    rows = _Rows(tables, operands, thesaurus)
    expression: list[str] = []
    for token in tokens:
        if token in "*/+×÷()-":
            expression.append(_OPERATORS.get(token, token))
        elif token.replace(".", "", 1).isdigit():
            expression.append(token)
        else:
            value = rows.phrase(token, year)
            if value is None:
                return None
            expression.append(repr(value))
    value = _arithmetic(" ".join(expression))
    return None if value is None else Computed(value, rows.used)


class _Rows:
    """The context's cells found by the words of their row labels: each label stemmed once and
    its cells indexed by its words, so a formula of many phrases reads each label once."""

    def __init__(self, tables: Tables, operands: Operands, thesaurus: str | None):
        self.operands, self.thesaurus = operands, thesaurus
        self.labels: list[set[str]] = []
        self.by_word: dict[str, list[int]] = {}
        self.cells = [p for p in tables.cells if p.cell.value is not None]
        stems: dict[str, set[str]] = {}
        for k, placed in enumerate(self.cells):
            label = placed.cell.label
            if label not in stems:
                stems[label] = {t for t in terms(label) if not t[:1].isdigit()}
            self.labels.append(stems[label])
            for word in stems[label]:
                self.by_word.setdefault(word, []).append(k)
        self.used: list[Placed] = []

    def phrase(self, phrase: str, year: str | None) -> float | None:
        years = [full_year(m) for m in PERIOD.finditer(phrase)] or ([year] if year else [])
        words = PERIOD.sub(" ", phrase).split()
        stems = terms(" ".join(words))
        if stems[:1] == ["averag"]:  # of two periods, or the one asked and the one before
            if len(set(years)) > 1:
                span = sorted(set(years))
            else:
                span = [str(int(years[0]) - 1), years[0]] if years else []
            found = [self.cell(words[1:], y) for y in span]
            return None if not found or None in found else sum(found) / len(found)
        if stems[:1] == ["chang"] and len(set(years)) >= 2:
            a, b = self.cell(words[1:], min(years)), self.cell(words[1:], max(years))
            return None if a is None or b is None else b - a
        return self.cell(words, years[-1] if years else None)

    def cell(self, words: list[str], year: str | None) -> float | None:
        """The value of the row ``words`` name most (or the thesaurus's other names for them), in
        ``year``'s column (or the likeliest)."""
        wanted = {t for t in terms(" ".join(words)) if not t[:1].isdigit()}
        if not wanted:
            return None
        extra = set(terms(expanded(" ".join(words), self.thesaurus))) - wanted
        reachable = sorted({k for word in wanted | extra for k in self.by_word.get(word, ())})
        best, best_score = None, (MIN_COVER, 0.0)
        for k in reachable:
            placed, label = self.cells[k], self.labels[k]
            named = column_years(placed.cell.column)
            if year is not None and named and year not in named:
                continue
            if not label & wanted and len(label & extra) < 2:  # "Total" is no other name of revenue
                continue
            held = sum(1.0 if t in wanted else 0.8 if t in extra else 0.0 for t in label)
            score = (held / len(label), self.operands.column_p.get((placed.table, placed.column), 0.0))
            if score > best_score:
                best, best_score = placed, score
        if best is None:
            return None
        self.used.append(best)
        return best.cell.value


def _arithmetic(source: str) -> float | None:
    """The value of ``source`` (numbers, operators, brackets) by Python's own parser on nothing
    but those; None when it does not parse, divides by zero or leaves the floats' range."""
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
    return value if value == value and abs(value) != float("inf") else None
