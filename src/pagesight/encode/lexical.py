"""Text analysis for BM25: lower-cased, stopword-free, Snowball-stemmed terms (bm25s's tokenizer),
the same for tiles, queries and the lines a hit quotes. The BM25 index itself is the local store's
(``store/local/bm25.py``)."""

from __future__ import annotations

import math
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

import Stemmer

from pagesight.choices import LANGUAGES
from pagesight.devices import jax_held_off

with jax_held_off():  # bm25s' numpy top-k: its JAX one would take the GPU's memory (devices.py)
    import bm25s
    import bm25s.stopwords
from bm25s.stopwords import STOPWORDS_EN, STOPWORDS_EN_PLUS  # noqa: E402

if TYPE_CHECKING:
    from pagesight.settings import Settings

NAME = "bm25"
_STOPWORDS = frozenset(STOPWORDS_EN)
# English function words (bm25s's list of 179, NLTK's): not indexed away (BM25 keeps Lucene's 33),
# but no figure's unit is one (the extractive reader's candidates)
FUNCTION_WORDS = frozenset(STOPWORDS_EN_PLUS)


@cache
def stemmer(language: str = "en") -> Stemmer.Stemmer:
    """The Snowball stemmer of ``language`` (a code of ``choices.LANGUAGES``)."""
    return Stemmer.Stemmer(LANGUAGES[language])


@cache
def _stopwords(language: str) -> str | tuple[str, ...]:
    if language == "en":
        return "en"
    return tuple(getattr(bm25s.stopwords, f"STOPWORDS_{LANGUAGES[language].upper()}"))


def tokenize(
    texts: list[str], phrases: bool = False, languages: Sequence[str] | None = None
) -> list[list[str]]:
    """Lower-cased, stopword-free, stemmed terms: the same analysis for tiles and queries, in each
    text's language (``languages``, one a text; None: English); with each pair of neighbouring terms
    as one more term when ``phrases`` (``with_phrases``)."""
    if languages is None or all(code == "en" for code in languages):
        groups = {"en": list(range(len(texts)))}
    else:
        groups: dict[str, list[int]] = {}
        for position, code in enumerate(languages):
            groups.setdefault(code, []).append(position)
    tokens: list[list[str]] = [[] for _ in texts]
    for code, positions in groups.items():
        analysed = bm25s.tokenize(
            [texts[i] for i in positions],
            stopwords=list(_stopwords(code)) if code != "en" else "en",
            stemmer=stemmer(code),
            return_ids=False,
            show_progress=False,
        )
        for position, terms in zip(positions, analysed):
            tokens[position] = terms
    return [with_phrases(terms) for terms in tokens] if phrases else tokens


# A query's phrase terms weigh this much against its words (0.5 beat 1 and 0.25 on the three
# development sets: BENCHMARKS.md, "Filings and reports: phrase terms, headings read whole, term
# weights").
PHRASE_WEIGHT = 0.5


def with_phrases(terms: list[str]) -> list[str]:
    """``terms`` followed by each pair of neighbours as one term ("total current", "current liabil"):
    Lucene's shingles, the ordered-window part of a sequential dependence model. A page where
    "total current liabilities" is a table's row outranks the prose that has the three words
    apart, and the statement a question names ("balance sheet") its passing mentions' neighbours.
    The pairs hold a space, which no word term can."""
    return terms + [f"{a} {b}" for a, b in zip(terms, terms[1:])]


def query_weights(
    query: str, phrases: bool, bursts: Mapping[str, float] | None, language: str = "en"
) -> dict[str, float]:
    """A query's terms, analysed in ``language``, with their weights, summed over repeats: each word
    1, or its burstiness in the collection when ``bursts`` is given (``burst_weights``; a word it
    does not hold weighs ``BURST_FLOOR``); with ``phrases``, each pair of neighbours
    (``with_phrases``) ``PHRASE_WEIGHT`` times the lighter of its two words.

    A query in another language than English also holds its content words (its language's stop
    words left out) as English analysis reads them, at the weight of its own term where both
    analyses agree: pages read as English hold such words too (a passage left untranslated in a
    translation, a page mixing two languages, names and cognates on English pages). On the
    Debian Reference, BM25's nDCG@10 of Spanish questions on the Spanish translation went from .90
    to .94, of French ones on the English original from .36 to .45 (BENCHMARKS.md, "Languages")."""
    weights = _weights(query, phrases, bursts, language)
    if language != "en":
        stop = _stopword_set(language)
        content = " ".join(word for word in _WORD.findall(query.lower()) if word not in stop)
        for term, weight in _weights(content, phrases, bursts, "en").items():
            weights[term] = max(weights.get(term, 0.0), weight)
    return weights


def _weights(
    query: str, phrases: bool, bursts: Mapping[str, float] | None, language: str
) -> dict[str, float]:
    words = terms(query, language)  # tokenize's analysis, without bm25s' overhead on every search
    weight = (lambda term: 1.0) if bursts is None else (lambda term: bursts.get(term, BURST_FLOOR))
    weights: dict[str, float] = {}
    for term in words:
        weights[term] = weights.get(term, 0.0) + weight(term)
    if phrases:
        for a, b in zip(words, words[1:]):
            weights[f"{a} {b}"] = weights.get(f"{a} {b}", 0.0) + PHRASE_WEIGHT * min(weight(a), weight(b))
    return weights


# Burstiness: how much more a word clusters in few tiles than chance would spread it (Church and
# Gale's residual IDF: its IDF less the IDF a Poisson spread of its occurrences would give). A
# question's own subject ("liabilities", "inventories") clusters on the pages about it; the words
# of its instructions ("information", "provided", "primarily", "based") are spread thin over every
# page. The floor and scale were measured (BENCHMARKS.md, "Filings and reports: phrase terms,
# headings read whole, term weights").
BURST_FLOOR = 0.5  # the weight of a word spread as chance would spread it, or unknown
BURST_SCALE = 1.0  # residual IDF (in bits) at which a word weighs fully


def burst_weights(tiles: Iterable[list[str]]) -> dict[str, float]:
    """The weight (``BURST_FLOOR`` to 1) of each word of ``tiles`` (each tile's terms, as
    ``tokenize`` gives them; phrase terms are left out) that weighs more than the floor."""
    holding: Counter[str] = Counter()
    occurrences: Counter[str] = Counter()
    n = 0
    for terms in tiles:
        words = [term for term in terms if " " not in term]
        n += 1
        holding.update(set(words))
        occurrences.update(words)
    weights = {}
    for term, df in holding.items():
        residual = -math.log2(df / n) + math.log2(-math.expm1(-occurrences[term] / n))
        weight = min(1.0, residual / BURST_SCALE)
        if weight > BURST_FLOOR:
            weights[term] = round(weight, 4)
    return weights


def indexed_text(text: str, context: str, heading: str, settings: Settings, cells: str = "") -> str:
    """A tile's text as BM25 indexes it: with its document's context (``text.titles.context``)
    ``settings.context_weight`` times and its page's heading (``text.titles.page_headings``)
    ``settings.heading_weight`` times more, BM25F's field weights by repeated terms, so pages of a
    document its question names rank above pages that share only the question's other words, and
    the statement or section a question names above the notes that mention it; its table cells
    (``text.tables.cell_text``) ``settings.table_weight`` times, so a question naming a row and a
    column meets the cell; with the years of its period codes when ``settings.period_years``
    (``with_years``). Only BM25 reads this: the tile's text, lines and boxes stay as read."""
    parts = [text]
    if context:
        parts += [context] * settings.context_weight
    if heading:
        parts += [heading] * settings.heading_weight
    if cells:
        parts += [cells] * settings.table_weight
    joined = "\n".join(parts)
    return with_years(joined) if settings.period_years else joined


_PERIOD = re.compile(r"(?<![\w])(?=\w*[A-Za-z])\w*?((?:19|20)\d\d)\w*(?![\w])")


def with_years(text: str) -> str:
    """``text`` with the year of each period code after it: "FY2018" also reads "2018", "2023Q2"
    "2023", so a question about FY2018 meets the filing named ACME_2018_10K and the column headed
    2018. Codes without a year (BERT4Rec, A380) stay as they are."""
    return _PERIOD.sub(lambda m: f"{m.group(0)} {m.group(1)}", text)


_WORD = re.compile(r"(?u)\b\w\w+\b")
# Latin letters with accents to their base letter, one character for one ("é" -> "e", "ñ" -> "n")
_UNACCENTED = {
    code: base
    for code in range(0xC0, 0x250)
    if (base := unicodedata.normalize("NFKD", chr(code))[0]) != chr(code) and base.isascii()
}


def terms(text: str, language: str = "en") -> list[str]:
    """The analysis of ``tokenize`` for one short text (a query or a line) in ``language``, without
    bm25s overhead."""
    stop = _STOPWORDS if language == "en" else _stopword_set(language)
    words = [w for w in _WORD.findall(text.lower()) if w not in stop]
    return stemmer(language).stemWords(words)


@cache
def _stopword_set(language: str) -> frozenset[str]:
    return frozenset(_stopwords(language))


def term_matcher(query: str, language: str = "en") -> Callable[[Sequence[str]], list[int]]:
    """A function counting, for each of a tile's lines, how many distinct query terms (read in
    ``language``) it contains.

    A term matches a word that starts with its stem ("retriev" matches "retrieval"), which is
    what Snowball stems are, accents set aside: the French and Portuguese stemmers take some off
    ("système" gives "system", "régler" "regl"), so stems and lines are compared without them. The
    lines are scanned as one text, each match placed on its line by offset: one regex scan a tile,
    not one a line (a page has about 90 lines).
    """
    stems = query_stems(query, language)
    if not stems:
        return lambda lines: [0] * len(lines)
    pattern = re.compile(r"\b(" + "|".join(re.escape(s) for s in stems) + r")")  # stems are lower case

    def count(lines: Sequence[str]) -> list[int]:
        # lower case and unaccented: faster to scan than a case-blind pattern; the same offsets
        lowered = [line.lower().translate(_UNACCENTED) for line in lines]
        starts, offset = [], 0
        for line in lowered:
            starts.append(offset)
            offset += len(line) + 1
        found: dict[int, set[str]] = {}
        for match in pattern.finditer("\n".join(lowered)):
            found.setdefault(bisect_right(starts, match.start()) - 1, set()).add(match.group(1))
        return [len(found.get(i, ())) for i in range(len(lines))]

    return count


def query_stems(query: str, language: str = "en") -> list[str]:
    """The query's distinct terms read in ``language``, accents set aside, longest first: what
    ``term_matcher`` and ``stems_by_line`` look for at the start of words."""
    return sorted({unaccented(stem) for stem in terms(query, language)}, key=len, reverse=True)


def unaccented(text: str) -> str:
    """``text`` with Latin letters' accents set aside (``term_matcher``)."""
    if text.isascii():
        return text
    # translate has no fast path for a text that is not all ASCII: only its other runs go through it
    return _NOT_ASCII.sub(lambda run: run.group().translate(_UNACCENTED), text)


_NOT_ASCII = re.compile(r"[^\x00-\x7f]+")


class LineWords(NamedTuple):
    """A text's distinct words (lower-cased, unaccented, sorted) with the lines holding each
    (``line_words``): made once for a tile, it finds any query's stems in a few bisections where
    ``term_matcher``'s pattern scans the whole text again."""

    words: list[str]
    lines: list[tuple[int, ...]]


_WORD_OR_BREAK = re.compile(r"\w+|\n")


def line_words(text: str) -> LineWords:
    """The words of ``text``'s lines (separated by line breaks), in one scan."""
    holding: dict[str, list[int]] = {}
    line = 0
    for word in _WORD_OR_BREAK.findall(unaccented(text.lower())):
        if word == "\n":
            line += 1
            continue
        lines = holding.get(word)
        if lines is None:
            holding[word] = [line]
        elif lines[-1] != line:
            lines.append(line)
    words = sorted(holding)
    return LineWords(words, [tuple(holding[word]) for word in words])


def stems_by_line(stems: Sequence[str], text: LineWords) -> dict[int, set[str]]:
    """The ``stems`` (``query_stems``, longest first) that start a word of each line holding one,
    by line: the matches of ``term_matcher``'s pattern, a word matching its longest stem only."""
    found: dict[int, set[str]] = {}
    taken: set[int] = set()
    words = text.words
    for stem in stems:
        at = bisect_left(words, stem)
        while at < len(words) and words[at].startswith(stem):
            if at not in taken:
                taken.add(at)
                for line in text.lines[at]:
                    found.setdefault(line, set()).add(stem)
            at += 1
    return found
