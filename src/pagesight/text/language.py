"""The language of a page's text, and the analysis BM25 gives each language.

Six languages are analysed (ViDoRe V3's): English, French, German, Spanish, Italian and
Portuguese, each with its Snowball stemmer (PyStemmer) and its stop words (bm25s). A page's
language is detected from its text by py3langid (a naive Bayes model over byte n-grams, shipped in
its wheel, about 0.1 ms a page here), restricted to those six, or given for a whole run
(``ingest --language``). Detection is trusted on text long enough and a clear verdict only; a page
that gives neither (a table of figures, a cover, a scan without text) takes its document's
language, and a document without one is English, so English collections read as they always did.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from pagesight.choices import LANGUAGES
from pagesight.errors import PagesightError

if TYPE_CHECKING:
    from pagesight.records import Page

DEFAULT = "en"
MIN_LETTERS = 80  # a page's text shorter than this is not trusted to tell its language
MIN_PROBABILITY = 0.95  # ... nor a verdict less sure than this
SAMPLE_CHARS = 2000  # a page's language is told from its first characters: as sure, half the time
QUERY_PROBABILITY = 0.8  # a question's language, among the languages an index holds


def check_language(code: str) -> str:
    if code not in LANGUAGES:
        raise PagesightError(f"unknown language '{code}' (known: {', '.join(LANGUAGES)})")
    return code


@cache
def _identifier():
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_modelpath(Path(MODEL_DIR) / MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


def classify(text: str) -> tuple[str, float]:
    """The most likely of ``LANGUAGES`` for ``text``, with its probability."""
    code, probability = _identifier().classify(text)
    return code, float(probability)


def page_language(text: str) -> str | None:
    """The language of a page's text, or None when the text is too short or the verdict unsure."""
    if sum(c.isalpha() for c in text) < MIN_LETTERS:
        return None
    code, probability = classify(text[:SAMPLE_CHARS])
    return code if probability >= MIN_PROBABILITY else None


def document_languages(found: Sequence[str | None]) -> list[str]:
    """Each page's language: its own when detected, else its document's most frequent one (English
    when no page told)."""
    counts = Counter(code for code in found if code)
    fallback = counts.most_common(1)[0][0] if counts else DEFAULT
    return [code or fallback for code in found]


def label_pages(pages: Sequence[Page], given: str | None = None) -> None:
    """Set each page's ``language``: ``given`` for all (``ingest --language``), else detected from
    its text (``page_language``, ``document_languages``)."""
    if given is not None:
        found = [check_language(given)] * len(pages)
    else:
        texts = [" ".join(span.text for tile in page.tiles for span in tile.spans) for page in pages]
        found = document_languages([page_language(text) for text in texts])
    for page, code in zip(pages, found):
        page.language = code


def question_language(query: str) -> str:
    """The language of a question, among ``LANGUAGES``, when it is clearly in one, else English."""
    code, probability = classify(query)
    return code if probability >= QUERY_PROBABILITY else DEFAULT


def query_language(query: str, held: Sequence[str]) -> str:
    """The language a question is analysed in: one of the languages the index ``held``, when the
    question is clearly in it, else English (an index of English pages only reads every question
    as English, as before)."""
    if all(code == DEFAULT for code in held):
        return DEFAULT
    code = question_language(query)
    return code if code in held else DEFAULT
