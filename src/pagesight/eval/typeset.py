"""A corpus of typeset tables with questions about their cells, to test the table reader on layouts
it was not tuned on: ``pagesight eval`` reads the folder like any dataset.

Each PDF page holds one table drawn cell by cell with reportlab's own Helvetica (no font need be
installed): a caption, a unit in the header ("(in millions)"), a spanning heading over its columns
(years, or regions), negative figures in brackets, footnote marks on labels and figures, a dash
for nil and a totals row that sums the rows above it. ``truth.jsonl`` holds every cell (row label,
column heading, printed text); ``queries.jsonl``/``answers.jsonl``/``qrels.tsv`` ask for a cell, a
percent change or an average of two cells.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

ITEMS = [
    "Net sales", "Cost of sales", "Research and development", "Selling and marketing",
    "General and administrative", "Restructuring charges", "Interest expense", "Other income",
    "Income taxes", "Depreciation", "Inventories", "Accounts payable", "Accrued liabilities",
    "Deferred revenue", "Goodwill", "Capital expenditures", "Dividends paid", "Share repurchases",
]  # fmt: skip
REGIONS = ["Americas", "Europe", "Asia"]
UNITS = ["(in millions)", "(in thousands)", "(dollars in millions)"]
PAGE = (612, 792)  # US letter, points


def figure(value: int, mark: str = "") -> str:
    """A figure as statements print it: thousands grouped, negatives in brackets, 0 as a dash."""
    if value == 0:
        return "—"
    text = f"{abs(value):,}"
    return (f"({text})" if value < 0 else text) + mark


def table_spec(rng: random.Random, number: int) -> dict:
    """One table: its caption, unit, spanning heading, columns and rows (label, values)."""
    by_region = number % 3 == 2
    columns = REGIONS if by_region else [str(2024 - k) for k in range(rng.choice((2, 3)))]
    labels = rng.sample(ITEMS, rng.randint(4, 7))
    rows = []
    for label in labels:
        values = [rng.randint(-900, 9000) if rng.random() < 0.2 else rng.randint(50, 9000) for _ in columns]
        if rng.random() < 0.1:
            values[rng.randrange(len(values))] = 0
        rows.append([label, values])
    return {
        "caption": f"Table {number + 1}. Consolidated {rng.choice(['results', 'balances', 'costs'])}",
        "unit": rng.choice(UNITS),
        "spanning": "Region" if by_region else "Year ended December 31,",
        "columns": columns,
        "rows": rows,
        "footnote": rng.randrange(len(rows)),  # the row whose label carries a mark
    }


def draw_table(canvas, spec: dict) -> list[dict]:
    """Draws ``spec`` on a page of ``canvas``; the cells as drawn (label, column, text)."""
    x_label, x_first, pitch, top = 72, 330, 80, 700
    right = [x_first + pitch * (c + 1) for c in range(len(spec["columns"]))]
    canvas.setFont("Helvetica-Bold", 12)
    canvas.drawString(x_label, top, spec["caption"])
    canvas.setFont("Helvetica", 10)
    canvas.drawString(x_label, top - 34, spec["unit"])
    canvas.drawCentredString((right[0] - 50 + right[-1]) / 2, top - 20, spec["spanning"])
    for c, column in enumerate(spec["columns"]):
        canvas.drawRightString(right[c], top - 34, column)
    cells, y = [], top - 54
    totals = [0] * len(spec["columns"])
    for r, (label, values) in enumerate(spec["rows"]):
        printed = f"{label} (1)" if r == spec["footnote"] else label
        canvas.drawString(x_label, y, printed)
        for c, v in enumerate(values):
            text = figure(v, "*" if r == 0 and c == 0 else "")
            canvas.drawRightString(right[c], y, text)
            cells.append({"label": label, "column": spec["columns"][c], "text": text})
            totals[c] += v
        y -= 16
    canvas.setFont("Helvetica-Bold", 10)
    canvas.drawString(x_label, y - 4, "Total")
    for c, v in enumerate(totals):
        canvas.drawRightString(right[c], y - 4, figure(v))
        cells.append({"label": "Total", "column": spec["columns"][c], "text": figure(v)})
    canvas.setFont("Helvetica", 8)
    canvas.drawString(
        x_label, y - 40, "(1) Restated for the change in accounting policy described in Note 2."
    )
    canvas.drawString(x_label, y - 52, "* Includes the acquired business from the second quarter.")
    return cells


def questions(spec: dict, doc: str, rng: random.Random) -> list[tuple[str, str]]:
    """(question, answer) pairs: a cell by its row and column, and for years a percent change and
    an average of two cells."""
    label, values = spec["rows"][rng.randrange(len(spec["rows"]))]
    c = rng.randrange(len(spec["columns"]))
    column = spec["columns"][c]
    asked = [
        (
            f"What was {label.lower()} in {column}{'' if column.isdigit() else ' in FY2024'}?",
            figure(values[c]).rstrip("*"),
        )
    ]
    if column.isdigit() and len(spec["columns"]) > 1:
        label, values = rng.choice([row for row in spec["rows"] if 0 not in row[1]])
        new, old = spec["columns"][0], spec["columns"][-1]
        change = 100 * (values[0] - values[-1]) / abs(values[-1])
        asked.append(
            (f"What was the percent change in {label.lower()} from {old} to {new}?", f"{change:.1f}%")
        )
        average = (values[0] + values[-1]) / 2
        asked.append((f"What was the average {label.lower()} between {old} and {new}?", f"{average:,.2f}"))
    return asked


def generate(folder: Path, n_tables: int = 12, seed: int = 54) -> Path:
    """Writes the corpus into ``folder``: corpus/*.pdf, queries.jsonl, answers.jsonl, qrels.tsv
    and truth.jsonl; the same files for the same seed."""
    from reportlab.pdfgen.canvas import Canvas

    rng = random.Random(seed)
    (folder / "corpus").mkdir(parents=True, exist_ok=True)
    queries, answers, qrels, truth = [], [], ["query-id\tcorpus-id\tscore"], []
    for number in range(n_tables):
        spec = table_spec(rng, number)
        doc = f"table-{number + 1:02d}"
        canvas = Canvas(str(folder / "corpus" / f"{doc}.pdf"), pagesize=PAGE, invariant=True)
        truth.append({"doc": doc, "page": 1, "cells": draw_table(canvas, spec)})
        canvas.showPage()
        canvas.save()
        for k, (question, answer) in enumerate(questions(spec, doc, rng)):
            qid = f"{doc}-q{k + 1}"
            queries.append({"_id": qid, "text": question})
            answers.append({"_id": qid, "answer": answer})
            qrels.append(f"{qid}\t{doc}_1\t1")
    for name, rows in (("queries", queries), ("answers", answers), ("truth", truth)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    return folder
