"""The offline default reader: the answer is a sentence, a labelled value or a table cell of the
retrieved tiles, with its boxes.

No generative model is needed. Each tile's text lines are read first as a layout: lines on one row
that the OCR or the web page gave apart (a receipt's "TOTAL" and its "$48.66") are joined; runs of
lines that line up as a table (numbers in columns, or rows that start at one edge with an even
pitch) are kept apart and read with their header line; the other lines are grouped into blocks
(lines that follow each other closely; a short line without closing punctuation, such as a
heading, ends its block) and each block is split into sentences. Values are paired with the labels
that name them: "Label: value", a label followed by numbers on its row ("VAT 7%  1.68"), and a short
label line above a large figure ("Q4 Net Sales" over "$3.2 Billion"). Each candidate scores by

- how much of the question it covers, each question term weighted by its rarity among the
  candidates (a term every line has says nothing); a line is read in its document's context, so
  the words of the document's name and title count for each of its lines (a page header does not
  win by repeating them), and a table header's words count for its rows at a discount,
- its MiniLM similarity to the question, for the best candidates by the other signals (when the
  ``dense`` extra is installed),
- whether it holds the kind of answer the question asks for, beyond the question's own words: an
  amount for "how much" or "what was the total" (a percentage is a rate, not an amount), a
  percentage for a rate, a date or year for "when", a name for "who" or "which",
- whether a label names what the question asks about (its terms, or the kind: "Date:" for "when"),
  and then its value is what is returned, narrowed to the number of the kind asked for,
- for "what does X do" and "what is X", whether X is the sentence's subject (it opens it),
- how well its tile was ranked by retrieval,

and a candidate is set back when it only repeats the question (a heading, the question's own
words), when it is a quotation and the question asks for a figure or a date, or when it names a
year other than the one the question asks about. The answer is cited with the boxes of the lines
it came from, cut to the sentence's part of a line in proportion to its characters.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

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
_NUMERIC = re.compile(r"[-+(]?[$€£¥]?\d[\d,.]*%?\)?")
_AMOUNT = re.compile(r"[$€£¥]?\d[\d,]*(?:\.\d+)?(?:\s?%|\s?percent\b|\s?per cent\b)?", re.IGNORECASE)
_SENTENCE = re.compile(r"\S.*?(?:[.!?](?=\s+[\"'(\[“‘]?[A-Z0-9])|$)", re.DOTALL)
_MONTHS = re.compile(
    r"\b(jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sep(tember)?|oct(ober)?"
    r"|nov(ember)?|dec(ember)?)\b",
    re.IGNORECASE,
)
_DATE = re.compile(r"\b\d{1,4}[/.-]\d{1,2}[/.-]\d{2,4}\b")
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
    r"number|amount|total|subtotal|vat|earnings|expenditures?|dividend)s?\b",
    re.IGNORECASE,
)
# a quantity question that wants a proportion ("what VAT rate"), not an amount ("how much VAT")
_RATE = re.compile(
    r"\b(rate|percentage|percent|proportion|ratio|share|interest|margin|yield)\b", re.IGNORECASE
)
_TIME = re.compile(r"^\s*(when|in what year|what year|which year|what date|on what date)\b", re.IGNORECASE)
_PLACE = re.compile(
    r"^\s*(where|from where|in (what|which) (city|country|town|region|place|state))\b"
    r"|\b(which|what) (city|country|town|region|place|state)\b",
    re.IGNORECASE,
)
_LOCATIVE = re.compile(r"\b(?:in|at|near|from|to)\s+([A-Z]\w+)")
_PERSON = re.compile(r"^\s*(who|whom|whose)\b", re.IGNORECASE)
_PERSON_NAME = re.compile(r"\b[A-Z][a-z]+\s+(?:&\s+)?[A-Z][a-z]+")
_NAME = re.compile(r"^\s*(which|what (company|supplier|organi[sz]ation|team|model|product))\b", re.IGNORECASE)
# "what does X do", "what is X", "when does X run": X, the subject the answer should be about
_SUBJECT = re.compile(
    r"^\s*(?:what|when|how|why)\s+(?:does|do|did|is|are|was|were)\s+(.+?)(?:\s+(?:do|does|mean|means|run|"
    r"happen|work|return|contain|stand for))?\s*\??\s*$",
    re.IGNORECASE,
)
_HEAD_END = re.compile(r"\s+(?:of|in|on|for|from|with|at|to|when|if|that|which)\s+.*$", re.IGNORECASE)
# words of a question that only say it is a question
_ASKING = frozenset(
    terms("how much many what which who whom whose when where why were was did does do is are has have had")
)
# what a question's words ask about, in the words a label would use
_ATTRIBUTES = {
    "weigh": "weight",
    "heavi": "weight",
    "long": "length",
    "tall": "height",
    "high": "height",
    "wide": "width",
    "deep": "depth",
    "far": "distanc",
    "old": "age",
    "big": "size",
    "larg": "size",
    "cost": "price",
    "price": "cost",
}
_KIND_LABELS = {  # labels that announce a value of the kind asked for (stems)
    "time": ("date", "time", "day", "year"),
    "person": ("name", "author", "contact", "sign"),
    "place": ("place", "locat", "address", "venu"),
}
_ORDINAL_QUARTERS = {"first": "q1", "second": "q2", "third": "q3", "fourth": "q4"}
_QUARTER = re.compile(r"\b(first|second|third|fourth) quarter\b|\bq([1-4])\b", re.IGNORECASE)
_QUOTE = re.compile(r"[“”„]|(^|\s)\"\S|\S\"(\s|$)|\b(said|says)\s+[A-Z]")
_ENUMERATION = re.compile(r"^(\d+(\.\d+)*\.?|[ivxlc]+\.|\(?[a-z0-9]\))$", re.IGNORECASE)
_COLON_LABEL = re.compile(r"^([^:\d][^:]{0,40}?):\s+(\S.*)$")

WEIGHTS = {"coverage": 0.5, "dense": 0.35, "kind": 0.15, "rank": 0.1, "label": 0.3, "subject": 0.25}
HEADER_WEIGHT = 0.6  # a term found only in a table row's header counts this much


@dataclass
class _Line:
    """A line of a tile: one span, or spans on one row joined; ``parts`` maps characters to boxes."""

    text: str
    box: Box
    parts: list[tuple[int, int, Box]]


@dataclass
class _Candidate:
    item: int  # index of the context item
    text: str  # what is scored against the question
    answer: str  # what is returned
    boxes: list[Box]
    header: str | None = None  # a table row's header line
    label: str | None = None  # the words that name a value ("Total due", "Weight")
    value: str | None = None  # the value they name
    own: str = ""  # the candidate's own words (``text`` less the header and caption of a row)
    quote: bool = False  # a quotation
    extra: set[str] = field(default_factory=set)  # terms of the document's name and title
    title: str = ""  # the page's title, which a short candidate is embedded with


class ExtractiveReader:
    """Picks the answer-bearing line from the retrieved tiles' text (text layer or OCR)."""

    name = "extractive"
    inputs = "text"
    max_images = None

    def __init__(self, dense: bool | None = None, dense_pool: int = 8, dense_model: str = "minilm-l6-v2"):
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
        return Reading(
            text=_answer(best, question),
            cited={best.item: best.boxes},
            quotes={best.item: best.text},
            usage={"candidates": len(candidates)},
        )

    def score(self, question: str, candidates: list[_Candidate], n_items: int) -> np.ndarray:
        """One score per candidate; the highest is the answer."""
        features = self.features(question, candidates, n_items)
        score = sum(WEIGHTS[name] * features[name] for name in WEIGHTS)
        return score * features["penalty"]

    def features(self, question: str, candidates: list[_Candidate], n_items: int) -> dict[str, np.ndarray]:
        """Each signal per candidate (``WEIGHTS`` names them), and the factor setting some back."""
        asked = _kind(question)
        question_terms = set(terms(question)) - _ASKING or set(terms(question))
        expansions = _expansions(question, asked) - question_terms
        own_terms = [set(terms(c.own or c.text)) for c in candidates]
        header_terms = [
            set(terms(c.text)) - own if c.header else set() for c, own in zip(candidates, own_terms)
        ]
        # rarity among the candidates, so a word in every sentence of the tiles weighs little
        df = Counter(t for own, head in zip(own_terms, header_terms) for t in own | head)
        idf = {t: math.log(1 + len(candidates) / (1 + df[t])) for t in question_terms | expansions}
        total = sum(idf[t] for t in question_terms) or 1.0

        def covered(own: set[str], head: set[str], extra: set[str]) -> float:
            found = sum(idf[t] for t in question_terms if t in own or t in extra)
            found += HEADER_WEIGHT * sum(idf[t] for t in question_terms if t in head and t not in own | extra)
            found += 0.5 * sum(idf[t] for t in expansions if t in own)
            return min(found / total, 1.0)

        f = {
            "coverage": np.array(
                [covered(o, h, c.extra) for c, o, h in zip(candidates, own_terms, header_terms)]
            )
        }
        question_words = {w.lower() for w in _WORD.findall(question)}
        rate = (
            asked == "quantity"
            and bool(_RATE.search(question))
            and not question.lower().startswith("how much")
        )
        f["kind"] = np.array(
            [_has_kind(c.value or c.answer, asked, question_words, rate) for c in candidates], dtype=float
        )
        label = np.array(
            [_label_match(c, question_terms | expansions, idf, total, asked) for c in candidates], dtype=float
        )
        f["label"] = label * np.maximum(f["kind"], asked is None)
        subject = _subject_terms(question) if asked != "quantity" else []
        f["subject"] = np.array([_opens_with(c.own or c.text, subject) for c in candidates], dtype=float)
        f["rank"] = np.array([1.0 - c.item / max(n_items, 1) for c in candidates])
        penalty = np.ones(len(candidates))
        novel = np.array([_novel_words(c.own or c.answer, question_words) for c in candidates])
        penalty[novel == 0] *= 0.3  # says nothing the question does not already say
        if asked in ("quantity", "time"):  # a figure or a date is stated, not quoted
            penalty[np.array([c.quote for c in candidates])] *= 0.7
        years = set(_YEAR_TOKEN.findall(question))
        if years:  # about another year than the one asked for
            penalty[np.array([_other_years(c.text, years) for c in candidates])] *= 0.7

        f["dense"] = np.zeros(len(candidates))
        if self._model is not None:
            # MiniLM settles what the other signals leave close: it reads the best candidate and
            # those that its full weight could lift above it
            partial = sum(WEIGHTS[name] * f[name] for name in WEIGHTS if name != "dense") * penalty
            order = np.argsort(-partial, kind="stable")
            reach = partial + WEIGHTS["dense"] * penalty >= partial[order[0]]
            pool = [i for i in order[: self.dense_pool] if reach[i]]
            if len(pool) > 1:
                vectors = self._model.encode_queries([question] + [_dense_text(candidates[i]) for i in pool])
                f["dense"][pool] = vectors[1:] @ vectors[0]
        f["penalty"] = penalty
        return f


def _dense_text(c: _Candidate) -> str:
    """What MiniLM reads of a candidate: a short one (a label and its value) with its page's title."""
    words = c.text.split()
    if len(words) <= 8 and c.title and c.title != c.text:
        return f"{c.title}: {c.text}"
    return " ".join(words[:48])


_YEAR_TOKEN = re.compile(r"\b(?:1[5-9]|20)\d\d\b")


def _other_years(text: str, years: set[str]) -> bool:
    """The text names years, none of them one the question asks about."""
    found = set(_YEAR_TOKEN.findall(text))
    return bool(found) and not found & years


def _expansions(question: str, asked: str | None) -> set[str]:
    """Terms a label would use for what the question asks: "how heavy" -> weight, Q4 <-> fourth
    quarter, "when" -> date."""
    found = set()
    for t in terms(question):
        if t in _ATTRIBUTES:
            found.add(_ATTRIBUTES[t])
    for match in _QUARTER.finditer(question):
        if match.group(1):
            found.add(_ORDINAL_QUARTERS[match.group(1).lower()])
        else:
            ordinal = next(k for k, v in _ORDINAL_QUARTERS.items() if v == f"q{match.group(2)}")
            found |= {ordinal, "quarter"}
    found.update(_KIND_LABELS.get(asked or "", ()))
    return found


def _label_match(
    c: _Candidate, wanted: set[str], idf: dict[str, float], total: float, asked: str | None
) -> float:
    """How much of the question a candidate's label names (1 when it names a kind asked for)."""
    if not c.label:
        return 0.0
    label = set(terms(c.label))
    share = sum(idf.get(t, 0.0) for t in wanted & label) / total
    if _names_kind(label, asked):
        share += 0.5
    return min(share, 1.0)


def _names_kind(label: set[str], asked: str | None) -> bool:
    """The label announces a value of the kind asked for ("Date" for "when")."""
    return asked in _KIND_LABELS and any(t.startswith(_KIND_LABELS[asked]) for t in label)


def _subject_terms(question: str) -> list[str]:
    """The head of X in "what does X do", "what is X": the terms the answer should open with."""
    match = _SUBJECT.match(question)
    if not match:
        return []
    head = _HEAD_END.sub("", match.group(1))
    return terms(head)


def _opens_with(text: str, subject: list[str]) -> bool:
    """``text`` opens with the subject (after an article or a section number at most)."""
    if not subject:
        return False
    words = text.split()[: len(subject) + 3]
    if words and _ENUMERATION.match(words[0]):
        words = words[1:]
    start = terms(" ".join(words[: len(subject) + 1]))
    return set(subject) <= set(start)


def _answer(c: _Candidate, question: str) -> str:
    """What to return: a table's cell, a label's value (the number of the kind asked for), or the
    candidate's text."""
    question_words = {w.lower() for w in _WORD.findall(question)}
    cell = _cell(c, set(terms(question)), question_words)
    if cell:
        return cell
    if not c.value or not c.label:
        return c.answer
    asked = _kind(question)
    label = set(terms(c.label))
    if not label & (set(terms(question)) | _expansions(question, asked)) and not _names_kind(label, asked):
        return c.answer  # the label names something else: the whole line is the answer
    value = c.value.strip().rstrip(".;,")
    if asked == "quantity":
        rate = bool(_RATE.search(question)) and not question.lower().startswith("how much")
        amounts = [m.group().strip() for m in _AMOUNT.finditer(value)]
        fitting = [a for a in amounts if _is_rate(a) == rate]
        if not fitting and amounts:
            return c.answer
        if len(amounts) > 1:
            if all(_is_number(t) for t in value.split()):
                return fitting[-1]  # figures on a row: the amount is the last ("VAT 7%  1.68")
            return c.answer  # several amounts among words: which one is meant needs the words
    return value if len(value.split()) <= 8 else c.answer


def _is_rate(amount: str) -> bool:
    return amount.endswith("%") or amount.lower().endswith("cent")


def _candidates(context: Sequence[ContextItem]) -> list[_Candidate]:
    """The sentences of each tile's text blocks, its labelled values, and its table rows read with
    their header."""
    found = []
    for i, item in enumerate(context):
        lines = _lines(item.spans)
        if not lines:
            continue
        extra = _context_terms(item, lines)
        title = lines[0].text if item.hit.tile == 0 else ""
        widest = max(line.box[2] - line.box[0] for line in lines)
        rows = _rows(lines, widest)
        first = len(found)
        block: list[_Line] = []
        for j, line in enumerate(lines):
            if rows[j] or (j + 1 < len(lines) and _is_row(lines[j + 1].text) and _is_header(line.text)):
                found += _sentences(i, block)  # a row, or the header line right above figures
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
        found += _table_rows(i, lines, rows)
        found += _figures(i, lines, rows)
        for c in found[first:]:
            c.extra, c.title = extra, title
            c.own = c.own or c.text
            c.quote = bool(_QUOTE.search(c.own))
            if c.label is None and c.header is None:  # a row under a header has columns instead
                c.label, c.value = _label_value(c.own)
    return found


def _context_terms(item: ContextItem, lines: list[_Line]) -> set[str]:
    """The words every line of a tile is read with: its document's name and its page's title."""
    found = set(terms(item.hit.doc_id.replace("-", " ").replace("_", " ")))
    if item.hit.tile == 0:
        found |= set(terms(lines[0].text))
    return found


def _lines(spans: list[Span]) -> list[_Line]:
    """The tile's lines; short spans on one row (a label and its value, table cells read by OCR)
    are joined into one line, left to right."""
    lines: list[_Line] = []
    for span in _left_to_right(spans):
        text = span.text.strip()
        if not text:
            continue
        box = tuple(span.box)
        if lines:
            last = lines[-1]
            previous = last.text[last.parts[-1][0] :]
            if (
                _same_row(last.parts[-1][2], box)
                and box[0] >= last.parts[-1][2][2] - 2
                and len(previous.split()) <= 6
                and len(text.split()) <= 6
            ):
                start = len(last.text) + 1
                last.text = f"{last.text} {text}"
                last.parts.append((start, start + len(text), box))
                x0, y0, x1, y1 = last.box
                last.box = (min(x0, box[0]), min(y0, box[1]), max(x1, box[2]), max(y1, box[3]))
                continue
        lines.append(_Line(text, box, [(0, len(text), box)]))
    return lines


def _left_to_right(spans: list[Span]) -> list[Span]:
    """The spans with each run of consecutive spans on one row put left to right: OCR gives a
    row's amount before its label when the amount's box starts a pixel higher."""
    ordered: list[Span] = []
    row: list[Span] = []
    for span in spans:
        if row and not _same_row(row[0].box, span.box):
            ordered += sorted(row, key=lambda s: s.box[0])
            row = []
        row.append(span)
    return ordered + sorted(row, key=lambda s: s.box[0])


def _same_row(a: Box, b: Box) -> bool:
    overlap = min(a[3], b[3]) - max(a[1], b[1])
    return overlap >= 0.5 * min(a[3] - a[1], b[3] - b[1])


def _rows(lines: list[_Line], widest: float) -> list[bool]:
    """Which lines are table rows: two or more numbers making up much of the line, or a run of at
    least three short lines that start at one left edge, one below the other at an even pitch,
    none of them part of a sentence."""
    rows = [_is_row(line.text) for line in lines]
    j = 0
    while j < len(lines):
        end = j + 1
        while end < len(lines) and _row_like(lines[end]) and _in_run(lines[end - 1], lines[end], lines[j]):
            end += 1
        run = lines[j:end] if _row_like(lines[j]) else []
        if len(run) >= 3 and sum(line.box[2] - line.box[0] >= 0.9 * widest for line in run) < len(run) / 2:
            pitches = [b.box[1] - a.box[1] for a, b in zip(run, run[1:])]
            middle = sorted(pitches)[len(pitches) // 2]
            if all(0.7 * middle <= p <= 1.4 * middle for p in pitches):
                start = j + 1 if _is_header(run[0].text) else j  # the header reads its rows
                for r in range(start, end):
                    rows[r] = True
                j = end
                continue
        j += 1  # a run that fails may hold one that starts lower (below a heading)
    return rows


def _row_like(line: _Line) -> bool:
    text = line.text.rstrip()
    return (
        not text[:1].islower()
        and not text.endswith((".", "!", "?", ",", ";", ":", "-"))
        and len(text.split()) <= 12
        and not _COLON_LABEL.match(text)
    )


def _in_run(above: _Line, below: _Line, first: _Line) -> bool:
    height = max(first.box[3] - first.box[1], 1.0)
    return _adjacent(above.box, below.box) and abs(below.box[0] - first.box[0]) <= 0.5 * height


def _is_header(text: str) -> bool:
    """A table's header line: words ("Q1", "FY22" too), or years over their columns; no other numbers."""
    numbers = [t for t in text.split() if _is_number(t)]
    return all(_YEAR.fullmatch(t.strip("()")) for t in numbers)


def _label_value(text: str) -> tuple[str | None, str | None]:
    """ "Label: value", or a label followed by the numbers on its row ("TOTAL 25.68")."""
    match = _COLON_LABEL.match(text)
    if match and len(match.group(1).split()) <= 5:
        return match.group(1), match.group(2)
    tokens = text.split()
    if len(tokens) > 8 or text.rstrip().endswith((".", "!", "?")):  # a sentence, not a label
        return None, None
    n = 0
    while n < len(tokens) and _is_number(tokens[len(tokens) - 1 - n]):
        n += 1
    if 0 < n <= 2 and n < len(tokens) and not _NUMBER.search(tokens[0]):  # more values: a table row
        return " ".join(tokens[: len(tokens) - n]), " ".join(tokens[len(tokens) - n :])
    return None, None


def _stands_alone(text: str) -> bool:
    """A label with its value on one line ("TOTAL 25.68", "Weight: 1.2 kg") is a block of its own."""
    return not text[:1].islower() and len(text.split()) <= 8 and _label_value(text)[0] is not None


def _figures(item: int, lines: list[_Line], rows: list[bool]) -> list[_Candidate]:
    """A short label line over a figure ("Q4 Net Sales" above "$3.2 Billion"), read as one."""
    found = []
    for j in range(1, len(lines)):
        label, value = lines[j - 1], lines[j]
        if rows[j] or rows[j - 1] or not _is_figure(value.text) or _is_figure(label.text):
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
            _Candidate(
                item,
                f"{label.text} {value.text}",
                value.text,
                [p[2] for p in label.parts] + [p[2] for p in value.parts],
                label=label.text,
                value=value.text,
            )
        )
    return found


def _is_figure(text: str) -> bool:
    """A figure standing alone: a number with at most a currency and a unit ("$3.2 Billion")."""
    tokens = text.split()
    return (
        0 < len(tokens) <= 3
        and _is_number(tokens[0])
        and not (tokens[0].endswith(".") and len(tokens) > 1)  # "1. Finance" is a heading
        and not _DATE.search(text)
    )


def _sentences(item: int, lines: list[_Line]) -> list[_Candidate]:
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
            for part_start, part_end, box in line.parts:
                lo, hi = max(begin, start + part_start), min(end, start + part_end)
                if hi <= lo:
                    continue
                length = part_end - part_start
                x0, y0, x1, y1 = box
                width = x1 - x0
                offset = start + part_start
                boxes.append(
                    (x0 + width * (lo - offset) / length, y0, x0 + width * (hi - offset) / length, y1)
                )
        sentence = match.group().strip()
        found.append(_Candidate(item, sentence, sentence, boxes))
    return found


def _table_rows(item: int, lines: list[_Line], rows: list[bool]) -> list[_Candidate]:
    """Each table row, scored with its header; its answer is the cell of the column asked about."""
    found = []
    for j, line in enumerate(lines):
        if not rows[j]:
            continue
        top = j
        while top > 0 and rows[top - 1]:
            top -= 1
        header = None
        if top > 0 and _adjacent(lines[top - 1].box, lines[top].box) and _is_header(lines[top - 1].text):
            header = lines[top - 1]
        if header is None and _is_year_header(lines[top].text) and top < j:
            header = lines[top]
        first = top - 1 if header is not None and top > 0 and header is lines[top - 1] else top
        above = lines[first - 1] if first > 0 and not rows[first - 1] else None
        caption = above.text if above and _is_header(above.text) and not _stands_alone(above.text) else ""
        text = " ".join(t for t in (caption, header.text if header else "", line.text) if t)
        found.append(
            _Candidate(
                item,
                text,
                line.text.strip(),
                [p[2] for p in line.parts],
                header.text if header else None,
                own=line.text.strip(),
            )
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
    """A line of a table: two or more numbers making up much of it, and not a sentence or a label."""
    tokens = text.split()
    numbers = sum(_is_number(t) for t in tokens)
    return (
        numbers >= 2
        and numbers >= 0.4 * len(tokens)
        and not text.rstrip().endswith(".")
        and not _COLON_LABEL.match(text)
    )


def _is_year_header(text: str) -> bool:
    numbers = [t for t in text.split() if _is_number(t)]
    return bool(numbers) and all(_YEAR.fullmatch(t) for t in numbers)


def _ends_block(line: _Line, widest: float) -> bool:
    """A short line without closing punctuation (a heading, a label) stands alone."""
    short = line.box[2] - line.box[0] < 0.6 * widest
    return short and not line.text.rstrip().endswith((".", ",", ";", ":", "-"))


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


def _has_kind(text: str, kind: str | None, question_words: set[str], rate: bool = False) -> float:
    """1 when ``text`` holds, beyond the question's own words, the kind of answer asked for."""
    if kind is None:
        return 0.0
    if kind == "quantity":
        amounts = [
            m.group()
            for m in _AMOUNT.finditer(text)
            if m.group().split()[0].strip("$€£¥").lower() not in question_words
        ]
        words = [
            w for w in _WORD.findall(text) if w.lower() in _NUMBER_WORDS and w.lower() not in question_words
        ]
        if not amounts and not words:
            return 0.0
        if rate:
            return 1.0 if any(_is_rate(a) for a in amounts) else 0.3
        plain = [a for a in amounts if not _is_rate(a)]
        if not plain:
            return 0.3 if amounts else 1.0  # only percentages, or a number in words
        return 0.5 if all(_YEAR.fullmatch(a) for a in plain) else 1.0  # a bare year is seldom the amount
    words = [w for w in _WORD.findall(text) if w.lower() not in question_words]
    if kind == "time":
        rest = " ".join(words)
        return float(bool(_YEAR.search(rest) or _MONTHS.search(rest) or _DATE.search(text)))
    if kind == "place":
        return float(any(m.lower() not in question_words for m in _LOCATIVE.findall(text)))
    if kind == "person":
        return float(any(not set(m.lower().split()) & question_words for m in _PERSON_NAME.findall(text)))
    return float(any(w[:1].isupper() for w in words))


def _novel_words(text: str, question_words: set[str]) -> int:
    """Words of ``text`` the question does not have (a leading section number aside)."""
    words = text.split()
    if words and _ENUMERATION.match(words[0]):
        words = words[1:]
    return sum(
        1
        for w in _WORD.findall(" ".join(words).lower())
        if w not in question_words and (len(w) > 1 or w.isdigit())
    )
