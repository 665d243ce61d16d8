"""BM25 over tile text with bm25s (Lucene's BM25, Snowball stemming, English stopwords)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

NAME = "bm25"
_STOPWORDS = frozenset(STOPWORDS_EN)


@cache
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def tokenize(texts: list[str]) -> list[list[str]]:
    """Lower-cased, stopword-free, stemmed terms: the same analysis for tiles and queries."""
    return bm25s.tokenize(texts, stopwords="en", stemmer=_stemmer(), return_ids=False, show_progress=False)


class LexicalRetriever:
    def __init__(self, model: bm25s.BM25 | None, tile_ids: np.ndarray):
        self.model = model
        self.tile_ids = tile_ids

    @classmethod
    def build(
        cls, tile_ids: np.ndarray, texts: list[str], k1: float = 1.2, b: float = 0.75
    ) -> LexicalRetriever:
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=_stemmer(), show_progress=False)
        if not tokens.vocab:  # no tile has a single term yet: nothing to index
            return cls(None, tile_ids)
        model = bm25s.BM25(k1=k1, b=b, method="lucene")
        model.index(tokens, show_progress=False)
        return cls(model, tile_ids)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "tile_ids.npy", self.tile_ids)
        if self.model is not None:
            self.model.save(folder, show_progress=False)
        (folder / "complete.json").write_text(json.dumps({"tiles": len(self.tile_ids)}))

    @classmethod
    def load(cls, folder: Path) -> LexicalRetriever:
        tile_ids = np.load(folder / "tile_ids.npy")
        model = (
            bm25s.BM25.load(folder, show_progress=False) if (folder / "params.index.json").exists() else None
        )
        return cls(model, tile_ids)

    def search(self, query: str, n: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The ``n`` best (tile id, score) pairs with a positive score, best first."""
        if self.model is None:
            return []
        vocab = self.model.vocab_dict
        terms = [t for t in tokenize([query])[0] if t in vocab]
        if not terms:
            return []
        scores = self.model.get_scores(terms)
        if allowed is not None:
            scores = np.where(np.isin(self.tile_ids, allowed), scores, 0.0)
        return _top(self.tile_ids, scores, n)


def _top(ids: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[int, float]]:
    n = min(n, int(np.count_nonzero(scores > 0)))
    if n <= 0:
        return []
    best = np.argpartition(-scores, n - 1)[:n]
    best = best[np.argsort(-scores[best], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in best]


_WORD = re.compile(r"(?u)\b\w\w+\b")


def terms(text: str) -> list[str]:
    """The analysis of ``tokenize`` for one short text (a query or a line), without bm25s overhead."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]
    return _stemmer().stemWords(words)


def term_matcher(query: str) -> Callable[[str], int]:
    """A function counting how many distinct query terms a line contains.

    A term matches a word that starts with its stem ("retriev" matches "retrieval"), which is
    what Snowball stems are for English, and one regex scan per line is fast enough to run over
    every line of every hit.
    """
    stems = sorted(set(terms(query)), key=len, reverse=True)
    if not stems:
        return lambda text: 0
    pattern = re.compile(r"(?i)\b(" + "|".join(re.escape(s) for s in stems) + r")\w*")

    def count(text: str) -> int:
        return len({m.lower() for m in pattern.findall(text)})

    return count
