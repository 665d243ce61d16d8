"""The local store's BM25 index over tile text: bm25s (Lucene's BM25), the analysis of
``encode.lexical``, ids of the catalog's tiles."""

from __future__ import annotations

import json
from pathlib import Path

import bm25s
import numpy as np

from pagesight.encode.lexical import stemmer, tokenize


class LexicalRetriever:
    def __init__(self, model: bm25s.BM25 | None, tile_ids: np.ndarray):
        self.model = model
        self.tile_ids = tile_ids
        self._removed = np.zeros(len(tile_ids), dtype=bool)  # deleted tiles the model still counts

    def remove(self, tile_ids: np.ndarray) -> None:
        """Leave ``tile_ids`` out of every result; the BM25 statistics keep them until a rebuild."""
        self._removed |= np.isin(self.tile_ids, tile_ids)

    @classmethod
    def build(
        cls, tile_ids: np.ndarray, texts: list[str], k1: float = 1.2, b: float = 0.75
    ) -> LexicalRetriever:
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer(), show_progress=False)
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
        keep = ~self._removed if allowed is None else np.isin(self.tile_ids, allowed) & ~self._removed
        scores = np.where(keep, scores, 0.0)
        return _top(self.tile_ids, scores, n)


def _top(ids: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[int, float]]:
    n = min(n, int(np.count_nonzero(scores > 0)))
    if n <= 0:
        return []
    best = np.argpartition(-scores, n - 1)[:n]
    best = best[np.argsort(-scores[best], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in best]
