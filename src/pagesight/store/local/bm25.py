"""The local store's BM25 index over tile text, in segments, as Lucene and tantivy keep theirs.

Each commit's new tiles become a new segment (``store.local.segment``): their terms
(``encode.lexical.tokenize``, the same analysis for tiles and questions, phrases and all) with each
term's postings (``store.local.postings``), the tiles holding it and how often. A segment is never
changed again: a deleted tile is a bit of its delete bitset, which its searches skip, and segments
merge into larger ones by a tiered policy (``plan_merges``: ten of a size into one of the next
size, up to ``MAX_MERGED`` tiles; a segment more than half deleted alone), the deleted tiles left
out: small merges by the commit, larger ones in a process of their own (``store.local.merging``).
So a commit costs what it adds, not what the index holds.

A search scores with the statistics of the whole collection as it is, deletes honoured: the live
tiles, their mean length and each term's document frequency, read from the postings of every
segment the query's terms reach; a word's weight (``encode.lexical.burst_weights``, its
burstiness) comes from the same counts. The scores are bm25s' Lucene variant to the last float32
bit, so a collection ranks the same in one segment or twenty, and after any deletes as a
collection built without the deleted tiles. A large collection's commonest terms are not scanned
for every question: ``store.local.maxscore`` looks them up only for the tiles that can still make
the best, with the same scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pagesight.encode.lexical import BURST_FLOOR, BURST_SCALE, query_weights
from pagesight.store.local.maxscore import MaxScore
from pagesight.store.local.postings import analysed, term_hashes
from pagesight.store.local.segment import Segment
from pagesight.text.language import query_language

MERGE_FACTOR = 10  # segments of one tier merged into one of the next
SMALLEST_TIER = 1000  # tiles: segments up to this size are all of the first tier
MAX_MERGED = 50_000  # tiles: no merge makes a larger segment (its postings are merged in memory)


class LexicalRetriever:
    """BM25 over segments, their deletes honoured (the module docstring): a view of one set of
    ``store.local.segment.Segment``s, which a change replaces by a new set and a new view, so
    searches running over this one go on undisturbed."""

    def __init__(self, segments: Sequence[Segment], *, phrases: bool = False, term_weights: bool = False):
        self.segments = tuple(segments)
        self.postings = tuple(s.postings for s in segments)
        self.deleted = tuple(s.deleted for s in segments)
        self.phrases = phrases  # the index's phrase terms (encode.lexical.with_phrases)
        self.term_weights = term_weights  # words weigh by their burstiness (encode.lexical.burst_weights)
        self.live_tiles = sum(s.live for s in segments)
        self.live_length = float(
            sum(
                float(p.lengths[~deleted].sum(dtype=np.float64))
                for p, deleted in zip(self.postings, self.deleted)
            )
        )
        # the languages of its tiles' pages (text.language): a query is read in one of them
        self.languages = tuple(sorted({code for p in self.postings for code in p.languages} | {"en"}))
        self.bursts = Bursts(self) if term_weights else None
        self.dirty = [bool(deleted.any()) for deleted in self.deleted]  # which segments hold deleted tiles
        self._deleted_postings: dict[int, np.ndarray] = {}  # per dirty segment, made when first needed
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None  # tile ids sorted, and their places

    @classmethod
    def build(
        cls,
        tile_ids: np.ndarray,
        texts: list[str],
        phrases: bool = False,
        term_weights: bool = False,
        languages: list[str] | None = None,
    ) -> LexicalRetriever:
        """One segment of ``texts`` (the tiles' indexed text, ``encode.lexical.indexed_text``), each
        analysed in its language (``languages``; None: all English)."""
        return cls(
            [Segment.of(analysed(tile_ids, texts, phrases, languages))],
            phrases=phrases,
            term_weights=term_weights,
        )

    @property
    def tile_ids(self) -> np.ndarray:
        """Every tile of its segments, deleted ones too."""
        if not self.segments:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([p.tile_ids for p in self.postings])

    def counts(self, term: str) -> tuple[int, float]:
        """The live tiles holding ``term`` and its occurrences in them."""
        held, occurrences = 0, 0.0
        for i, _, _, starts, ends in self._spans(term_hashes([term])):
            part, start, end = self.postings[i], int(starts[0]), int(ends[0])
            tfs = part.tfs[start:end]
            if self.dirty[i]:
                tfs = tfs[~self.deleted[i][part.docs[start:end]]]
            held += len(tfs)
            occurrences += float(tfs.sum(dtype=np.float64))
        return held, occurrences

    def _spans(self, hashes: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """For each segment holding any of the terms ``hashes``: its position, which of the terms
        it holds (positions in ``hashes``), their rows in it, and where their postings start and end."""
        spans = []
        for i, part in enumerate(self.postings):
            if not len(part.terms):
                continue
            at = np.minimum(np.searchsorted(part.terms, hashes), len(part.terms) - 1)
            matched = np.flatnonzero(part.terms[at] == hashes)
            if len(matched):
                rows = at[matched]
                starts, ends = part.indptr[rows].astype(np.int64), part.indptr[rows + 1].astype(np.int64)
                spans.append((i, matched, rows, starts, ends))
        return spans

    def _held(self, spans: list, terms: int) -> np.ndarray:
        """Each term's live tiles over all segments (its document frequency, deletes honoured)."""
        held = np.zeros(terms, dtype=np.int64)
        for i, matched, rows, starts, ends in spans:
            held[matched] += ends - starts
            if self.dirty[i]:
                held[matched] -= self._deleted_counts(i)[rows]
        return held

    def _deleted_counts(self, i: int) -> np.ndarray:
        """For each term of segment ``i``, its postings of deleted tiles (counted once)."""
        if i not in self._deleted_postings:
            part = self.postings[i]
            deleted = self.deleted[i][part.docs].astype(np.int64)
            self._deleted_postings[i] = np.add.reduceat(deleted, part.indptr[:-1].astype(np.int64))
        return self._deleted_postings[i]

    @property
    def offsets(self) -> np.ndarray:
        """Where each segment's tiles start among all tiles (segment after segment): a tile's place."""
        return np.cumsum([0, *map(len, self.postings)])

    def places(self, tile_ids: np.ndarray) -> np.ndarray:
        """The places (``offsets``) of those of ``tile_ids`` held, sorted; found by bisection in the
        tile ids sorted once, not by testing every tile against them."""
        if self._sorted is None:
            every = self.tile_ids
            order = np.argsort(every, kind="stable")
            self._sorted = (every[order], order)
        ids, order = self._sorted
        wanted = np.asarray(tile_ids, dtype=np.int64)
        at = np.minimum(np.searchsorted(ids, wanted), max(0, len(ids) - 1))
        return np.sort(order[at[ids[at] == wanted]]) if len(ids) else np.zeros(0, dtype=np.int64)

    def search(
        self, query: str, n: int, allowed: np.ndarray | None = None, language: str | None = None
    ) -> list[tuple[int, float]]:
        """The ``n`` best (tile id, score) pairs with a positive score, best first; the query read in
        ``language`` (None: told from it, among the index's languages)."""
        if not self.live_tiles:
            return []
        language = language or query_language(query, self.languages)
        weights = query_weights(query, self.phrases, self.bursts, language)
        # bm25s' order: the words first, then the phrase terms
        ordered = [t for t in weights if " " not in t] + [t for t in weights if " " in t]
        spans = self._spans(term_hashes(ordered))
        held = self._held(spans, len(ordered))
        if not held.any():
            return []
        total, average = self.live_tiles, self.live_length / self.live_tiles
        # bm25s' arithmetic: idf in float32, each posting's score idf * tfc kept in float32, times
        # the term's weight and summed in float32, term after term
        idf = np.array(
            [np.float32(math.log(1 + (total - df + 0.5) / (df + 0.5))) for df in held.tolist()],
            dtype=np.float64,
        )
        weight = np.array([weights[term] for term in ordered], dtype=np.float32)
        return MaxScore(self, spans, idf, weight, average, allowed).top(n)


class Bursts:
    """A word's weight in a question (``encode.lexical.burst_weights``: ``BURST_FLOOR`` to 1), read
    from the collection's counts the first time it is asked: what ``burst_weights`` gives over the
    live tiles, without listing every word of the collection."""

    def __init__(self, lexical: LexicalRetriever):
        self.lexical = lexical
        self._known: dict[str, float | None] = {}

    def get(self, term: str, default: float | None = None) -> float | None:
        if term not in self._known:
            self._known[term] = self._weight(term)
        found = self._known[term]
        return default if found is None else found

    def _weight(self, term: str) -> float | None:
        if " " in term:  # phrase terms weigh by their words
            return None
        held, occurrences = self.lexical.counts(term)
        n = self.lexical.live_tiles
        if not held:
            return None
        residual = -math.log2(held / n) + math.log2(-math.expm1(-occurrences / n))
        weight = min(1.0, residual / BURST_SCALE)
        return round(weight, 4) if weight > BURST_FLOOR else None


def plan_merges(sizes: Sequence[int], deleted: Sequence[int]) -> list[list[int]]:
    """Which segments (by position) to merge: once a tier (sizes within a factor of ten, all up to
    ``SMALLEST_TIER`` in the first) holds ``MERGE_FACTOR``, its smallest into one, as many of them
    as fit in ``MAX_MERGED`` tiles (two at least); and a segment more than half deleted alone."""
    plans: list[list[int]] = []
    taken: set[int] = set()
    for i, (size, gone) in enumerate(zip(sizes, deleted)):
        if size and gone * 2 > size:
            plans.append([i])
            taken.add(i)
    tiers: dict[int, list[int]] = {}
    for i, (size, gone) in enumerate(zip(sizes, deleted)):
        if i not in taken:
            tiers.setdefault(int(math.log10(max(size - gone, SMALLEST_TIER) / SMALLEST_TIER)), []).append(i)
    for members in tiers.values():
        members.sort(key=lambda i: sizes[i] - deleted[i])
        while len(members) >= MERGE_FACTOR:
            group, total = [], 0
            for i in members[:MERGE_FACTOR]:  # the smallest, as many as fit in MAX_MERGED
                if total + sizes[i] - deleted[i] <= MAX_MERGED:
                    group.append(i)
                    total += sizes[i] - deleted[i]
            if len(group) < 2:
                break
            plans.append(group)
            members = [i for i in members if i not in group]
    return plans
