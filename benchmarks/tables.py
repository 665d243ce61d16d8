"""Table finders measured on typeset tables (``pagesight.eval.typeset``): the share of cells each
reads right, with their row label and column heading.

    python -m benchmarks.tables [--tables 12] [--seed 54] [--ocr]
    python -m benchmarks.tables --tiny       # two tables

Seed 54 is the corpus the finder was written against; another seed gives tables it has not seen.

``ours``: ``text.tables`` on the stored spans (PDFium's text-layer lines; with
``--ocr``, Tesseract's lines of the page rendered at 150 DPI); ``pdfplumber``: its table finder on
the PDF, with its ruling-line strategy (the default) and its text-alignment one, a table's rows
read as a header (the rows above its first figures) and rows labelled by their first cell. A cell
is right when its text, its row label and its column heading are found together.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pypdfium2 as pdfium

from benchmarks import harness
from pagesight.eval.typeset import generate
from pagesight.text.tables import read_tables
from pagesight.text.textlayer import text_layer_spans

DPI = 100


def _key(label: str, column: str, text: str) -> tuple[str, str, str]:
    return (re.sub(r"\W+", " ", re.sub(r"\(\d\)", "", label)).strip().lower(), column, text.rstrip("*"))


def ours(pdf: Path, ocr: bool) -> set[tuple[str, str, str]]:
    page = pdfium.PdfDocument(str(pdf))[0]
    width, height = page.get_size()
    if ocr:
        from pagesight.text.ocr import ocr_spans

        image = page.render(scale=150 / 72).to_pil()
        spans = ocr_spans(image, scale=DPI / 150)
    else:
        spans = text_layer_spans(page, (round(width * DPI / 72), round(height * DPI / 72)))
    found = set()
    for table in read_tables(spans):
        for cell in table.cells():
            for column in re.findall(r"\b(?:\d{4}|Americas|Europe|Asia)\b", cell.column) or [cell.column]:
                found.add(_key(cell.label, column, cell.text))
    return found


def plumber(pdf: Path, strategy: str) -> set[tuple[str, str, str]]:
    import pdfplumber

    settings = {"vertical_strategy": strategy, "horizontal_strategy": strategy}
    found = set()
    with pdfplumber.open(str(pdf)) as document:
        for table in document.pages[0].extract_tables(settings):
            rows = [[(cell or "").strip() for cell in row] for row in table]
            first = next(
                (k for k, row in enumerate(rows) if sum(bool(re.search(r"\d,\d|\(\d", c)) for c in row) >= 1),
                len(rows),
            )
            heads = [" ".join(row[c] for row in rows[:first]) for c in range(len(rows[0]) if rows else 0)]
            for row in rows[first:]:
                label = next((c for c in row if c), "")
                for c, text in enumerate(row[1:], 1):
                    for column in re.findall(r"\b(?:\d{4}|Americas|Europe|Asia)\b", heads[c]) or [heads[c]]:
                        found.add(_key(label, column, text))
    return found


def measure(folder: Path, ocr: bool) -> dict:
    truth = [json.loads(line) for line in (folder / "truth.jsonl").open()]
    finders = {"ours (text layer)": lambda p: ours(p, False)}
    if ocr:
        finders["ours (OCR, Tesseract)"] = lambda p: ours(p, True)
    finders["pdfplumber (lines)"] = lambda p: plumber(p, "lines")
    finders["pdfplumber (text)"] = lambda p: plumber(p, "text")
    found = {}
    for name, finder in finders.items():
        right = total = 0
        for table in truth:
            read = finder(folder / "corpus" / f"{table['doc']}.pdf")
            cells = {_key(c["label"], c["column"], c["text"]) for c in table["cells"]}
            right += len(cells & read)
            total += len(cells)
        found[name] = {"right": right, "cells": total, "share": round(right / total, 4)}
    return found


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--tables", type=int, default=12)
    parser.add_argument("--seed", type=int, default=54)
    parser.add_argument("--ocr", action="store_true")
    args = harness.start(parser, argv)
    tables = 2 if args.tiny else args.tables
    with tempfile.TemporaryDirectory() as tmp:
        finders = measure(generate(Path(tmp), tables, args.seed), args.ocr)
    harness.finish(args, __spec__.name, {"tables": tables, "seed": args.seed, "finders": finders})


if __name__ == "__main__":
    main()
