"""The extractive reader's layout: a tile's spans read back as lines (spans on one row joined), the
lines the table finder reads as a table's rows (``text/tables.py``: their cells are candidates of
their own, ``cells.py``) kept apart, the rest grouped into blocks and sentences, and labelled
values and large figures paired with their labels: the line candidates (``AnswerCandidate``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pagesight.answer.base import ContextItem
from pagesight.encode.lexical import terms
from pagesight.records import Box
from pagesight.text.lines import Line, characters, read_lines

ELLIPSIS = "… "  # before a sentence read from its middle
# an amount: a figure with its currency and its percent sign ("$3.2", "7%", "12.5 percent"), its
# thousands grouped by commas ("1,536"; not the comma after it: "set to 60, which"), not the
# digits of a word ("BM25", "Q3")
AMOUNT = re.compile(
    r"(?:[$€£¥]|(?<!\w))\d+(?:,\d{3}(?!\d))*(?:\.\d+)?(?:\s?%|\s?percent\b|\s?per cent\b)?", re.IGNORECASE
)
# what no sentence starts with: a word in lower case (not a name such as iPhone), a comma, a bracket
_MID_SENTENCE = re.compile(r"^(?:[,;:)\]]|[a-z][a-z'’-]*(?=[\s,.;:]))")


_NUMERIC = re.compile(r"[-+(]?[$€£¥]?\d[\d,.]*%?\)?")
_SENTENCE = re.compile(r"\S.*?(?:[.!?](?=\s+[\"'(\[“‘]?[A-Z0-9])|$)", re.DOTALL)


DATE = re.compile(r"\b\d{1,4}[/.-]\d{1,2}[/.-]\d{2,4}\b")


_QUOTE = re.compile(r"[“”„]|(^|\s)\"\S|\S\"(\s|$)|\b(said|says)\s+[A-Z]")


_COLON_LABEL = re.compile(r"^([^:\d][^:]{0,40}?):\s+(\S.*)$")


@dataclass
class AnswerCandidate:
    """A passage of a tile the extractive reader may answer with: a sentence, a labelled value or a
    large figure with its label; with its boxes."""

    item: int  # index of the context item
    text: str  # what is scored against the question
    answer: str  # what is returned
    boxes: list[Box]
    label: str | None = None  # the words that name a value ("Total due", "Weight")
    value: str | None = None  # the value they name
    own: str = ""  # the candidate's own words (``text`` less a figure's label line)
    quote: bool = False  # a quotation
    extra: set[str] = field(default_factory=set)  # terms of the document's name and title
    title: str = ""  # the page's title, which a short candidate is embedded with
    places: list[tuple[int, int, Box]] = field(default_factory=list)  # ``answer``'s characters' boxes
    prose: bool = False  # ``places`` are runs of words, evenly set (a label's line may hide wide gaps)

    def boxes_of(self, text: str) -> list[Box]:
        """The boxes of ``text`` where it stands in ``answer``: the boxes of the places its
        characters fall in, in prose only the part of each its characters take, a place's width
        shared evenly among its characters; all of ``boxes`` when it is the whole answer or not in
        it."""
        start = self.answer.find(text) if text else -1
        if start < 0 or text == self.answer or not self.places:
            return self.boxes
        end = start + len(text)
        found = []
        for lo, hi, (x0, y0, x1, y1) in self.places:
            if min(hi, end) <= max(lo, start):
                continue
            if not self.prose:  # a line's pieces: a span's text says nothing of its gaps
                found.append((x0, y0, x1, y1))
                continue
            found.append(characters((x0, y0, x1, y1), lo, hi, max(lo, start), min(hi, end)))
        return found or self.boxes


def answer_candidates(
    context: Sequence[ContextItem],
    tabled: set[tuple[str, Box]] | None = None,
    read: dict[int, list[Line]] | None = None,
) -> list[AnswerCandidate]:
    """The sentences of each tile's text blocks, its labelled values and its figures under their
    labels; the lines of its tables (``tabled``: their text and box, as ``cells.Tables.printed``
    gives them; read here when not given) are left to their cells. ``read``: the lines of items
    already read, by item."""
    if tabled is None:
        from pagesight.answer.extractive.cells import Tables

        tables = Tables.of(context)
        tabled, read = tables.printed(), tables.lines
    found = []
    for i, item in enumerate(context):
        lines = (read or {}).get(i) or read_lines(item.spans)
        if not lines:
            continue
        extra = _context_terms(item, lines)
        title = lines[0].text if item.hit.tile == 0 else ""
        widest = max(line.box[2] - line.box[0] for line in lines)
        rows = [(line.text, line.box) in tabled for line in lines]  # its cells answer for a row
        first = len(found)
        block: list[Line] = []
        for j, line in enumerate(lines):
            if rows[j]:
                found += _sentences(i, block)
                block = []
                continue
            alone = _stands_alone(line.text)
            if block and (alone or not _adjacent(block[-1].box, line.box)):
                found += _sentences(i, block)
                block = []
            block.append(line)
            if alone or _ends_block(line, widest):
                found += _sentences(i, block)
                block = []
        found += _sentences(i, block)
        found += _figures(i, lines, rows)
        for c in found[first:]:
            c.extra, c.title = extra, title
            c.own = c.own or c.text
            c.quote = bool(_QUOTE.search(c.own))
            if c.label is None:
                c.label, c.value = _label_value(c.own)
    return found


def _context_terms(item: ContextItem, lines: list[Line]) -> set[str]:
    """The words every line of a tile is read with: its document's name and its page's title."""
    found = set(terms(item.hit.doc_id.replace("-", " ").replace("_", " ")))
    if item.hit.tile == 0:
        found |= set(terms(lines[0].text))
    return found


def _label_value(text: str) -> tuple[str | None, str | None]:
    """ "Label: value", or a label followed by the numbers on its row ("TOTAL 25.68")."""
    match = _COLON_LABEL.match(text)
    if match and len(match.group(1).split()) <= 5:
        return match.group(1), match.group(2)
    tokens = text.split()
    if len(tokens) > 8 or text.rstrip().endswith((".", "!", "?")):  # a sentence, not a label
        return None, None
    n = 0
    while n < len(tokens) and is_number(tokens[len(tokens) - 1 - n]):
        n += 1
    if 0 < n <= 2 and n < len(tokens) and not any(ch.isdigit() for ch in tokens[0]):  # more: a row
        return " ".join(tokens[: len(tokens) - n]), " ".join(tokens[len(tokens) - n :])
    return None, None


def _stands_alone(text: str) -> bool:
    """A label with its value on one line ("TOTAL 25.68", "Weight: 1.2 kg") is a block of its own."""
    return not text[:1].islower() and len(text.split()) <= 8 and _label_value(text)[0] is not None


def _figures(item: int, lines: list[Line], rows: list[bool]) -> list[AnswerCandidate]:
    """A short label line over a figure ("Q4 Net Sales" above "$3.2 Billion"), read as one."""
    found = []
    for j in range(1, len(lines)):
        label, value = lines[j - 1], lines[j]
        if rows[j] or rows[j - 1] or not is_figure(value.text) or is_figure(label.text):
            continue
        if (
            len(label.text.split()) > 8
            or label.text.rstrip().endswith((".", "!", "?"))
            or _stands_alone(label.text)
        ):
            continue  # a sentence, or a label with its own value
        height = label.box[3] - label.box[1]
        overlap = min(label.box[2], value.box[2]) - max(label.box[0], value.box[0])
        if not (0 <= value.box[1] - label.box[3] <= 2.5 * height and overlap > 0):
            continue
        found.append(
            AnswerCandidate(
                item,
                f"{label.text} {value.text}",
                value.text,
                [p[2] for p in label.parts] + [p[2] for p in value.parts],
                label=label.text,
                value=value.text,
                places=value.parts,
            )
        )
    return found


def is_figure(text: str) -> bool:
    """A figure standing alone: a number with at most a currency and a unit ("$3.2 Billion")."""
    tokens = text.split()
    return (
        0 < len(tokens) <= 3
        and is_number(tokens[0])
        and not (tokens[0].endswith(".") and len(tokens) > 1)  # "1. Finance" is a heading
        and not DATE.search(text)
    )


def _sentences(item: int, lines: list[Line]) -> list[AnswerCandidate]:
    """The sentences of a block of lines, each with the parts of the lines it covers."""
    if not lines:
        return []
    text, starts = "", []
    for line in lines:
        starts.append(len(text) + (1 if text else 0))
        text = f"{text} {line.text.strip()}" if text else line.text.strip()
    found = []
    for match in _SENTENCE.finditer(text):
        begin, end = match.span()
        first = begin + len(match.group()) - len(match.group().lstrip())  # the sentence's first character
        boxes, places = [], []
        for line, start in zip(lines, starts):
            for part_start, part_end, box in line.parts:
                lo, hi = max(begin, start + part_start), min(end, start + part_end)
                if hi <= lo:
                    continue
                boxes.append(characters(box, start + part_start, start + part_end, lo, hi))
                places.append((max(lo - first, 0), hi - first, boxes[-1]))
        sentence = match.group().strip()
        answer = sentence
        if (
            _MID_SENTENCE.match(sentence) and " " in sentence
        ):  # the block starts mid-sentence (a tile's or a column's top)
            answer = f"{ELLIPSIS}{sentence}"
            places = [(lo + len(ELLIPSIS), hi + len(ELLIPSIS), box) for lo, hi, box in places]
        found.append(AnswerCandidate(item, sentence, answer, boxes, places=places, prose=True))
    return found


def is_number(token: str) -> bool:
    """``token`` is a figure: an amount, a percentage, a signed or bracketed number."""
    return bool(_NUMERIC.fullmatch(token))


def _ends_block(line: Line, widest: float) -> bool:
    """A short line without closing punctuation (a heading, a label) stands alone."""
    short = line.box[2] - line.box[0] < 0.6 * widest
    return short and not line.text.rstrip().endswith((".", ",", ";", ":", "-"))


def _adjacent(a: Box, b: Box) -> bool:
    """``b`` is the next line of the same block: just below ``a`` and overlapping it horizontally."""
    height = max(a[3] - a[1], 1.0)
    gap = b[1] - a[3]
    overlap = min(a[2], b[2]) - max(a[0], b[0])
    return -0.5 * height <= gap <= 1.8 * height and overlap > 0
