"""BM25 search with MaxScore pruning (Turtle and Flood, 1995): a question's best tiles without
scoring every posting of its commonest words, with the scores, to the last float32 bit, of scoring
them all.

A term adds at most ``weight * idf`` to a tile's score (its saturated term frequency is below 1), so
a tile that holds none of some terms scores at most the bounds of the others summed. The search
scans the terms with the fewest postings first, which gives a threshold: the ``n``-th best score so
far, which the final ``n``-th can only reach or beat. The terms with the most postings whose bounds
sum below it are then only *looked up*: a tile that no scanned term reached cannot reach the
threshold, so they are searched (by bisection in each one's sorted postings) for the tiles already
reached, and a tile drops out as soon as its score so far plus the bounds still to come falls below
the threshold. The rest are scanned. At 1,000,000 tiles an IRPAPERS question's terms hold 2 to 4
million postings, 80 to 96 % of them in terms its 100 best tiles let go unscanned.

The tiles kept are then scored as bm25s scores them (each posting's ``idf * tfc`` in float32, times
the term's weight, added term after term in the question's order), so rankings, ties included, are
those of scoring every posting. Below ``SCAN_FIRST`` postings every term is scanned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pagesight.vectors.maxsim import runs

if TYPE_CHECKING:
    from pagesight.store.local.bm25 import LexicalRetriever

K1, B = 1.2, 0.75  # bm25s' defaults, Lucene's
SCAN_FIRST = 200_000  # postings scanned before a threshold is asked for (at least one term's)
MARGIN = 1e-4  # bounds are compared with the threshold less this share: sums in another order differ


class MaxScore:
    """One question's scoring over a retriever's segments (the module docstring).

    ``spans`` are the retriever's ``_spans`` of the question's terms, ``idf`` and ``weight`` each
    term's, ``average`` the collection's mean tile length, ``allowed`` the tile ids a filter lets
    through (None: all)."""

    def __init__(
        self,
        lexical: LexicalRetriever,
        spans: list,
        idf: np.ndarray,
        weight: np.ndarray,
        average: float,
        allowed: np.ndarray | None,
    ):
        self.lexical, self.spans, self.idf, self.weight, self.average = lexical, spans, idf, weight, average
        self.bound = idf * weight.astype(np.float64)
        self.postings = np.zeros(len(idf), dtype=np.int64)
        for _, matched, _, starts, ends in spans:
            self.postings[matched] += ends - starts
        self.offsets = lexical.offsets
        self.total = int(self.offsets[-1])
        self.allowed = None
        if allowed is not None:
            self.allowed = np.zeros(self.total, dtype=bool)
            self.allowed[lexical.places(allowed)] = True
        self.records: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (term, place, value)

    def top(self, n: int) -> list[tuple[int, float]]:
        """The ``n`` best (tile id, score) pairs with a positive score, best first, ties by tile id."""
        order = np.argsort(self.postings, kind="stable")  # fewest postings first
        first = max(1, int(np.searchsorted(np.cumsum(self.postings[order]), SCAN_FIRST, side="right")))
        if first >= len(order):
            return self._everything(n)
        self._scan(order[:first])
        sums = self._sums()
        budget, used, looked = self._nth(sums[sums > 0], n) * (1 - MARGIN), 0.0, []
        for term in order[first:][::-1].tolist():  # most postings first
            if used + self.bound[term] < budget:
                looked.append(term)
                used += self.bound[term]
        if not looked:  # nothing to prune
            return self._everything(n)
        self._scan(np.setdiff1d(order[first:], looked))
        sums = self._sums()
        candidates = np.flatnonzero(sums > 0)
        looked.sort(key=lambda t: -self.bound[t])
        return self._ranked(self._look_up(looked, candidates, sums[candidates], n), n)

    def _everything(self, n: int) -> list[tuple[int, float]]:
        """Every posting scored, in one pass: a segment's postings come in term order, so each
        tile's scores add in the question's order as they come."""
        self.records = []
        self._scan(np.arange(len(self.idf)))
        if not self.records:
            return []
        scores = np.zeros(self.total, dtype=np.float32)
        for _, places, values in self.records:  # a segment each, its tiles in no other
            np.add.at(scores, places, values)
        scored = np.flatnonzero(scores)
        return top(self._ids(scored), scores[scored], n)

    def _scan(self, terms: np.ndarray) -> None:
        """Score every live (and allowed) posting of ``terms``, one gather a segment."""
        chosen = np.zeros(len(self.idf), dtype=bool)
        chosen[terms] = True
        for i, matched, _, starts, ends in self.spans:
            keep = chosen[matched]
            if not keep.any():
                continue
            part, held = self.lexical.postings[i], matched[keep]
            first, counts = starts[keep], ends[keep] - starts[keep]
            where = runs(first, counts)  # every posting of these terms, in term order
            docs, tfs, term = part.docs[where], part.tfs[where], np.repeat(held, counts)
            places = docs.astype(np.int64) + self.offsets[i]
            live = ~self.lexical.deleted[i][docs] if self.lexical.dirty[i] else None
            if self.allowed is not None:
                live = self.allowed[places] if live is None else live & self.allowed[places]
            if live is not None:
                docs, tfs, term, places = docs[live], tfs[live], term[live], places[live]
            self.records.append((term, places, self._values(i, term, docs, tfs)))

    def _values(self, i: int, term: np.ndarray, docs: np.ndarray, tfs: np.ndarray) -> np.ndarray:
        """bm25s' score of postings of segment ``i``: ``weight * float32(idf * tfc)``."""
        lengths = self.lexical.postings[i].lengths[docs].astype(np.float64)
        tfc = tfs / (K1 * ((1 - B) + B * lengths / self.average) + tfs)
        return self.weight[term] * (self.idf[term] * tfc).astype(np.float32)

    def _sums(self) -> np.ndarray:
        """Each tile's score so far (by place), from the postings scored."""
        if not self.records:
            return np.zeros(self.total)
        places = np.concatenate([places for _, places, _ in self.records])
        values = np.concatenate([values for _, _, values in self.records])
        return np.bincount(places, weights=values, minlength=self.total)

    @staticmethod
    def _nth(scores: np.ndarray, n: int) -> float:
        """The ``n``-th best of ``scores``, 0 when there are fewer."""
        return float(np.partition(scores, len(scores) - n)[len(scores) - n]) if len(scores) >= n else 0.0

    def _look_up(self, terms: list[int], candidates: np.ndarray, sums: np.ndarray, n: int) -> np.ndarray:
        """Add ``terms`` (largest bound first) to the ``candidates`` that can still reach the
        threshold, found by bisection in the terms' postings; the candidates left."""
        threshold, remaining = self._nth(sums, n), float(self.bound[terms].sum())
        for term in terms:
            keep = sums + remaining >= threshold * (1 - MARGIN)
            candidates, sums = candidates[keep], sums[keep]
            sums = sums + self._find(term, candidates)
            remaining -= self.bound[term]
            threshold = max(threshold, self._nth(sums, n))
        return candidates[sums >= threshold * (1 - MARGIN)]

    def _find(self, term: int, candidates: np.ndarray) -> np.ndarray:
        """``term``'s score in each of ``candidates`` (places, sorted), 0 where it is absent."""
        found = np.zeros(len(candidates))
        bounds = np.searchsorted(candidates, self.offsets)
        for i, matched, _, starts, ends in self.spans:
            at = np.searchsorted(matched, term)
            if at == len(matched) or matched[at] != term or bounds[i] == bounds[i + 1]:
                continue
            part, low = self.lexical.postings[i], int(bounds[i])
            local = candidates[low : bounds[i + 1]] - self.offsets[i]
            postings = part.docs[starts[at] : ends[at]]
            sought = np.minimum(local, np.iinfo(postings.dtype).max).astype(postings.dtype)
            slot = np.minimum(np.searchsorted(postings, sought), len(postings) - 1)
            hit = np.flatnonzero(postings[slot] == local)
            if not len(hit):
                continue
            docs, tfs = postings[slot[hit]], part.tfs[starts[at] + slot[hit]]
            values = self._values(i, np.full(len(hit), term), docs, tfs)
            self.records.append((np.full(len(hit), term), candidates[low + hit], values))
            found[low + hit] = values
        return found

    def _ranked(self, candidates: np.ndarray, n: int) -> list[tuple[int, float]]:
        """The candidates' scores summed term after term in the question's order (their postings
        came in several passes, so put back in term order first), and the best."""
        kept = np.zeros(self.total, dtype=bool)
        kept[candidates] = True
        term, places, values = [], [], []
        for t, p, v in self.records:
            mask = kept[p]
            term.append(t[mask])
            places.append(p[mask])
            values.append(v[mask])
        order = np.argsort(np.concatenate(term), kind="stable")
        places, values = np.concatenate(places)[order], np.concatenate(values)[order]
        scores = np.zeros(len(candidates), dtype=np.float32)
        np.add.at(scores, np.searchsorted(candidates, places), values)
        return top(self._ids(candidates), scores, n)

    def _ids(self, places: np.ndarray) -> np.ndarray:
        """The tile ids at ``places``."""
        part = np.searchsorted(self.offsets, places, side="right") - 1
        ids = np.zeros(len(places), dtype=np.int64)
        for i in np.unique(part).tolist():
            at = part == i
            ids[at] = self.lexical.postings[i].tile_ids[places[at] - self.offsets[i]]
        return ids


def top(ids: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The ``n`` best, ties in tile-id order: the same order whichever other tiles a filter left out."""
    n = min(n, int(np.count_nonzero(scores > 0)))
    if n <= 0:
        return []
    threshold = np.partition(scores, len(scores) - n)[len(scores) - n]
    best = np.flatnonzero(scores >= threshold)  # every tile tied with the n-th, so ties break by id
    best = best[np.lexsort((ids[best], -scores[best]))][:n]
    return [(int(ids[i]), float(scores[i])) for i in best]
