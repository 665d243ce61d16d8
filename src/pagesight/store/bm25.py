"""The local store's BM25 index over tile text: bm25s (Lucene's BM25), the analysis of
``encode.lexical``, ids of the catalog's tiles."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import bm25s
import numpy as np

from pagesight.encode.lexical import PHRASE_WEIGHT, query_terms, tokenize


class LexicalRetriever:
    def __init__(self, model: bm25s.BM25 | None, tile_ids: np.ndarray, phrases: PhraseIds | None = None):
        self.model = model
        self.tile_ids = tile_ids
        # the index's phrase terms (encode.lexical.with_phrases); None when it has none
        self.phrases = phrases
        self._removed = np.zeros(len(tile_ids), dtype=bool)  # deleted tiles the model still counts

    def remove(self, tile_ids: np.ndarray) -> None:
        """Leave ``tile_ids`` out of every result; the BM25 statistics keep them until a rebuild."""
        self._removed |= np.isin(self.tile_ids, tile_ids)

    @classmethod
    def build(
        cls,
        tile_ids: np.ndarray,
        texts: list[str],
        k1: float = 1.2,
        b: float = 0.75,
        phrases: bool = False,
    ) -> LexicalRetriever:
        tokens = tokenize(texts, phrases)
        empty = PhraseIds.empty() if phrases else None
        if not any(tokens):  # no tile has a single term yet: nothing to index
            return cls(None, tile_ids, empty)
        model = bm25s.BM25(k1=k1, b=b, method="lucene")
        model.index(tokens, show_progress=False)
        return cls(model, tile_ids, PhraseIds.take(model) if phrases else None)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "tile_ids.npy", self.tile_ids)
        if self.model is not None:
            self.model.save(folder, show_progress=False)
        if self.phrases is not None:
            self.phrases.save(folder)
        complete = {"tiles": len(self.tile_ids), "phrases": self.phrases is not None}
        (folder / "complete.json").write_text(json.dumps(complete))

    @classmethod
    def load(cls, folder: Path) -> LexicalRetriever:
        tile_ids = np.load(folder / "tile_ids.npy")
        model = (
            bm25s.BM25.load(folder, show_progress=False) if (folder / "params.index.json").exists() else None
        )
        with_phrases = json.loads((folder / "complete.json").read_text()).get("phrases", False)
        return cls(model, tile_ids, PhraseIds.load(folder) if with_phrases else None)

    def search(self, query: str, n: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The ``n`` best (tile id, score) pairs with a positive score, best first."""
        if self.model is None:
            return []
        vocab = self.model.vocab_dict
        words, phrases = query_terms(query, self.phrases is not None)
        word_ids = [vocab[t] for t in words if t in vocab]
        phrase_ids = self.phrases.ids(phrases) if phrases else []
        if not word_ids and not phrase_ids:
            return []
        # a term given twice counts twice, as in the query
        scores = self.model.get_scores_from_ids(word_ids)
        if phrase_ids:
            scores = scores + PHRASE_WEIGHT * self.model.get_scores_from_ids(phrase_ids)
        keep = ~self._removed if allowed is None else np.isin(self.tile_ids, allowed) & ~self._removed
        scores = np.where(keep, scores, 0.0)
        return _top(self.tile_ids, scores, n)


class PhraseIds:
    """The BM25 model's term ids of its phrase terms, by a 64-bit hash of each, sorted.

    bm25s keeps its vocabulary as a dict of strings, which is fine for words but not for word pairs:
    IRPAPERS has 464,000 pair types beside 40,000 words, 140 MB of dict at load against 12 MB.
    Two arrays (16 bytes a pair) hold the same, and the model's vocabulary keeps the words only.
    Every pair is kept, so the scores are those of the whole vocabulary (and of the Qdrant store).
    """

    def __init__(self, hashes: np.ndarray, ids: np.ndarray):
        self.hashes = hashes
        self.term_ids = ids

    @classmethod
    def empty(cls) -> PhraseIds:
        return cls(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64))

    @classmethod
    def take(cls, model: bm25s.BM25) -> PhraseIds:
        """The phrase terms of ``model``'s vocabulary, which is left with its words."""
        pairs = [(term, term_id) for term, term_id in model.vocab_dict.items() if " " in term]
        model.vocab_dict = {term: term_id for term, term_id in model.vocab_dict.items() if " " not in term}
        hashes = _hashes([term for term, _ in pairs])
        order = np.argsort(hashes, kind="stable")
        return cls(hashes[order], np.array([term_id for _, term_id in pairs], dtype=np.int64)[order])

    def ids(self, terms: list[str]) -> list[int]:
        """The term ids of those of ``terms`` the index holds, repeats kept."""
        if not len(self.hashes) or not terms:
            return []
        wanted = _hashes(terms)
        at = np.minimum(np.searchsorted(self.hashes, wanted), len(self.hashes) - 1)
        return [int(i) for i in self.term_ids[at[self.hashes[at] == wanted]]]

    def save(self, folder: Path) -> None:
        np.save(folder / "phrase_hashes.npy", self.hashes)
        np.save(folder / "phrase_ids.npy", self.term_ids)

    @classmethod
    def load(cls, folder: Path) -> PhraseIds:
        return cls(np.load(folder / "phrase_hashes.npy"), np.load(folder / "phrase_ids.npy"))


def _hashes(terms: list[str]) -> np.ndarray:
    """A stable 64-bit hash of each term."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little") for t in terms],
        dtype=np.uint64,
    )


def _top(ids: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The ``n`` best, ties in tile-id order: the same order whichever other tiles a filter left out."""
    n = min(n, int(np.count_nonzero(scores > 0)))
    if n <= 0:
        return []
    threshold = np.partition(scores, len(scores) - n)[len(scores) - n]
    best = np.flatnonzero(scores >= threshold)  # every tile tied with the n-th, so ties break by id
    best = best[np.lexsort((ids[best], -scores[best]))][:n]
    return [(int(ids[i]), float(scores[i])) for i in best]
