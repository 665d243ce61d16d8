"""What model readers are told and how their replies are read: the instructions (answer from the
pages, cite regions the ViDoRe V3 way or passages' lines, closed-book), the passages prompt, the
``<bboxes>`` and ``<lines>`` tags parsed back to page boxes, a reasoning model's ``<think>`` left
out, and the log-probability of an answer (VisRAG's weighted selection). See ``answer.base`` for
the records they fill.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pagesight.choices import COORDINATES, INPUTS
from pagesight.errors import PagesightError
from pagesight.records import Box, Span, printed_rows, union
from pagesight.text.tables import read_tables

if TYPE_CHECKING:
    from pagesight.answer.base import ContextItem

_INSTRUCTIONS = (
    "You answer questions from the document pages you are given. Answer concisely, using only what "
    "the given pages say or show. If the answer is not in them, say that it cannot be found in the "
    "given pages."
)
_CITE_BOXES = (
    'After the answer, cite the regions you used: for each image you used, write <bboxes image="N">'
    "[[x0, y0, x1, y1], ...]</bboxes>, with the images numbered from {first} in the order given and "
    "{scale}."
)
_SCALES = {
    "norm1000": "the coordinates running from 0 to 1000 across the image's width and height, (0, 0) "
    "being its top left corner",
    "pixels": "the coordinates in pixels of the image, (0, 0) being its top left corner",
    "norm1": "the coordinates running from 0 to 1 (decimal fractions) across the image's width and "
    "height, (0, 0) being its top left corner",
}
_CITE_LINES = (
    'After the answer, cite the lines you used: for each passage you used, write <lines passage="N">'
    "[k, ...]</lines>, with the passages numbered from {first} in the order given and k the numbers of "
    "its lines."
)

_CITE_BOTH = (
    "The pages come as images (Image N) or as their text (Passage N), numbered together from {first} "
    'in the order given. After the answer, cite what you used: for each image, write <bboxes image="N">'
    "[[x0, y0, x1, y1], ...]</bboxes>, with {scale}; for each passage, write "
    '<lines passage="N">[k, ...]</lines>, with k the numbers of its lines.'
)


CLOSED_BOOK = (
    "You answer questions concisely from what you know; no document pages are given. If you do not "
    "know the answer, say so."
)
QUESTION_IMAGE = "The question's image"  # the label of a picture the question is about
_ABOUT_IMAGE = (
    "The question comes with an image of its own, labelled {label}: it shows what the question is about."
)
_NOT_A_PAGE = " It is not one of the numbered pages: cite only those."
_THINKING = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_THINKING_END = re.compile(r"</think>", re.IGNORECASE)


def thinking_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds a reasoning model's thinking: each ``<think>...</think>`` block (one left
    open runs to the end), and everything up to a closing tag whose opening one the chat template
    wrote into the prompt."""
    spans = [match.span() for match in _THINKING.finditer(text)]
    first = _THINKING_END.search(text)
    if first and not any(start <= first.start() < end for start, end in spans):
        spans.insert(0, (0, first.end()))
    return spans


def strip_thinking(text: str) -> str:
    """``text`` without its thinking (``thinking_spans``): what a metric, a judge or a score reads."""
    for start, end in reversed(thinking_spans(text)):
        text = text[:start] + " " + text[end:]
    return text.strip()


def instructions(
    inputs: str,
    coordinates: str,
    sizes_labelled: bool = False,
    pages: bool = True,
    number_from: int = 1,
    question_image: bool = False,
) -> str:
    """The system prompt of the model readers: answer from the pages, then cite the regions
    (``<bboxes>``, for image inputs) or the numbered lines (``<lines>``, for text inputs) used,
    the images or passages numbered from ``number_from`` (``"auto"``: some pages are images, the
    others passages, numbered together, each cited its own way).

    ``sizes_labelled``: the label of each image gives its size, which pixel coordinates refer to.
    ``pages`` False: no pages are given (the no-retrieval baseline), ``CLOSED_BOOK``.
    ``question_image``: the question comes with a picture, labelled ``QUESTION_IMAGE``.
    """
    about = _ABOUT_IMAGE.format(label=QUESTION_IMAGE.lower()) if question_image else ""
    if not pages:
        return f"{CLOSED_BOOK}\n{about}" if about else CLOSED_BOOK
    if inputs == "text":
        return f"{_INSTRUCTIONS}\n{_CITE_LINES.format(first=number_from)}"
    scale = _SCALES[coordinates]
    if coordinates == "pixels" and sizes_labelled:
        scale += " (each image's size is given in its label)"
    cite = (_CITE_BOTH if inputs == "auto" else _CITE_BOXES).format(first=number_from, scale=scale)
    return f"{_INSTRUCTIONS}\n{cite}" + (f"\n{about}{_NOT_A_PAGE}" if about else "")


def model_scale(coordinates: str, seen: tuple[int, int]) -> tuple[float, float]:
    """Pixels of an image as the model saw it (``seen``: its width and height) per unit of
    ``coordinates`` across its width and its height."""
    width, height = seen
    if coordinates == "norm1000":
        return width / 1000, height / 1000
    if coordinates == "norm1":
        return float(width), float(height)
    return 1.0, 1.0


_TAGS = re.compile(r"<(bboxes|lines)\b[^>]*>.*?</\1>", re.DOTALL | re.IGNORECASE)
_BBOXES = re.compile(r"<bboxes\s+image\s*=\s*[\"']?(\d+)[\"']?\s*>(.*?)</bboxes>", re.DOTALL | re.IGNORECASE)
_LINES = re.compile(r"<lines\s+passage\s*=\s*[\"']?(\d+)[\"']?\s*>(.*?)</lines>", re.DOTALL | re.IGNORECASE)


def parse_bboxes(
    text: str,
    context: Sequence[ContextItem],
    coordinates: str = "norm1000",
    seen_sizes: Sequence[tuple[int, int] | None] | None = None,
    number_from: int = 1,
    only: set[int] | None = None,
) -> tuple[str, dict[int, list[Box]], list[str]]:
    """Strip ``<bboxes image="N">`` tags from ``text`` and map their boxes to page pixels.

    Returns the answer without the tags, the boxes per context index (0-based; image
    ``number_from`` is the first), and one problem line per tag or box that was dropped (unknown
    image, malformed list, empty or inverted box). Boxes are clipped to their image.
    ``seen_sizes``: the (width, height) each image had when the model saw it, by context index,
    when its processor resized it (boxes refer to those; None: the images' own sizes). ``only``:
    the context indexes given as images, when the others were passages (``inputs="auto"``).
    """
    if coordinates not in COORDINATES:
        raise PagesightError(f"coordinates must be one of {', '.join(COORDINATES)}, got '{coordinates}'")
    cited: dict[int, list[Box]] = {}
    problems: list[str] = []
    for i, number, boxes in _tagged(_BBOXES, text, len(context), "image", problems, number_from):
        if only is not None and i not in only:
            problems.append(f"a tag for image {number}, but {number} was given as a passage: cite its lines")
            continue
        if boxes and isinstance(boxes[0], (int, float)):
            boxes = [boxes]  # a single box written without the outer list
        item = context[i]
        seen = seen_sizes[i] if seen_sizes else None
        width, height = seen or item.image_size()
        sx, sy = model_scale(coordinates, (width, height))
        for box in boxes:
            if not (
                isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box)
            ):
                problems.append(f"image {number}: not a box [x0, y0, x1, y1]: {box!r}")
                continue
            x0, y0, x1, y1 = (float(v) for v in box)
            x0, y0, x1, y1 = x0 * sx, y0 * sy, x1 * sx, y1 * sy
            x0, x1 = max(0.0, min(x0, width)), max(0.0, min(x1, width))
            y0, y1 = max(0.0, min(y0, height)), max(0.0, min(y1, height))
            if x1 <= x0 or y1 <= y0:
                problems.append(f"image {number}: empty or inverted box {box!r}")
                continue
            if seen:  # back from the resized image to the image itself
                image_width, image_height = item.image_size()
                rx, ry = image_width / width, image_height / height
                x0, y0, x1, y1 = x0 * rx, y0 * ry, x1 * rx, y1 * ry
            cited.setdefault(i, []).append(item.to_page((x0, y0, x1, y1)))
    answer = " ".join(_BBOXES.sub(" ", text).split())
    return answer, cited, problems


def _tagged(pattern: re.Pattern, text: str, count: int, what: str, problems: list[str], first: int):
    """``(index, number, value)`` for each tag of ``pattern`` in ``text`` whose number is one of
    the ``count`` from ``first`` (index: its place from 0) and whose body is JSON; one line in
    ``problems`` for each other tag."""
    for match in pattern.finditer(text):
        number, body = int(match.group(1)), match.group(2)
        if not first <= number < first + count:
            given = f"{what}s {first} to {first + count - 1}" if count else f"no {what}s"
            problems.append(f"a tag for {what} {number}, but {given} were given")
            continue
        try:
            yield number - first, number, json.loads(body)
        except json.JSONDecodeError:
            problems.append(f"{what} {number}: not a JSON list: {body.strip()[:80]!r}")


def check_options(inputs: str, coordinates: str | None, max_images: int | None, number_from: int = 1) -> None:
    """The options every model reader takes, checked alike (``coordinates`` None: the model
    family's, told once the model is known)."""
    if inputs not in INPUTS:
        raise PagesightError(f"inputs must be one of {', '.join(INPUTS)}, got '{inputs}'")
    if coordinates is not None and coordinates not in COORDINATES:
        raise PagesightError(f"coordinates must be one of {', '.join(COORDINATES)}, got '{coordinates}'")
    if max_images is not None and max_images < 1:
        raise PagesightError(f"max_images must be 1 or more (or None for any number), got {max_images}")
    if number_from not in (0, 1):
        raise PagesightError(f"number_from must be 0 or 1, got {number_from!r}")


def label(item: ContextItem) -> str:
    """How a prompt names a tile: ``doc page P tile T``."""
    hit = item.hit
    return f"{hit.doc_id} page {hit.page} tile {hit.tile}"


def passages_prompt(question: str, context: Sequence[ContextItem], number_from: int = 1) -> str:
    """A text-only prompt: each tile's numbered lines as a labelled passage (the first numbered
    ``number_from``), then the question."""
    passages = [
        f"Passage {n}: {label(item)}\n{numbered_lines(item)}" for n, item in enumerate(context, number_from)
    ]
    return "\n\n".join([*passages, f"Question: {question}"])


def numbered_lines(item: ContextItem) -> str:
    """The item's printed lines as ``[k] text``, k from 1, the numbers ``<lines>`` citations use
    (``printed_lines``); the rows of each table among them (``text.tables.read_tables``) as a
    Markdown table in their place: a header row of the column headings, then a row each with the
    numbers of its lines, its label and its cells. A text-layer row is one line of figures whose
    headings sit lines above it (a spanning "Year ended December 31," over three years); read as a
    table, each figure stands under its year, and the numbers keep every row citable as the lines
    it was read from."""
    if not item.spans:
        return "(no text)"
    lines = printed_lines(item.spans)
    tables = _markdown_tables(item.spans, lines)
    found, taken = [], set()
    for k, (text, _) in enumerate(lines, 1):
        if k in tables:
            markdown, numbers = tables[k]
            found.append(markdown)
            taken |= numbers
        if k not in taken:
            found.append(f"[{k}] {text}")
    return "\n".join(found)


def printed_lines(spans: Sequence[Span]) -> list[tuple[str, list[int]]]:
    """The printed lines of ``spans`` (``records.printed_rows``: the text layer's pieces of one
    line joined again), each as its text and the indexes of its spans."""
    rows = printed_rows([s.box for s in spans], [s.source for s in spans])
    return [(" ".join(spans[i].text for i in row), list(row)) for row in rows]


def _markdown_tables(
    spans: Sequence[Span], lines: list[tuple[str, list[int]]]
) -> dict[int, tuple[str, set[int]]]:
    """Each table of ``spans`` as Markdown, by the number of its first line (of ``lines``), with
    the numbers of the lines its rows were read from (a row read by OCR is several lines, one a
    cell)."""
    numbers: dict[tuple, list[int]] = {}
    for k, (_, indexes) in enumerate(lines, 1):
        for i in indexes:
            numbers.setdefault(tuple(spans[i].box), []).append(k)
    found = {}
    for table in read_tables(list(spans)):
        width = len(table.columns)
        rows, taken = [], set()
        for cells, sources in zip(table.rows, table.sources):
            held = [numbers[box].pop(0) for line in sources for *_, box in line.parts if numbers.get(box)]
            held = list(dict.fromkeys(held))
            taken.update(held)
            figures = [""] * (width - len(cells)) + [cell.text for cell in cells]
            rows.append([f"[{', '.join(map(str, held))}]", cells[0].label, *figures])
        if taken:
            found[min(taken)] = (_markdown(["line", "", *_headings(table.columns)], rows), taken)
    return found


def _headings(columns: list[str]) -> list[str]:
    """Each column's nearest heading ("2023" of "Year ended December 31, / 2023"); none when every
    column has the same one (a line of several headings the text layer gave as one, over them all).
    The header lines stay numbered above the table, so nothing of them is lost."""
    nearest = [column.split(" / ")[-1] for column in columns]
    return [""] * len(nearest) if len(nearest) > 1 and len(set(nearest)) == 1 else nearest


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; a ``|`` in a cell escaped."""
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |" for line in lines)


def parse_lines(
    text: str, context: Sequence[ContextItem], number_from: int = 1, only: set[int] | None = None
) -> tuple[str, dict[int, list[Box]], dict[int, str], list[str]]:
    """Strip ``<lines passage="N">[k, ...]</lines>`` tags from ``text``; the cited lines' boxes.

    Returns the answer without the tags, the boxes of the cited lines per context index (0-based;
    passage ``number_from`` is the first; span boxes are already page pixels), their text per
    context index, and one problem line per tag or line number that was dropped. ``only``: the
    context indexes given as passages, when the others were images (``inputs="auto"``).
    """
    cited: dict[int, list[Box]] = {}
    quoted: dict[int, list[str]] = {}
    problems: list[str] = []
    for i, number, lines in _tagged(_LINES, text, len(context), "passage", problems, number_from):
        if only is not None and i not in only:
            problems.append(f"a tag for passage {number}, but {number} was given as an image: cite boxes")
            continue
        spans = context[i].spans
        printed = printed_lines(spans)
        for k in lines if isinstance(lines, list) else [lines]:
            if not (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= len(printed)):
                problems.append(f"passage {number}: no line {k!r} (it has {len(printed)})")
                continue
            line, indexes = printed[k - 1]
            cited.setdefault(i, []).append(union([tuple(spans[j].box) for j in indexes]))
            quoted.setdefault(i, []).append(line)
    answer = " ".join(_LINES.sub(" ", text).split())
    return answer, cited, {i: "\n".join(texts) for i, texts in quoted.items()}, problems


def answer_logprob(tokens: Sequence[tuple[str, float]], text: str) -> tuple[float, int]:
    """Sum of the log-probabilities of ``tokens`` (text, logprob) that are not inside citation tags
    or thinking (a token counts where its first non-space character is), and how many they are.

    When the tokens do not spell ``text`` (byte-level tokens some servers report), every token counts.
    """
    if "".join(token for token, _ in tokens) != text:
        return sum(logprob for _, logprob in tokens), len(tokens)
    skipped = [match.span() for match in _TAGS.finditer(text)] + thinking_spans(text)
    total, counted, offset = 0.0, 0, 0
    for token, logprob in tokens:
        begins = offset + len(token) - len(token.lstrip())  # " <bboxes" belongs to the tag
        if not any(start <= begins < end for start, end in skipped):
            total += logprob
            counted += 1
        offset += len(token)
    return total, counted


def parse_citations(
    text: str,
    context: Sequence[ContextItem],
    inputs: str,
    coordinates: str = "norm1000",
    seen_sizes: Sequence[tuple[int, int]] | None = None,
    number_from: int = 1,
) -> tuple[str, dict[int, list[Box]], dict[int, str], list[str]]:
    """The answer without its citation tags, the boxes cited per context index, the cited lines'
    text per context index and the problems, for a reader of ``inputs``: ``<lines>`` for passages,
    ``<bboxes>`` for images (``seen_sizes``: the size each image had as the model saw it, the
    images in order), both for ``"auto"``, whose tiles go as one or the other (``answer.inputs``)."""
    from pagesight.answer.inputs import text_items

    if inputs == "text":
        return parse_lines(text, context, number_from)
    texts = text_items(inputs, context)
    images = [i for i in range(len(context)) if i not in texts]
    seen: list[tuple[int, int] | None] | None = None
    if seen_sizes:
        seen = [None] * len(context)
        for i, size in zip(images, seen_sizes):
            seen[i] = size
    only = set(images) if inputs == "auto" else None
    text, cited, problems = parse_bboxes(text, context, coordinates, seen, number_from, only)
    if inputs != "auto":
        return text, cited, {}, problems
    text, lined, quotes, more = parse_lines(text, context, number_from, texts)
    return text, {**cited, **lined}, quotes, problems + more


def passage(item: ContextItem, number: int) -> str:
    """A tile given as text: ``Passage N: <label>`` and its numbered lines."""
    return f"Passage {number}: {label(item)}\n{numbered_lines(item)}"


_HIDDEN = ("bboxes", "lines", "think")
_OPENING = re.compile(r"<(bboxes|lines|think)\b[^>]*>", re.IGNORECASE)


class VisibleText:
    """An answer's text as a reader writes it, less what the answer leaves out: its citation tags
    (``<bboxes ...>...</bboxes>``, ``<lines ...>...</lines>``) and its thinking (``<think>...
    </think>``, and a closing tag alone). ``feed`` takes each new piece and returns the text now
    known to be shown (a ``<`` that may open a tag is held back until it is known); ``end``
    returns what is left. The answer itself is parsed from the whole text, spaces put in order."""

    def __init__(self) -> None:
        self.buffer = ""
        self.closing: str | None = None  # the closing tag of the hidden part being written

    def feed(self, piece: str) -> str:
        self.buffer += piece
        shown: list[str] = []
        while self.buffer:
            if self.closing is not None:
                end = self.buffer.lower().find(self.closing)
                if end < 0:
                    self.buffer = self.buffer[-(len(self.closing) - 1) :]  # may begin the closing tag
                    break
                self.buffer, self.closing = self.buffer[end + len(self.closing) :], None
                continue
            start = self.buffer.find("<")
            if start < 0:
                shown.append(self.buffer)
                self.buffer = ""
                break
            shown.append(self.buffer[:start])
            self.buffer = self.buffer[start:]
            opening = _OPENING.match(self.buffer)
            if opening:
                self.closing = f"</{opening.group(1).lower()}>"
                self.buffer = self.buffer[opening.end() :]
            elif self.buffer.lower().startswith("</think>"):
                self.buffer = self.buffer[len("</think>") :]
            elif self._may_open():
                break
            else:
                shown.append("<")
                self.buffer = self.buffer[1:]
        return "".join(shown)

    def end(self) -> str:
        """The text held back, unless it is a hidden part left open."""
        rest = "" if self.closing is not None else self.buffer
        self.buffer, self.closing = "", None
        return rest

    def _may_open(self) -> bool:
        """Whether the buffer, which starts with ``<``, may still become a hidden tag."""
        start = self.buffer.lower()
        for name in _HIDDEN:
            tag = f"<{name}"
            if tag.startswith(start) or (start.startswith(tag) and ">" not in start):
                return True
        return "</think>".startswith(start)
