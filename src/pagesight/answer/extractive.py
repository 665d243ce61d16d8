"""The offline default reader: the answer is a sentence or a table cell of the retrieved tiles, with
its boxes.

No generative model is needed. The lines of each retrieved tile are grouped into blocks (lines that
follow each other closely; a short line without closing punctuation, such as a heading, ends its
block) and each block is split into sentences. Lines that are table rows (two or more numbers) are
kept apart and read with their table's header line: when the question names one of the header's
columns, the answer is that row's cell. Each candidate scores by

- how much of the question it covers, each question term weighted by its rarity among the
  candidates (a term every line has says nothing),
- its MiniLM similarity to the question, for the best candidates by coverage (when the ``dense``
  extra is installed),
- whether it holds the kind of answer the question asks for: a number for "how many" or "what
  value", a date or year for "when", a name for "who" or "which", that the question itself does
  not contain,
- how well its tile was ranked by retrieval,

and a candidate that only repeats the question (a heading, the question's own words) is set back.
The answer is cited with the boxes of the lines it came from, cut to the sentence's part of a line
in proportion to its characters.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pagesight.answer.base import ContextItem, Reading
from pagesight.encode.lexical import terms
from pagesight.errors import PagesightError
from pagesight.records import Box, Span

_WORD = re.compile(r"(?u)\w+")
_NUMBER = re.compile(r"\d")
_NUMBER_WORDS = frozenset(
    [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "sixty",
        "seventy",
        "eighty",
        "ninety",
        "hundred",
        "thousand",
        "million",
        "billion",
        "dozen",
        "half",
        "percent",
    ]
)
_YEAR = re.compile(r"\b(1[5-9]|20)\d\d\b")
_NUMERIC = re.compile(r"[-+(]?[$€£]?\d[\d,.]*%?\)?")
_SENTENCE = re.compile(r"\S.*?(?:[.!?](?=\s+[\"'(\[]?[A-Z0-9])|$)", re.DOTALL)
_MONTHS = re.compile(
    r"\b(jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sep(tember)?|oct(ober)?"
    r"|nov(ember)?|dec(ember)?)\b",
    re.IGNORECASE,
)
_QUANTITY = re.compile(
    r"^\s*(how (many|much|large|long|big|far|often|old|tall|wide|high|fast|heavy)|by how much"
    r"|what (is the |was the |are the |were the )?(number|amount|value|percentage|share|rate|size|total|"
    r"count|price|cost|ratio|proportion|fraction|score|accuracy|dimension|resolution)"
    r"|at what (resolution|rate|size|speed|temperature|price|cost))",
    re.IGNORECASE,
)
_MEASURE = re.compile(
    r"\b(revenue|sales|income|profit|loss|cost|price|budget|spend|salary|wage|fee|tax|margin|growth|"
    r"temperature|weight|height|length|width|depth|distance|duration|speed|latency|throughput|"
    r"population|headcount|percentage|percent|share|rate|ratio|score|accuracy|recall|precision|count|"
    r"number|amount|total)s?\b",
    re.IGNORECASE,
)
_TIME = re.compile(r"^\s*(when|in what year|what year|which year|what date|on what date)\b", re.IGNORECASE)
_PLACE = re.compile(
    r"^\s*(where|from where|in (what|which) (city|country|town|region|place|state))\b"
    r"|\b(which|what) (city|country|town|region|place|state)\b",
    re.IGNORECASE,
)
_LOCATIVE = re.compile(r"\b(?:in|at|near|from|to)\s+([A-Z]\w+)")
_PERSON = re.compile(r"^\s*(who|whom|whose)\b", re.IGNORECASE)
_PERSON_NAME = re.compile(r"\b[A-Z][a-z]+\s+[A-Z][a-z]+")
_NAME = re.compile(r"^\s*(which|what (company|supplier|organi[sz]ation|team|model|product))\b", re.IGNORECASE)

WEIGHTS = {"coverage": 0.5, "dense": 0.35, "kind": 0.15, "rank": 0.1}


@dataclass
class _Candidate:
    item: int  # index of the context item
    text: str  # what is scored against the question
    answer: str  # what is returned
    boxes: list[Box]
    header: str | None = None  # a table row's header line


class ExtractiveReader:
    """Picks the answer-bearing line from the retrieved tiles' text (text layer or OCR)."""

    name = "extractive"
    inputs = "text"
    max_images = None

    def __init__(self, dense: bool | None = None, dense_pool: int = 24, dense_model: str = "minilm-l6-v2"):
        """``dense``: rank the best candidates with MiniLM too (None: when the extra is installed)."""
        self.dense_pool = dense_pool
        self._model = None
        if dense is not False:
            from pagesight.encode.dense import dense_model as load

            try:
                self._model = load(dense_model)
            except PagesightError:
                if dense:
                    raise

    def read(self, question: str, context: Sequence[ContextItem]) -> Reading:
        candidates = _candidates(context)
        if not candidates or not question.strip():
            return Reading(text="", usage={"candidates": 0})
        scores = self.score(question, candidates, len(context))
        best = candidates[int(np.argmax(scores))]
        question_words = {w.lower() for w in _WORD.findall(question)}
        cell = _cell(best, set(terms(question)), question_words)
        return Reading(
            text=cell or best.answer,
            cited={best.item: best.boxes},
            quotes={best.item: best.text},
            usage={"candidates": len(candidates)},
        )

    def score(self, question: str, candidates: list[_Candidate], n_items: int) -> np.ndarray:
        """One score per candidate; the highest is the answer."""
        question_terms = set(terms(question))
        candidate_terms = [set(terms(c.text)) for c in candidates]
        # rarity among the candidates, so a word in every sentence of the tiles weighs little
        df = Counter(t for ts in candidate_terms for t in ts)
        idf = {t: math.log(1 + len(candidates) / (1 + df[t])) for t in question_terms}
        total = sum(idf.values()) or 1.0
        coverage = np.array([sum(idf[t] for t in question_terms & ts) / total for ts in candidate_terms])

        asked = _kind(question)
        question_words = {w.lower() for w in _WORD.findall(question)}
        kind = np.array([_has_kind(c.answer, asked, question_words) for c in candidates], dtype=float)
        novel = np.array([_novel_words(c.answer, question_words) for c in candidates], dtype=float)
        rank = np.array([1.0 - c.item / max(n_items, 1) for c in candidates])

        dense = np.zeros(len(candidates))
        if self._model is not None:
            pool = np.argsort(-(coverage + WEIGHTS["kind"] * kind), kind="stable")[: self.dense_pool]
            vectors = self._model.encode([question] + [candidates[i].text for i in pool])
            dense[pool] = vectors[1:] @ vectors[0]
        score = (
            WEIGHTS["coverage"] * coverage
            + WEIGHTS["dense"] * dense
            + WEIGHTS["kind"] * kind
            + WEIGHTS["rank"] * rank
        )
        score[novel == 0] *= 0.3  # says nothing the question does not already say
        return score


def _candidates(context: Sequence[ContextItem]) -> list[_Candidate]:
    """The sentences of each tile's text blocks, and its table rows read with their header."""
    found = []
    for i, item in enumerate(context):
        spans = [span for span in item.spans if span.text.strip()]
        if not spans:
            continue
        widest = max(span.box[2] - span.box[0] for span in spans)
        rows = [_is_row(span.text) for span in spans]
        block: list[Span] = []
        for j, span in enumerate(spans):
            if rows[j] or (j + 1 < len(spans) and rows[j + 1]):
                found += _sentences(i, block)  # a row, or the header line right above a table
                block = []
                continue
            if block and not _adjacent(block[-1].box, span.box):
                found += _sentences(i, block)
                block = []
            block.append(span)
            if _ends_block(span, widest):
                found += _sentences(i, block)
                block = []
        found += _sentences(i, block)
        found += _table_rows(i, spans, rows)
    return found


def _sentences(item: int, lines: list[Span]) -> list[_Candidate]:
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
        boxes = []
        for line, start in zip(lines, starts):
            length = len(line.text.strip())
            lo, hi = max(begin, start), min(end, start + length)
            if hi <= lo:
                continue
            x0, y0, x1, y1 = line.box
            width = x1 - x0
            boxes.append((x0 + width * (lo - start) / length, y0, x0 + width * (hi - start) / length, y1))
        sentence = match.group().strip()
        found.append(_Candidate(item, sentence, sentence, boxes))
    return found


def _table_rows(item: int, spans: list[Span], rows: list[bool]) -> list[_Candidate]:
    """Each table row, scored with its header; its answer is the cell of the column asked about."""
    found = []
    for j, span in enumerate(spans):
        if not rows[j]:
            continue
        top = j
        while top > 0 and rows[top - 1]:
            top -= 1
        header = spans[top - 1] if top > 0 and _adjacent(spans[top - 1].box, spans[top].box) else None
        if header is None and _is_year_header(spans[top].text) and top < j:
            header = spans[top]
        first = top - 1 if header is not None and top > 0 and header is spans[top - 1] else top
        caption = spans[first - 1].text if first > 0 and not rows[first - 1] else ""
        text = " ".join(t for t in (caption, header.text if header else "", span.text) if t)
        found.append(
            _Candidate(item, text, span.text.strip(), [tuple(span.box)], header.text if header else None)
        )
    return found


def _cell(candidate: _Candidate, question_terms: set[str], question_words: set[str]) -> str | None:
    """The row's cell under the one header column the question names, if it names exactly one."""
    header = candidate.header
    if not header:
        return None
    cells = candidate.answer.split()
    numeric = 0
    while numeric < len(cells) and _is_number(cells[len(cells) - 1 - numeric]):
        numeric += 1
    columns = header.split()[-numeric:] if numeric else []
    if len(columns) < numeric:
        return None
    named = [
        c
        for c, name in enumerate(columns)
        if name.lower() in question_words or set(terms(name)) & question_terms
    ]
    if len(named) != 1:
        return None
    return cells[len(cells) - numeric + named[0]]


def _is_number(token: str) -> bool:
    return bool(_NUMERIC.fullmatch(token))


def _is_row(text: str) -> bool:
    """A line of a table: two or more numbers making up much of it, and not a sentence."""
    tokens = text.split()
    numbers = sum(_is_number(t) for t in tokens)
    return numbers >= 2 and numbers >= 0.4 * len(tokens) and not text.rstrip().endswith(".")


def _is_year_header(text: str) -> bool:
    numbers = [t for t in text.split() if _is_number(t)]
    return bool(numbers) and all(_YEAR.fullmatch(t) for t in numbers)


def _ends_block(span: Span, widest: float) -> bool:
    """A short line without closing punctuation (a heading, a label) stands alone."""
    short = span.box[2] - span.box[0] < 0.6 * widest
    return short and not span.text.rstrip().endswith((".", ",", ";", ":", "-"))


def _adjacent(a: Box, b: Box) -> bool:
    """``b`` is the next line of the same block: just below ``a`` and overlapping it horizontally."""
    height = max(a[3] - a[1], 1.0)
    gap = b[1] - a[3]
    overlap = min(a[2], b[2]) - max(a[0], b[0])
    return -0.5 * height <= gap <= 1.8 * height and overlap > 0


def _kind(question: str) -> str | None:
    if _TIME.search(question):
        return "time"
    if _QUANTITY.search(question) or _MEASURE.search(question):
        return "quantity"
    if _PLACE.search(question):
        return "place"
    if _PERSON.search(question):
        return "person"
    if _NAME.search(question):
        return "name"
    return None


def _has_kind(text: str, kind: str | None, question_words: set[str]) -> float:
    """1 when ``text`` holds, beyond the question's own words, the kind of answer asked for."""
    if kind is None:
        return 0.0
    words = [w for w in _WORD.findall(text) if w.lower() not in question_words]
    if kind == "quantity":  # a bare year is seldom the quantity asked for
        amounts = [w for w in words if _NUMBER.search(w) or w.lower() in _NUMBER_WORDS]
        return 0.0 if not amounts else 0.5 if all(_YEAR.fullmatch(w) for w in amounts) else 1.0
    if kind == "time":
        rest = " ".join(words)
        return float(bool(_YEAR.search(rest) or _MONTHS.search(rest)))
    if kind == "place":
        return float(any(m.lower() not in question_words for m in _LOCATIVE.findall(text)))
    if kind == "person":
        return float(any(not set(m.lower().split()) & question_words for m in _PERSON_NAME.findall(text)))
    return float(any(w[:1].isupper() for w in words))


def _novel_words(text: str, question_words: set[str]) -> int:
    return sum(
        1 for w in _WORD.findall(text.lower()) if w not in question_words and (len(w) > 1 or w.isdigit())
    )
