"""A tile's spans read back as lines: spans on one row joined left to right, each line keeping
which of its characters came from which span's box. The extractive reader's candidates
(``answer/extractive/lines.py``) and the table finder (``text/tables.py``) read these, and the
table finder runs at ingestion too (BM25's table cells), so they live below both."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pagesight.records import Box, Span, same_row

PRINTED_YEAR = re.compile(r"\b(?:1[5-9]|20)\d\d\b")  # a year, 1500 to 2099
# what a query or a tile names: a year (1900 to 2099, not inside a longer number), a word that is a figure
YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")
FIGURE = re.compile(r"(?<![($€£])[($€£]*-?\d[\d,.]*%?\)?")  # read from no start within its opening


@dataclass
class Line:
    """A line of a tile: one span, or spans on one row joined; ``parts`` maps characters to boxes."""

    text: str
    box: Box
    parts: list[tuple[int, int, Box]]


def characters(box: Box, first: int, last: int, lo: int, hi: int) -> Box:
    """The part of ``box``, which holds characters ``first`` to ``last``, that characters ``lo`` to
    ``hi`` take, its width shared evenly among its characters."""
    x0, y0, x1, y1 = box
    width = (x1 - x0) / (last - first)
    return (x0 + width * (lo - first), y0, x0 + width * (hi - first), y1)


# a piece this short joins the line it stands beside, however long that is: a figure, a heading
_FIGURE_WORDS = 3


def read_lines(spans: list[Span]) -> list[Line]:
    """The tile's lines; short spans on one row (a label and its value, table cells read by OCR
    or cut apart in the text layer) are joined into one line, left to right: pieces of six words
    at most, or one of ``_FIGURE_WORDS`` beside a longer one (a long row label and its figures),
    so two columns of prose side by side stay apart."""
    lines: list[Line] = []
    for span in _left_to_right(spans):
        text = span.text.strip()
        if not text:
            continue
        box = tuple(span.box)
        if lines:
            last = lines[-1]
            previous = last.text[last.parts[-1][0] :]
            if (
                same_row(last.parts[-1][2], box)
                and box[0] >= last.parts[-1][2][2] - 2
                and (
                    len(text.split()) <= _FIGURE_WORDS
                    or len(previous.split()) <= 6
                    and len(text.split()) <= 6
                )
            ):
                start = len(last.text) + 1
                last.text = f"{last.text} {text}"
                last.parts.append((start, start + len(text), box))
                x0, y0, x1, y1 = last.box
                last.box = (min(x0, box[0]), min(y0, box[1]), max(x1, box[2]), max(y1, box[3]))
                continue
        lines.append(Line(text, box, [(0, len(text), box)]))
    return lines


def _left_to_right(spans: list[Span]) -> list[Span]:
    """The spans with each run of consecutive spans on one row put left to right: OCR gives a
    row's amount before its label when the amount's box starts a pixel higher."""
    ordered: list[Span] = []
    row: list[Span] = []
    for span in spans:
        if row and not same_row(row[0].box, span.box):
            ordered += sorted(row, key=lambda s: s.box[0])
            row = []
        row.append(span)
    return ordered + sorted(row, key=lambda s: s.box[0])
