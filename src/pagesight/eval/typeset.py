"""Typesetting with reportlab: a corpus of tables drawn cell by cell with questions about their
cells, and documents set as reports print them (``document``: headings, paragraphs, tables with
header rows, in a ``Look`` drawn from a seed), which the importers use for text and table datasets.

**The table corpus** tests the table reader on layouts it was not tuned on: ``pagesight eval``
reads the folder like any dataset. Each PDF page holds one table drawn cell by cell with
reportlab's own Helvetica (no font need be installed): a caption, a unit in the header ("(in
millions)"), a spanning heading over its columns (years, or regions), negative figures in
brackets, footnote marks on labels and figures, a dash for nil and a totals row that sums the
rows above it. ``truth.jsonl`` holds every cell (row label,
column heading, printed text); ``queries.jsonl``/``answers.jsonl``/``qrels.tsv`` ask for a cell, a
percent change or an average of two cells.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path

from pagesight.errors import InputError

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


# Report pages ------------------------------------------------------------------------------------
# A document typeset as a report prints it: headings, paragraphs, and tables of strings cell by
# cell (header rows, a unit line, figures right-aligned), in a ``Look`` drawn from a seed, so that
# no reader learns one template. BEIR's passages and TAT-QA's contexts are typeset here.

FAMILIES = {  # reportlab's own fonts, which every machine has: regular, bold, italic
    "Helvetica": ("Helvetica", "Helvetica-Bold", "Helvetica-Oblique"),
    "Times": ("Times-Roman", "Times-Bold", "Times-Italic"),
}
RULES = ("ruled", "grid", "unruled", "banded")  # how a table is ruled
A4, LETTER = (595.2756, 841.8898), (612.0, 792.0)
SEED = 0  # the seed of the looks a dataset's documents are drawn in, unless one is given
SMALLEST = 7.0  # the body size a document is shrunk to at most to fit its page


@dataclass(frozen=True)
class Look:
    """A document's typography: page, margins, fonts and sizes (points), paragraphs justified or
    not, the tables' rules, the row labels' share of a table's width, a table's share of the text
    width, column headings centred over their figures or right-aligned."""

    page: tuple[float, float] = A4
    margin: float = 72.0
    body: str = "Helvetica"
    table: str = "Helvetica"
    size: float = 10.0
    table_size: float = 9.0
    leading: float = 1.2  # line height over size
    justify: bool = False
    rules: str = "ruled"
    label_share: float = 0.4
    table_share: float = 1.0
    centred_headings: bool = False

    @classmethod
    def drawn(cls, rng: random.Random) -> Look:
        """A look drawn from ``rng``: the same draws give the same look."""
        size = rng.choice((8.5, 9.0, 9.5, 10.0, 10.5))
        return cls(
            page=rng.choice((A4, LETTER)),
            margin=rng.choice((42.0, 54.0, 60.0, 72.0)),
            body=rng.choice(tuple(FAMILIES)),
            table=rng.choice(tuple(FAMILIES)),
            size=size,
            table_size=size - rng.choice((0.0, 0.5, 1.0, 1.5)),
            leading=rng.choice((1.15, 1.2, 1.3)),
            justify=rng.random() < 0.5,
            rules=rng.choice(RULES),
            label_share=rng.uniform(0.3, 0.5),
            table_share=rng.choice((1.0, 1.0, 0.9, 0.8)),
            centred_headings=rng.random() < 0.4,
        )

    def smaller(self) -> Look:
        """The same look half a point smaller, body and tables."""
        return replace(self, size=self.size - 0.5, table_size=max(self.table_size - 0.5, 6.0))


@dataclass(frozen=True)
class Block:
    """One piece of a document: a ``heading``, a ``text`` paragraph, a ``unit`` line (a table's
    unit, "(in millions)") or a ``table`` (rows of cell strings, the first ``header_rows`` of them
    column headings, the first column row labels)."""

    kind: str
    text: str = ""
    rows: tuple[tuple[str, ...], ...] = ()
    header_rows: int = 0


def document(path: Path, blocks: list[Block], look: Look = Look(), fit: bool = False) -> int:
    """Typesets ``blocks`` into the PDF ``path`` (the same file for the same blocks and look); with
    ``fit``, a document that runs past one page is set smaller, half a point at a time down to
    ``SMALLEST``, until it fits (a longer one stays on several). Returns its number of pages."""
    pages = _build(path, blocks, look)
    while fit and pages > 1 and look.size - 0.5 >= SMALLEST:
        look = look.smaller()
        pages = _build(path, blocks, look)
    return pages


_NO_WINANSI = str.maketrans({"−": "-", "‐": "-", "‑": "-", "‒": "-", "―": "—", "\u200b": ""})


def printable(text: str) -> str:
    """``text`` in the characters reportlab's own fonts hold (Windows-1252): dashes and minus signs
    as dashes, ligatures spelled out, others that have no such form as '?'; escaped for its markup."""
    from unicodedata import normalize
    from xml.sax.saxutils import escape

    kept = []
    for char in text.translate(_NO_WINANSI):
        for form in (char, normalize("NFKC", char)):
            try:
                form.encode("cp1252")
            except UnicodeEncodeError:
                continue
            kept.append(form)
            break
        else:
            kept.append("?")
    return escape("".join(kept))


def _build(path: Path, blocks: list[Block], look: Look) -> int:
    try:
        from reportlab.lib.enums import TA_JUSTIFY, TA_LEFT
        from reportlab.lib.styles import ParagraphStyle
        from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer
    except ImportError:
        raise InputError("typesetting pages needs reportlab: pip install 'pagesight[eval]'") from None
    regular, bold, italic = FAMILIES[look.body]
    body = ParagraphStyle(
        "body",
        fontName=regular,
        fontSize=look.size,
        leading=look.size * look.leading,
        alignment=TA_JUSTIFY if look.justify else TA_LEFT,
        spaceAfter=look.size * 0.6,
    )
    heading = ParagraphStyle(
        "heading",
        parent=body,
        fontName=bold,
        fontSize=look.size + 1.5,
        leading=(look.size + 1.5) * look.leading,
        alignment=TA_LEFT,
        spaceBefore=look.size * 0.4,
        spaceAfter=look.size * 0.5,
    )
    unit = ParagraphStyle("unit", parent=body, fontName=FAMILIES[look.table][2], fontSize=look.table_size)
    width = look.page[0] - 2 * look.margin
    story = []
    for block in blocks:
        if block.kind == "table":
            story += [_table(block, look, width), Spacer(1, look.size)]
        else:
            style = {"heading": heading, "unit": unit}.get(block.kind, body)
            story.append(Paragraph(printable(block.text), style))
    margins = {side: look.margin for side in ("leftMargin", "rightMargin", "topMargin", "bottomMargin")}
    doc = SimpleDocTemplate(str(path), pagesize=look.page, invariant=1, **margins)
    doc.build(story)
    return doc.page


_FIGURE = re.compile(r"[^A-Za-z]*\d[^A-Za-z]*|[-–—]+|n/?a|nm", re.IGNORECASE)


def figure_like(cell: str) -> bool:
    """Whether a cell prints a figure (digits without letters, "$(1,234)", "12.5%"), a dash for
    nil or "n/a": what a statement right-aligns."""
    return bool(_FIGURE.fullmatch(cell.strip()))


def _table(block: Block, look: Look, width: float):
    from reportlab.lib.enums import TA_CENTER, TA_LEFT, TA_RIGHT
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import Paragraph, Table, TableStyle

    rows, top = block.rows, block.header_rows
    n = len(rows[0])
    width *= look.table_share
    label = width * look.label_share if n > 1 else width
    widths = [label] + [(width - label) / (n - 1)] * (n - 1)
    regular, bold, _ = FAMILIES[look.table]
    figures = [
        sum(figure_like(row[c]) for row in rows[top:] if row[c].strip())
        > sum(bool(row[c].strip()) for row in rows[top:]) / 2
        for c in range(n)
    ]
    spans = _spans(rows[:top])
    styles: dict[tuple[bool, int], ParagraphStyle] = {}

    def style(header: bool, align: int) -> ParagraphStyle:
        key = (header, align)
        if key not in styles:
            size = look.table_size
            styles[key] = ParagraphStyle(
                f"cell{len(styles)}",
                fontName=bold if header else regular,
                fontSize=size,
                leading=size * 1.15,
                alignment=align,
            )
        return styles[key]

    spanned = {(r, first) for r, first, _ in spans}
    heading_align = TA_CENTER if look.centred_headings else TA_RIGHT
    cells = []
    for r, row in enumerate(rows):
        line = []
        for c, text in enumerate(row):
            if c == 0:
                align = TA_LEFT
            elif (r, c) in spanned:
                align = TA_CENTER
            elif r < top:
                align = heading_align if figures[c] else TA_LEFT
            else:
                align = TA_RIGHT if figures[c] else TA_LEFT
            line.append(Paragraph(printable(text), style(r < top, align)) if text.strip() else "")
        cells.append(line)
    table = Table(cells, colWidths=widths, repeatRows=top, hAlign="LEFT")
    table.setStyle(TableStyle(_table_commands(look, top, spans)))
    return table


def _table_commands(look: Look, top: int, spans: list) -> list:
    """The table's style commands: padding, the header's spans, and the look's rules."""
    from reportlab.lib import colors

    pad = max(1.0, look.table_size * 0.15)
    commands = [
        ("VALIGN", (0, 0), (-1, -1), "BOTTOM"),
        ("TOPPADDING", (0, 0), (-1, -1), pad),
        ("BOTTOMPADDING", (0, 0), (-1, -1), pad),
        ("LEFTPADDING", (0, 0), (-1, -1), 3),
        ("RIGHTPADDING", (0, 0), (-1, -1), 3),
        *(("SPAN", (first, r), (last, r)) for r, first, last in spans),
    ]
    last_header = max(top - 1, 0)
    if look.rules == "grid":
        commands.append(("GRID", (0, 0), (-1, -1), 0.25, colors.black))
    elif look.rules == "ruled":
        commands += [
            ("LINEABOVE", (0, 0), (-1, 0), 1.0, colors.black),
            ("LINEBELOW", (0, -1), (-1, -1), 1.0, colors.black),
        ]
        if top:
            commands.append(("LINEBELOW", (1, last_header), (-1, last_header), 0.5, colors.black))
    elif look.rules == "banded":
        commands.append(("ROWBACKGROUNDS", (0, top), (-1, -1), [colors.white, colors.HexColor("#e8ecf1")]))
        if top:
            commands.append(("LINEBELOW", (0, last_header), (-1, last_header), 0.75, colors.black))
    return commands


def _spans(header: tuple[tuple[str, ...], ...]) -> list[tuple[int, int, int]]:
    """The heading cells that stand over several columns (row, first, last column): in a header row
    above the last, a heading followed by empty cells spans them, up to the next heading."""
    found = []
    for r, row in enumerate(header[:-1]):
        filled = [c for c in range(1, len(row)) if row[c].strip()]
        for c, following in zip(filled, [*filled[1:], len(row)]):
            if following - 1 > c:
                found.append((r, c, following - 1))
    return found


_YEARS = re.compile(r"(?:19|20)\d\d(?:\s*[-–/]\s*(?:19|20)?\d\d)?(?:\s*\(\d\))?")  # 2019, 2018/19 (1)
_UNIT = re.compile(r"[^\d]{0,40}(?:thousands|millions|billions)[^\d]{0,40}", re.IGNORECASE)


def header_rows(rows: list[list[str]]) -> int:
    """How many of a table's first rows are column headings: the leading rows that print no figure
    but years, or that have no row label and words among their cells (a row label alone, a
    section's name, ends them after the first row), at most 4 and one row less than the table;
    none when the first row is a row of figures."""
    found = 0
    for r, row in enumerate(rows[: min(4, len(rows) - 1)]):
        cells = [cell.strip() for cell in row[1:]]
        figures = [figure_like(cell) and not _YEARS.fullmatch(cell) for cell in cells if cell]
        if any(figures) and (row[0].strip() or all(figures)):
            break
        if r and row[0].strip() and not any(cells):
            break
        found += 1
    return found


def unit_line(rows: list[list[str]], top: int) -> tuple[str, list[list[str]]]:
    """A table's unit printed in a header row of its own ("(in thousands)", "($ in millions)"),
    and the rows without that row; "" and the rows as they are when no header row is one."""
    for r, row in enumerate(rows[:top]):
        filled = [cell.strip() for cell in row if cell.strip()]
        if len(filled) == 1 and _UNIT.fullmatch(filled[0]):
            return filled[0], rows[:r] + rows[r + 1 :]
    return "", rows
