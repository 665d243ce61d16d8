"""The context's table cells as operands: which rows and columns a question names, by fitted
models, and the figures its program computes from them.

Tables are read a page at a time (the tiles of one page in the context joined: a table cut by a
tile's edge is read whole) by the one table finder, ``text/tables.py``; each cell is cited in the
context item its box lies in.

A row's and a column's likelihood of holding an operand are two logistic models (``ROW``,
``COLUMN``: their features, fitted by ``pagesight fit-reader`` on questions whose derivations name
their operands): how much of a row's label (its words weighted by their rarity among the context's
labels) the question holds, how much of the question's table words the label and its section
hold, whether the question writes the label out; whether a column's headings hold a period the
question names, another period or none, its heading's words, its place. A program's figures are
then computed from the likeliest rows and columns (``Operands``): along a row (a change between
two years) or down a column (a share of a total), each candidate carrying what its operands'
likelihoods were, for the reader's candidate scorer to weigh against the others.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pagesight.answer.base import ContextItem
from pagesight.answer.extractive.program import PERIOD, Program, full_year
from pagesight.encode.lexical import terms
from pagesight.records import Box, Span
from pagesight.text.lines import Line, read_lines
from pagesight.text.tables import Cell, Table, read_tables, stated_unit

ROW = (
    "label_cover",  # the share of the row label's words the question holds, by rarity
    "question_cover",  # the share of the question's table words the label and its section hold
    "section_cover",  # the share of the section's words the question holds
    "written",  # the question writes the label out
    "best_row",  # no row of the context covers more
    "row_gap",  # how much less than the best row it covers
    "label_words",  # log(1 + the label's words)
    "expanded_cover",  # the share of the label's words the question holds with the words a thesaurus adds
)
COLUMN = (
    "period",  # its headings name a period the question names
    "other_period",  # they name periods, none of them asked
    "no_period",  # they name none
    "heading_cover",  # the share of its headings' other words the question holds
    "first",  # the first column
    "last",  # the last column
    "periods_asked",  # the question names a period
)
SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9}


@dataclass
class Placed:
    """A cell of the context's tables: the table (``Tables.tables``), row and column it is in, and
    the context item its box lies in."""

    cell: Cell
    table: int
    row: int
    column: int
    item: int


@dataclass
class Tables:
    """The tables of a context, read a page at a time, and every cell placed."""

    tables: list[Table] = field(default_factory=list)
    cells: list[Placed] = field(default_factory=list)
    lines: dict[int, list[Line]] = field(default_factory=dict)  # a page of one tile: its lines, by item

    @classmethod
    def of(cls, context: Sequence[ContextItem]) -> Tables:
        found = cls()
        pages: dict[tuple[str, int], list[int]] = {}
        for i, item in enumerate(context):
            pages.setdefault((item.hit.doc_id, item.hit.page), []).append(i)
        for members in pages.values():
            members.sort(key=lambda i: context[i].hit.tile)
            spans: list[Span] = [span for i in members for span in context[i].spans]
            lines = None
            if len(members) == 1:  # read once, for the line reader too
                lines = found.lines[members[0]] = read_lines(spans)
            stated = None
            for table in read_tables(spans, lines):
                if not table.unit:
                    stated = stated_unit([span.text for span in spans]) if stated is None else stated
                    table.unit = stated
                t = len(found.tables)
                found.tables.append(table)
                for r, row in enumerate(table.rows):
                    for cell in row:
                        found.cells.append(Placed(cell, t, r, cell.index, _item(context, members, cell.box)))
        return found

    def printed(self) -> set[tuple[str, Box]]:
        """The text and box of every line the tables were read from, headings and rows."""
        return {
            (line.text, line.box)
            for table in self.tables
            for line in [*table.heads, *(line for held in table.sources for line in held)]
        }

    def row_cells(self, table: int, row: int) -> list[Placed]:
        return [p for p in self.cells if p.table == table and p.row == row]


def _item(context: Sequence[ContextItem], members: list[int], box: Box) -> int:
    """The context item (of ``members``, one page's) whose tile holds the middle of ``box``."""
    middle = (box[1] + box[3]) / 2
    for i in members:
        top, bottom = context[i].hit.tile_box[1], context[i].hit.tile_box[3]
        if top <= middle < bottom:
            return i
    return members[0]


def _stems(text: str) -> set[str]:
    """A text's stems, less its numbers (a year or a figure is no word of a label)."""
    return {t for t in terms(text) if not t[:1].isdigit()}


def _plain(text: str) -> str:
    return " ".join("".join(ch if ch.isalnum() else " " for ch in text.lower()).split())


class Operands:
    """Each row's and column's features against a question, and their likelihoods under the
    fitted row and column models."""

    def __init__(
        self,
        question: str,
        program: Program,
        tables: Tables,
        fitted: dict | None,
        thesaurus: str | None = None,
    ):
        self.question, self.program, self.tables = question, program, tables
        asked = _stems(question)
        self.asked = asked
        grown_words = asked | _stems(expanded(question, thesaurus))
        rows = sorted({(p.table, p.row) for p in tables.cells})
        self.rows = rows
        labels = {key: _stems(self._label(key)) for key in rows}
        sections = {key: _stems(self._section(key)) for key in rows}
        df = Counter(w for key in rows for w in labels[key] | sections[key])
        n = max(len(rows), 1)
        self.idf = {w: math.log(1 + n / (1 + count)) for w, count in df.items()}
        vocabulary = set(df)
        for table in tables.tables:
            vocabulary |= _stems(" ".join(table.columns)) | _stems(table.caption)
        wanted = sum(self.idf.get(w, math.log(1 + n)) for w in asked & vocabulary) or 1.0
        plain = f" {_plain(question)} "
        covered = {}
        self.row_features: dict[tuple[int, int], list[float]] = {}
        for key in rows:
            label, section = labels[key], sections[key]
            label_weight = sum(self.idf[w] for w in label) or 1.0
            cover = sum(self.idf[w] for w in label & asked) / label_weight if label else 0.0
            own = label | section
            question_cover = sum(self.idf.get(w, 0.0) for w in own & asked) / wanted
            section_weight = sum(self.idf[w] for w in section) or 1.0
            section_cover = sum(self.idf[w] for w in section & asked) / section_weight if section else 0.0
            text = _plain(self._label(key))
            written = float(bool(text) and f" {text} " in plain)
            grown = sum(self.idf[w] for w in label & grown_words) / label_weight if label else 0.0
            covered[key] = cover + question_cover + written
            # ROW's order; the two zeros are whether it covers the most and by how much less
            self.row_features[key] = [cover, question_cover, section_cover, written, 0.0, 0.0]
            self.row_features[key] += [math.log1p(len(label)), grown]
        best = max(covered.values(), default=0.0)
        for key, features in self.row_features.items():
            features[4] = float(covered[key] >= best)
            features[5] = best - covered[key]
        years = set(program.years)
        self.column_features: dict[tuple[int, int], list[float]] = {}
        for t, table in enumerate(tables.tables):
            for c, heading in enumerate(table.columns):
                named = column_years(heading)
                words = _stems(heading)
                self.column_features[t, c] = [
                    float(bool(named & years)),
                    float(bool(named) and not named & years),
                    float(not named),
                    len(words & asked) / len(words) if words else 0.0,
                    float(c == 0),
                    float(c == len(table.columns) - 1),
                    float(bool(years)),
                ]
        fitted = fitted or {}
        self.row_p = _likelihoods(self.row_features, fitted.get("row"))
        self.column_p = _likelihoods(self.column_features, fitted.get("column"))

    def _label(self, key: tuple[int, int]) -> str:
        table, row = key
        return self.tables.tables[table].rows[row][0].label

    def _section(self, key: tuple[int, int]) -> str:
        table, row = key
        return self.tables.tables[table].rows[row][0].section

    def cell_p(self, placed: Placed) -> float:
        return self.row_p[placed.table, placed.row] * self.column_p[placed.table, placed.column]

    def best_rows(self, k: int) -> list[tuple[int, int]]:
        return sorted(self.rows, key=lambda key: -self.row_p[key])[:k]

    def mention(self, key: tuple[int, int]) -> int:
        """Where the question first names a word of the row's label (its end when it names none)."""
        words = _stems(self._label(key)) & self.asked
        places = [i for i, t in enumerate(terms(self.question)) if t in words]
        return min(places, default=len(self.question))


def expanded(text: str, thesaurus: str | None) -> str:
    """``text`` with the words the thesaurus ``thesaurus`` adds for its terms."""
    if not thesaurus:
        return text
    from pagesight.search.expansion import expand

    return expand(text, thesaurus)


def column_years(heading: str) -> set[str]:
    """The periods a column's nearest heading naming any names ("Year ended June 30, 2019",
    "FY19"; "2019" under "Year ended March 31, 2019 compared to 2018")."""
    for part in reversed(heading.split(" / ")):
        found = {full_year(m) for m in PERIOD.finditer(part)}
        if found:
            return found
    return set()


def _likelihoods(features: dict, fitted: dict | None) -> dict:
    """Each key's probability under the logistic model ``fitted`` (0.5 each without one)."""
    if not features:
        return {}
    keys = list(features)
    if not fitted:
        return {key: 0.5 for key in keys}
    x = (np.array([features[key] for key in keys]) - fitted["mean"]) / np.array(fitted["scale"])
    z = x @ np.array(fitted["coef"]) + fitted["intercept"]
    p = 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))
    return {key: float(value) for key, value in zip(keys, p)}


def figure_text(value: float, unit: str, percent: bool = False, places: int = 2) -> str:
    """A computed figure as the answer says it: rounded to ``places``, in percent or with its
    cells' unit word ("1,234.50 million")."""
    text = f"{value:,.{places}f}"
    if percent:
        return f"{text}%"
    return f"{text} {unit}".strip() if unit in SCALES else text


def cell_text(placed: Placed, tables: Tables) -> str:
    """A cell as the answer says it: as printed, with its table's unit word when it has one, and
    a percentage (its column's or its table's unit) with its sign."""
    cell = placed.cell
    unit = tables.tables[placed.table].unit
    if cell.percent or unit == "%":
        return cell.figure if cell.figure.endswith("%") else f"{cell.figure}%"
    if unit not in SCALES:
        return cell.figure
    return f"{cell.figure} {unit}"
