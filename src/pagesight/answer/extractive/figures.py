"""The candidates the context's tables offer a question's program: each cell as it is printed,
and each figure an operation the program finds likely computes from the likeliest operands.

An operation reads its operands along a row (one row, the columns of the periods the question
names, or the likeliest columns: a change from 2018 to 2019, an average over three years) or
down a column (one column, the likeliest rows in the order the question names them: a share of
a total, the sum of two items). A change is the later period's figure less the earlier's (the
left column's less the right's when the columns name no periods); a percent change is that over
the earlier figure. ``values`` gives the operands themselves in the question's order, ``years``
the periods heading a table's columns, ``list`` the labels of a section's rows, ``largest`` and
``smallest`` the period whose figure is so, ``count`` how many rows a section has or how many
periods' figures pass a bound. Every candidate cites each cell it read.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pagesight.answer.extractive.candidates import Candidate
from pagesight.answer.extractive.cells import (
    SCALES,
    Operands,
    Placed,
    Tables,
    cell_text,
    column_years,
    figure_text,
)
from pagesight.answer.extractive.formulas import defined, evaluate
from pagesight.answer.extractive.program import Program, form
from pagesight.text.tables import Cell

FLOOR = 0.05  # an operation this likely gets its candidates
ROWS = 3  # the likeliest rows an operation reads along
CELLS = 30  # the likeliest cells offered as they are printed
Key = tuple[int, int]


def table_candidates(
    question: str, program: Program, tables: Tables, operands: Operands, thesaurus: str | None = None
) -> list[Candidate]:
    """Every candidate the context's tables offer ``program``: cells, the operations it finds
    likely, and the formula it writes out or a figure it names has (``formulas``)."""
    if not tables.cells:
        return []
    found = _cells(program, tables, operands)
    for op in program.likely(FLOOR):
        make = _OPERATIONS.get(op)
        if make is not None:
            found += make(op, program, tables, operands)
    formula = program.formula or defined(question, tables)
    if formula is not None:
        found += _formula(formula, program, tables, operands, thesaurus)
    return found


def _cells(program: Program, tables: Tables, operands: Operands) -> list[Candidate]:
    placed = [p for p in tables.cells if p.cell.value is not None]
    placed.sort(key=lambda p: -operands.cell_p(p))
    found = []
    for p in placed[:CELLS]:
        unit = tables.tables[p.table].unit
        text = cell_text(p, tables)
        if program.scale and unit in SCALES and unit != program.scale and not p.cell.percent:
            text = figure_text(p.cell.value * SCALES[unit] / SCALES[program.scale], program.scale)
        found.append(_candidate("cell", text, [p], program.probabilities.get("span", 0.0), program, operands))
    return found


def _formula(
    formula: str, program: Program, tables: Tables, operands: Operands, thesaurus: str | None
) -> list[Candidate]:
    """A formula's value: a quotient as a ratio and in percent, any other figure in its cells'
    unit (or the scale asked)."""
    year = program.years[-1] if program.years else None
    computed = evaluate(formula, year, tables, operands, thesaurus)
    if computed is None:
        return []
    p = 1.0 if program.formula else max(program.probabilities.values(), default=0.0)
    if "/" in formula:
        texts = [figure_text(computed.value, ""), figure_text(100 * computed.value, "", percent=True)]
    else:
        value, unit = computed.value, _unit(computed.used, tables)
        if program.scale and unit in SCALES and unit != program.scale:
            value, unit = value * SCALES[unit] / SCALES[program.scale], program.scale
        texts = [figure_text(value, unit)]
    return [_candidate("formula", text, computed.used, p, program, operands) for text in texts]


def _candidate(
    kind: str, text: str, used: list[Placed], p: float, program: Program, operands: Operands
) -> Candidate:
    """A candidate of ``kind`` answering ``text`` from the cells ``used``, each row they stand in
    cited once (the row's line: its label says what the figure is, as a text reader's cited line
    does), each cell quoted with its row and column."""
    rows = [operands.row_p[u.table, u.row] for u in used]
    columns = [operands.column_p[u.table, u.column] for u in used]
    asked = set(program.years)
    named = set().union(*(column_years(u.cell.column) for u in used)) if used else set()
    features = {
        "operation": p,
        "log_operation": math.log(max(p, 1e-6)),
        "rows": sum(rows) / len(rows) if rows else 0.0,
        "rows_min": min(rows, default=0.0),
        "columns": sum(columns) / len(columns) if columns else 0.0,
        "columns_min": min(columns, default=0.0),
        "operands": math.log(len(used)) if used else 0.0,
        "periods_found": len(asked & named) / len(asked) if asked else 0.0,
        "percent_cells": float(bool(used) and all(u.cell.percent for u in used)),
        "form": program.forms.get(form(text), 0.0),
    }
    cited: dict[int, list] = {}
    quotes: dict[int, list[str]] = {}
    for u in {(u.item, u.cell.box): u for u in used}.values():
        row = u.cell.row_box or u.cell.box
        if row not in cited.get(u.item, []):
            cited.setdefault(u.item, []).append(row)
        quotes.setdefault(u.item, []).append(f"{u.cell.label}, {u.cell.column}: {u.cell.text}")
    item = used[0].item if used else 0
    return Candidate(kind, text, item, cited, {i: "; ".join(q) for i, q in quotes.items()}, features)


def _along(program: Program, tables: Tables, operands: Operands, key: Key, k: int) -> list[Placed]:
    """``k`` cells of the row ``key`` (all the periods named, when at least ``k`` are): the columns
    of the periods the question names, in its order, else its likeliest columns, left to right."""
    cells = [p for p in tables.row_cells(*key) if p.cell.value is not None]
    asked = list(program.years)
    if len(asked) >= 2:
        named = []
        for year in asked:
            named += [p for p in cells if year in column_years(p.cell.column) and p not in named][:1]
        if len(named) >= min(k, len(asked)):
            return named
    chosen = sorted(cells, key=lambda p: -operands.column_p[p.table, p.column])[:k]
    return sorted(chosen, key=lambda p: p.column)


def _down(tables: Tables, operands: Operands, k: int) -> list[Placed]:
    """The likeliest column's cells in its table's ``k`` likeliest rows, in the order the question
    names them."""
    placed = [p for p in tables.cells if p.cell.value is not None]
    if not placed:
        return []
    best = max(placed, key=operands.cell_p)
    column = [p for p in placed if p.table == best.table and p.column == best.column]
    column.sort(key=lambda p: -operands.row_p[p.table, p.row])
    chosen = column[:k]
    return sorted(chosen, key=lambda p: operands.mention((p.table, p.row)))


def _in_time(cells: list[Placed]) -> list[Placed]:
    """``cells`` latest period first (by their columns' periods), else as they stand, left first."""
    years = [max(column_years(p.cell.column), default="") for p in cells]
    if all(years) and len(set(years)) == len(years):
        return [p for _, p in sorted(zip(years, cells), key=lambda pair: pair[0], reverse=True)]
    return cells


def _unit(cells: list[Placed], tables: Tables) -> str:
    units = {tables.tables[p.table].unit for p in cells}
    return units.pop() if len(units) == 1 else ""


def _groups(program: Program, tables: Tables, operands: Operands, k: int) -> list[tuple[str, list[Placed]]]:
    """Operand groups of ``k`` cells: along each of the likeliest rows, and down the likeliest column."""
    groups = [("along", _along(program, tables, operands, key, k)) for key in operands.best_rows(ROWS)]
    groups.append(("down", _down(tables, operands, k)))
    return [(way, cells) for way, cells in groups if len(cells) >= 2]


def _arithmetic(op: str, program: Program, tables: Tables, operands: Operands) -> list[Candidate]:
    """The figure of ``op`` from each operand group; an average or a sum of figures all printed
    negative (bracketed costs) also as their amounts, which reports often mean (``unsigned``)."""
    found = []
    p = program.probabilities.get(op, 0.0)
    sizes = (2,) if op in ("change", "percent_change", "ratio", "share") else (2, 3)
    for k in sizes:
        for way, cells in _groups(program, tables, operands, k):
            ordered = _in_time(cells) if way == "along" and op in ("change", "percent_change") else cells
            values = [c.cell.value for c in ordered]
            signs = [False, True] if op in ("average", "sum") and all(v < 0 for v in values) else [False]
            for unsigned in signs:
                value = _compute(op, [abs(v) for v in values] if unsigned else values)
                if value is None or not math.isfinite(value):
                    continue
                candidate = _candidate(
                    op, _figure(op, value, ordered, program, tables), ordered, p, program, operands
                )
                candidate.features["unsigned"] = float(unsigned)
                found.append(candidate)
    return found


def _figure(op: str, value: float, cells: list[Placed], program: Program, tables: Tables) -> str:
    """An operation's figure as the answer says it: a percent change or a share in percent, a
    ratio bare, the rest in their cells' unit (or the scale asked), percentage points in percent."""
    if op in ("percent_change", "share"):
        return figure_text(value, "", percent=True)
    if op == "ratio":
        return figure_text(value, "")
    percent = all(c.cell.percent for c in cells)
    unit = _unit(cells, tables)
    if program.scale and unit in SCALES and unit != program.scale and not percent:
        value, unit = value * SCALES[unit] / SCALES[program.scale], program.scale
    return figure_text(value, unit, percent=percent)


def _compute(op: str, values: list[float]) -> float | None:
    a, b = values[0], values[1]
    if op == "change":
        return a - b
    if op == "percent_change":
        return 100 * (a - b) / abs(b) if b else None
    if op == "average":
        return sum(values) / len(values)
    if op == "sum":
        return sum(values)
    if op == "ratio":
        return a / b if b else None
    if op == "share":
        return 100 * a / b if b else None
    return None


def _values(op: str, program: Program, tables: Tables, operands: Operands) -> list[Candidate]:
    p = program.probabilities.get(op, 0.0)
    found = []
    for k in (2, 3):
        for _, cells in _groups(program, tables, operands, k):
            text = "; ".join(cell_text(c, tables) for c in cells)
            found.append(_candidate(op, text, cells, p, program, operands))
    return found


def _extreme(op: str, program: Program, tables: Tables, operands: Operands) -> list[Candidate]:
    p = program.probabilities.get(op, 0.0)
    found = []
    for key in operands.best_rows(ROWS):
        cells = _period_cells(tables, key)
        if len(cells) < 2:
            continue
        pick = max if op == "largest" else min
        chosen = pick(cells, key=lambda c: c.cell.value)
        found.append(_candidate(op, max(column_years(chosen.cell.column)), cells, p, program, operands))
    return found


def _years(op: str, program: Program, tables: Tables, operands: Operands) -> list[Candidate]:
    p = program.probabilities.get(op, 0.0)
    found = []
    for table in sorted({key[0] for key in operands.best_rows(ROWS)}):
        columns = tables.tables[table].columns
        years = [max(column_years(heading)) for heading in columns if column_years(heading)]
        if years:
            cells = [c for c in tables.cells if c.table == table and c.row == 0]
            found.append(_candidate(op, "; ".join(dict.fromkeys(years)), cells, p, program, operands))
    return found


def _labels(op: str, program: Program, tables: Tables, operands: Operands) -> list[Candidate]:
    """The labels of the rows of the likeliest row's section (or of its table, when it has none)."""
    p = program.probabilities.get(op, 0.0)
    found = []
    for table, row in operands.best_rows(1):
        cells, placed = _section(tables, table, row)
        found.append(
            _candidate(op, "; ".join(dict.fromkeys(c.label for c in cells)), placed, p, program, operands)
        )
    return found


def _section(tables: Tables, table: int, row: int) -> tuple[list[Cell], list[Placed]]:
    """The first cells of the rows of ``row``'s section (of its table, when it has none), and
    those cells placed."""
    rows = tables.tables[table].rows
    section = rows[row][0].section
    cells = [r[0] for r in rows if not section or r[0].section == section]
    held = {id(cell) for cell in cells}
    return cells, [c for c in tables.cells if c.table == table and id(c.cell) in held]


def _period_cells(tables: Tables, key: Key) -> list[Placed]:
    """The cells of row ``key`` that hold a figure under a period's heading."""
    return [c for c in tables.row_cells(*key) if c.cell.value is not None and column_years(c.cell.column)]


def _count(op: str, program: Program, tables: Tables, operands: Operands) -> list[Candidate]:
    """How many rows the likeliest row's section has (its table's, when it has none), and how many
    of the likeliest rows' periods have a figure above, and below, each bound the question writes
    ("How many years did net sales exceed $200,000 thousand?"), each counted as printed."""
    p = program.probabilities.get(op, 0.0)
    found = []
    for table, row in operands.best_rows(1):
        cells, placed = _section(tables, table, row)
        counted = _candidate(op, str(len(cells)), placed, p, program, operands)
        counted.features["count_rows"] = 1.0
        found.append(counted)
    for bound in program.bounds[:2]:
        for key in operands.best_rows(ROWS):
            cells = _period_cells(tables, key)
            if len(cells) < 2:
                continue
            for under in (False, True):
                passing = [c for c in cells if (c.cell.value < bound if under else c.cell.value > bound)]
                counted = _candidate(op, str(len(passing)), cells, p, program, operands)
                counted.features["count_under"] = float(under)
                found.append(counted)
    return found


_OPERATIONS: dict[str, Callable[[str, Program, Tables, Operands], list[Candidate]]] = {
    "change": _arithmetic,
    "percent_change": _arithmetic,
    "average": _arithmetic,
    "sum": _arithmetic,
    "ratio": _arithmetic,
    "share": _arithmetic,
    "values": _values,
    "largest": _extreme,
    "smallest": _extreme,
    "years": _years,
    "list": _labels,
    "count": _count,
}
