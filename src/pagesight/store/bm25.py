"""The local store's BM25 index over tile text: bm25s (Lucene's BM25), the analysis of
``encode.lexical``, ids of the catalog's tiles."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import bm25s
import numpy as np

from pagesight.encode.lexical import burst_weights, query_weights, tokenize
from pagesight.read.language import query_language


class LexicalRetriever:
    def __init__(
        self,
        model: bm25s.BM25 | None,
        tile_ids: np.ndarray,
        phrases: PhraseIds | None = None,
        bursts: dict[str, float] | None = None,
        languages: tuple[str, ...] = ("en",),
    ):
        self.model = model
        self.tile_ids = tile_ids
        # the index's phrase terms (encode.lexical.with_phrases); None when it has none
        self.phrases = phrases
        # the collection's bursty words (encode.lexical.burst_weights); None: every word weighs 1
        self.bursts = bursts
        self.languages = languages  # of its tiles' pages (read.language): a query is read in one of them
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
        term_weights: bool = False,
        languages: list[str] | None = None,
    ) -> LexicalRetriever:
        """``languages``: each text's (None: all English)."""
        tokens = tokenize(texts, phrases, languages)
        bursts = burst_weights(tokens) if term_weights else None
        held = tuple(sorted(set(languages or ()) | {"en"}))
        empty = PhraseIds.empty() if phrases else None
        if not any(tokens):  # no tile has a single term yet: nothing to index
            return cls(None, tile_ids, empty, bursts, held)
        model = bm25s.BM25(k1=k1, b=b, method="lucene")
        model.index(tokens, show_progress=False)
        return cls(model, tile_ids, PhraseIds.take(model) if phrases else None, bursts, held)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "tile_ids.npy", self.tile_ids)
        if self.model is not None:
            self.model.save(folder, show_progress=False)
        if self.phrases is not None:
            self.phrases.save(folder)
        if self.bursts is not None:
            (folder / "bursts.json").write_text(json.dumps(self.bursts))
        complete = {
            "tiles": len(self.tile_ids),
            "phrases": self.phrases is not None,
            "languages": self.languages,
        }
        (folder / "complete.json").write_text(json.dumps(complete))

    @classmethod
    def load(cls, folder: Path) -> LexicalRetriever:
        tile_ids = np.load(folder / "tile_ids.npy")
        model = (
            bm25s.BM25.load(folder, show_progress=False) if (folder / "params.index.json").exists() else None
        )
        complete = json.loads((folder / "complete.json").read_text())
        bursts = (
            json.loads((folder / "bursts.json").read_text()) if (folder / "bursts.json").exists() else None
        )
        phrases = PhraseIds.load(folder) if complete.get("phrases") else None
        return cls(model, tile_ids, phrases, bursts, tuple(complete.get("languages", ("en",))))

    def search(
        self, query: str, n: int, allowed: np.ndarray | None = None, language: str | None = None
    ) -> list[tuple[int, float]]:
        """The ``n`` best (tile id, score) pairs with a positive score, best first; the query read in
        ``language`` (None: told from it, among the index's languages)."""
        if self.model is None:
            return []
        vocab = self.model.vocab_dict
        language = language or query_language(query, self.languages)
        weights = query_weights(query, self.phrases is not None, self.bursts, language)
        held = {term: vocab[term] for term in weights if term in vocab}  # the words: phrases are apart
        if self.phrases is not None:
            held.update(self.phrases.found([term for term in weights if " " in term]))
        if not held:
            return []
        scores = _weighted_scores(self.model, list(held.values()), [weights[term] for term in held])
        keep = (
            ~self._removed
            if allowed is None
            else np.isin(self.tile_ids, np.asarray(allowed)) & ~self._removed
        )
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

    def found(self, terms: list[str]) -> dict[str, int]:
        """The term id of each of ``terms`` the index holds."""
        if not len(self.hashes) or not terms:
            return {}
        wanted = _hashes(terms)
        at = np.minimum(np.searchsorted(self.hashes, wanted), len(self.hashes) - 1)
        return {
            term: int(self.term_ids[i]) for term, i, hit in zip(terms, at, self.hashes[at] == wanted) if hit
        }

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


def _weighted_scores(model: bm25s.BM25, term_ids: list[int], weights: list[float]) -> np.ndarray:
    """Each tile's sum of the terms' BM25 scores times their weights: bm25s' sum over its
    precomputed matrix (``get_scores_from_ids``), with a weight for each term."""
    data, indices, indptr = model.scores["data"], model.scores["indices"], model.scores["indptr"]
    scores = np.zeros(model.scores["num_docs"], dtype=np.float32)
    for term_id, weight in zip(term_ids, weights):
        start, end = indptr[term_id], indptr[term_id + 1]
        np.add.at(scores, indices[start:end], weight * data[start:end])
    return scores


def _top(ids: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The ``n`` best, ties in tile-id order: the same order whichever other tiles a filter left out."""
    n = min(n, int(np.count_nonzero(scores > 0)))
    if n <= 0:
        return []
    threshold = np.partition(scores, len(scores) - n)[len(scores) - n]
    best = np.flatnonzero(scores >= threshold)  # every tile tied with the n-th, so ties break by id
    best = best[np.lexsort((ids[best], -scores[best]))][:n]
    return [(int(ids[i]), float(scores[i])) for i in best]
