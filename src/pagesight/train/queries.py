"""Synthetic queries for an index's tiles: questions a tile answers, as training and test data.

Two sources, one output (``SyntheticQuery``: the text, the tile it was made from, the answer span):

- **Offline, from the tile's own text** (``offline_queries``), so ``pagesight train`` works with
  no model at all. The tile's lines are joined into sentences; sentences that read like prose
  and carry rare terms (by inverse document frequency over the index) are chosen; references,
  captions of numbers and boilerplate are left out. A chosen sentence becomes a question by
  replacing one span (a number, else its rarest term) with "what" and keeping the words around
  it, or, for a share of them, a keyword query of its rarest terms in their order. The span is
  the question's answer, which the false-negative filter of ``negatives`` looks for.
- **From a reader model** (``model_queries``): the tile image is shown to a vision-language
  reader (``openai`` or ``transformers``), asked for questions the tile alone answers, each with
  its short answer, as PixelRAG generates its training queries; then filtered: questions that
  point at the page instead of naming what they ask about ("this figure", "the document"), too
  short, repeated, or whose answer the tile's text does not contain are dropped, with counts.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

from PIL import Image

from pagesight.encode.lexical import terms
from pagesight.train.corpus import TrainingTile

WORD = re.compile(r"[A-Za-z][A-Za-z\-']+")
NUMBER = re.compile(
    r"(?<![\w.])\d[\d.,]*\d\s?%?(?!\w)|(?<![\w.])\d\s?%"
)  # two digits or more, or a percentage
DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")
# Sentences that cite rather than state: reference lists, URLs, venues.
CITATION = re.compile(
    r"arXiv|https?://|doi\.|\bProceedings\b|\bIn Proc|\bpp\.\s*\d|\bVol\.|Conference on|Association for"
)
CITATION_YEAR = re.compile(r"\b(?:19|20)\d{2}[a-z]?\b")  # a year as papers cite it: 2019, 2019a
OPENERS = re.compile(
    r"^(?:However|Moreover|Furthermore|In addition|Additionally|Thus|Therefore|Hence|Finally|"
    r"Specifically|In particular|Similarly|Overall|Notably|Indeed|First|Second|Third|Also)\s*,?\s+",
    re.IGNORECASE,
)
# Questions that point at the page instead of naming their subject: unanswerable out of context.
VAGUE = re.compile(
    r"\b(?:this|the|that)\s+(?:page|image|picture|document|figure|table|chart|diagram|screenshot|"
    r"text|passage|section|paper|article)\b",
    re.IGNORECASE,
)
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "by",
        "from",
        "at",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "we",
        "our",
        "they",
        "their",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "how",
        "than",
        "then",
        "there",
        "here",
        "such",
        "can",
        "could",
        "may",
        "might",
        "will",
        "would",
        "should",
        "also",
        "not",
        "no",
        "but",
        "if",
        "into",
        "over",
        "under",
        "between",
        "both",
        "each",
        "more",
        "most",
        "other",
        "some",
        "any",
        "all",
        "only",
        "very",
        "using",
        "used",
        "use",
        "based",
        "via",
        "per",
        "one",
        "two",
        "three",
    ]
)


@dataclass
class SyntheticQuery:
    """A query and the tile it was made from. ``answer`` is the span of the tile that answers it
    (empty when unknown); ``source`` says how it was made (offline-question, offline-keywords, or
    the reader's name)."""

    text: str
    tile_id: int
    doc_id: str
    page: int
    answer: str = ""
    source: str = "offline-question"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FilterReport:
    """How many candidate queries each filter dropped, and how many were kept."""

    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    seen: set[str] = field(default_factory=set)  # the questions kept, lower-cased, for duplicates

    def to_dict(self) -> dict:
        return {"kept": self.kept, "dropped": dict(self.dropped)}


def sentences(text: str) -> list[str]:
    """The tile's lines joined into sentences; a word hyphenated across a line break is rejoined
    (PDF text layers mark such hyphens as U+FFFE or a soft hyphen, or keep a plain one)."""
    joined = re.sub(r"[\ufffe\u00ad]\s*|(?<=\w)-\n(?=[a-z])", "", text)
    joined = re.sub(r"\s+", " ", joined).strip()
    return [s.strip() for s in SENTENCE_END.split(joined) if s.strip()]


class Vocabulary:
    """Document frequencies of the terms of a set of texts, for inverse document frequency."""

    def __init__(self, texts: Iterable[str]):
        self.df: Counter = Counter()
        self.n = 0
        for text in texts:
            self.df.update(set(terms(text)))
            self.n += 1

    def idf(self, term: str) -> float:
        return math.log((self.n + 1) / (self.df.get(term, 0) + 0.5))


def informative(sentence: str, min_words: int = 8, max_words: int = 45) -> bool:
    """Whether ``sentence`` reads as a statement worth asking about: prose of a fair length, mostly
    words, not a citation or a run of numbers."""
    words = sentence.split()
    if not min_words <= len(words) <= max_words:
        return False
    alphabetic = [w for w in (w.strip(".,;:()[]\"'") for w in words) if WORD.fullmatch(w)]
    if len(alphabetic) < 0.7 * len(words):
        return False
    if sum(w[0].islower() for w in alphabetic) < 0.4 * len(alphabetic):  # names, titles, headings
        return False
    return not CITATION.search(sentence) and len(CITATION_YEAR.findall(sentence)) < 2


def offline_queries(
    tiles: Sequence[TrainingTile],
    vocabulary: Vocabulary,
    per_tile: int = 2,
    keyword_share: float = 0.25,
    seed: int = 0,
) -> list[SyntheticQuery]:
    """Up to ``per_tile`` queries for each tile, from its rarest-termed informative sentences;
    ``keyword_share`` of them as keyword queries, the rest as questions."""
    rng = random.Random(seed)
    found = []
    for tile in tiles:
        candidates = [s for s in sentences(tile.text) if informative(s)]
        scored = sorted(candidates, key=lambda s: -_weight(s, vocabulary) + rng.random() * 1e-6)
        for sentence in scored[:per_tile]:
            if rng.random() < keyword_share:
                query, answer, source = keyword_query(sentence, vocabulary), "", "offline-keywords"
            else:
                query, answer = question(sentence, vocabulary)
                source = "offline-question"
            if query:
                found.append(SyntheticQuery(query, tile.id, tile.doc_id, tile.page, answer, source))
    return found


def _weight(sentence: str, vocabulary: Vocabulary) -> float:
    """Mean IDF of the sentence's distinct terms, discounted when it has fewer than eight."""
    distinct = set(terms(sentence))
    if not distinct:
        return 0.0
    mean = sum(vocabulary.idf(t) for t in distinct) / len(distinct)
    return mean * min(1.0, len(distinct) / 8)


def question(sentence: str, vocabulary: Vocabulary, max_words: int = 24) -> tuple[str, str]:
    """``sentence`` as a question and its answer: a number in it (else its rarest word) replaced
    by "what", at most ``max_words`` words around it, discourse openers dropped."""
    sentence = OPENERS.sub("", sentence.rstrip(" .;:"))
    sentence = re.sub(r"^(?:In this (?:paper|work|study),?\s+)?[Ww]e\b", "the authors", sentence)
    match = NUMBER.search(sentence)
    if match is not None:
        start, end = match.span()
    else:
        words = [(m.start(), m.end(), m.group()) for m in WORD.finditer(sentence)]
        content = [w for w in words if w[2].lower() not in STOPWORDS]
        if not content:
            return "", ""
        start, end, _ = max(content, key=lambda w: (vocabulary.idf(_stem(w[2])), -w[0]))
    answer = sentence[start:end].strip()
    before, after = sentence[:start].split(), sentence[end:].split()
    keep_before = max(0, max_words // 2 - 1)
    before = before[-keep_before:] if keep_before else []
    after = after[: max_words - len(before) - 1]
    text = " ".join([*before, "what", *after]).strip(" ,;:")
    return (text[0].upper() + text[1:].rstrip("?") + "?", answer) if text else ("", "")


def keyword_query(sentence: str, vocabulary: Vocabulary, n_terms: int = 6) -> str:
    """The ``n_terms`` rarest content words of ``sentence``, in their order there."""
    words = [w for w in WORD.findall(sentence) if w.lower() not in STOPWORDS]
    ranked = sorted(set(words), key=lambda w: -vocabulary.idf(_stem(w)))[:n_terms]
    chosen = set(ranked)
    ordered = list(dict.fromkeys(w for w in words if w in chosen))
    return " ".join(ordered)


def _stem(word: str) -> str:
    stems = terms(word)
    return stems[0] if stems else word.lower()


# Model-generated queries ---------------------------------------------------------------------

PROMPT = (
    "The image is one page (or part of a page) of a document. Write {n} questions that a reader "
    "could answer from this image alone. Each question must be specific and self-contained: name "
    "the method, quantity, dataset or entity it asks about, as a search query would; never refer to "
    "'this page', 'the figure', 'the table' or 'the document'. After each question write ' || ' and "
    "the short answer, copied from the image. One question per line, nothing else."
)


def model_queries(
    reader,
    tiles: Sequence[TrainingTile],
    image: Callable[[TrainingTile], Image.Image],
    per_tile: int = 2,
    report: FilterReport | None = None,
) -> list[SyntheticQuery]:
    """Questions a reader (with ``chat(prompt, images)``) writes for each tile's image, filtered;
    ``image(tile)`` renders a tile. Drop counts go to ``report``."""
    report = report if report is not None else FilterReport()
    found = []
    seen = report.seen
    for tile in tiles:
        reply = reader.chat(PROMPT.format(n=per_tile), images=[image(tile)])
        for line in reply.splitlines()[: per_tile * 2]:
            candidate, _, answer = line.partition("||")
            candidate = re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", candidate).strip()
            answer = answer.strip().strip(".")
            reason = rejection(candidate, answer, tile.text, seen)
            if reason:
                report.dropped[reason] += 1
                continue
            seen.add(candidate.lower())
            source = getattr(reader, "name", "model")
            found.append(SyntheticQuery(candidate, tile.id, tile.doc_id, tile.page, answer, source))
            report.kept += 1
    return found


def rejection(question_text: str, answer: str, tile_text: str, seen: set[str]) -> str | None:
    """Why a model's question is dropped (None: kept): PixelRAG's filters against questions that
    are vague (point at the page, or too short to name a subject) or unanswerable from the tile."""
    if not question_text:
        return "empty"
    if len(question_text.split()) < 5:
        return "too short"
    if VAGUE.search(question_text):
        return "vague"
    if question_text.lower() in seen:
        return "duplicate"
    if not answer:
        return "no answer"
    if tile_text.strip() and not contains(tile_text, answer):
        return "answer not on the tile"
    return None


def contains(text: str, answer: str) -> bool:
    """Whether ``text`` holds ``answer``: its numbers as written and its content terms (stemmed)."""
    numbers = set(DIGITS.findall(answer))
    if not numbers <= set(DIGITS.findall(text)):
        return False
    wanted = set(terms(answer)) - numbers
    return bool(numbers or wanted) and wanted <= set(terms(text))
