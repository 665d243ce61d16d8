"""CPU seconds of the extractive reader on the worst questions a request may send (issue 60).

    python -m benchmarks.request_bounds [--pages 40] [--phrases 195] [--attacks-only] [--json out.json]
    python -m benchmarks.request_bounds --tiny   # the three attacks over 2 pages, a formula of 10 phrases

Each question is of the longest length a request takes (4,000 characters): issue 60's attacks
(defect 1: "what is X", spaces and "!"; defect 2: a ratio's sides, "what is a to " repeated; defect
3: a formula of ``--phrases`` cell phrases, over a statement of ``--pages`` typeset pages of 30
rows each) and, unless ``--attacks-only``, one question of every shape the pattern fuzz tries (a
character repeated after a question's opening: spaces, tabs, digits, letters, punctuation). Each is read once by
``ExtractiveReader(dense=False)`` over the statement's first page (the formula over all of them),
timed by ``time.process_time``: the seconds of each, and the worst.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pypdfium2 as pdfium
from reportlab.pdfgen.canvas import Canvas

from benchmarks import harness
from pagesight.answer.base import ContextItem
from pagesight.answer.extractive import ExtractiveReader
from pagesight.eval.typeset import ITEMS, PAGE, draw_table
from pagesight.records import Hit
from pagesight.text.textlayer import text_layer_spans

LONGEST = 4000  # request.MAX_QUERY
ROWS = 30
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
OPENINGS = ("what is ", "how much higher was ", "The FY2021 ratio: what is ", "where ", "")
PUMPED = " \t\n0a1A.,-$%()'/:?!"


def label(n: int) -> str:
    item, rest = ITEMS[n % len(ITEMS)], n // len(ITEMS)
    return f"{item} {NAMES[rest % len(NAMES)]} {PLACES[rest // len(NAMES) % len(PLACES)]}"


def statement(folder: Path, pages: int) -> list[ContextItem]:
    """``pages`` pages of a typeset statement, ``ROWS`` rows each, every row label distinct."""
    path = folder / "statement.pdf"
    canvas = Canvas(str(path), pagesize=PAGE, invariant=True)
    for page in range(pages):
        rows = [[label(page * ROWS + r), [100 + r, 200 + r, 300 + r]] for r in range(ROWS)]
        spec = {"caption": f"Table {page + 1}. Consolidated results", "unit": "(in millions)",
                "spanning": "Year ended December 31,", "columns": ["2024", "2023", "2022"], "rows": rows,
                "footnote": 0}  # fmt: skip
        draw_table(canvas, spec)
        canvas.showPage()
    canvas.save()
    size = (round(PAGE[0] * 100 / 72), round(PAGE[1] * 100 / 72))
    document = pdfium.PdfDocument(str(path))
    items = []
    for page in range(pages):
        hit = Hit("statement", page + 1, 0, 1.0, {}, "", [], size, (0.0, 0.0, *map(float, size)))
        items.append(ContextItem(hit=hit, spans=text_layer_spans(document[page], size)))
    return items


def formula(phrases: int) -> str:
    parts = [f"FY2024 {label(n).lower()}" for n in range(phrases)]
    return "The score is defined as: " + " + ".join(parts) + ". What is the FY2024 score?"


def questions(phrases: int, shapes: bool = True) -> dict[str, str]:
    found = {
        "defect 1: what is X, spaces, !": "what is X" + " " * (LONGEST - 10) + "!",
        "defect 2: what is a to, repeated": "The FY2021 ratio: " + "what is a to " * 306 + "!",
    }
    for opening in OPENINGS if shapes else ():
        for pump in PUMPED:
            found[f"{opening!r} + {pump!r} x n + '!'"] = opening + pump * (LONGEST - len(opening) - 1) + "!"
    found[f"defect 3: a formula of {phrases} phrases"] = formula(phrases)
    return found


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--phrases", type=int, default=195)
    parser.add_argument("--attacks-only", action="store_true", help="issue 60's three attacks alone")
    args = harness.start(parser, argv)
    if args.tiny:
        args.pages, args.phrases, args.attacks_only = 2, 10, True
    reader = ExtractiveReader(dense=False)
    with tempfile.TemporaryDirectory() as folder:
        pages = statement(Path(folder), args.pages)
    seconds = {}
    for name, question in questions(args.phrases, not args.attacks_only).items():
        context = pages if name.startswith("defect 3") else pages[:1]
        start = time.process_time()
        reader.read(question, context)
        seconds[name] = round(time.process_time() - start, 4)
        print(f"{seconds[name]:9.4f} s  {name} ({len(question)} characters)", file=sys.stderr, flush=True)
    worst = max(seconds, key=seconds.get)
    result = {
        "pages": args.pages,
        "phrases": args.phrases,
        "seconds": seconds,
        "worst": [worst, seconds[worst]],
    }
    harness.finish(args, __spec__.name, result)


if __name__ == "__main__":
    main()
