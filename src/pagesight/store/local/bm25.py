"""The local store's BM25 index over tile text, in segments, as Lucene and tantivy keep theirs.

Each commit's new tiles become a new segment: their terms (``encode.lexical.tokenize``, the same
analysis for tiles and questions, phrases and all) with each term's postings, the tiles holding it
and how often. A segment is never changed again: a deleted tile is a tombstone its segment's
searches skip, and segments merge into larger ones by a tiered policy (``plan_merges``: ten of a
size into one of the next size, up to ``MAX_MERGED`` tiles; a segment more than half deleted
alone), the tombstoned tiles left out: small merges by the commit, larger ones in a process of
their own (``store.merging``). So a commit costs what it adds, not what the index holds.

A search scores with the statistics of the whole collection as it is, deletes honoured: the live
tiles, their mean length and each term's document frequency, read from the postings of every
segment the query's terms reach; a word's weight (``encode.lexical.burst_weights``, its
burstiness) comes from the same counts. The scores are bm25s' Lucene variant to the last float32
bit, so a collection ranks the same in one segment or twenty, and after any deletes as a
collection built without the deleted tiles. A large collection's commonest terms are not scanned
for every question: ``store.maxscore`` looks them up only for the tiles that can still make the
best, with the same scores.

Terms are kept by a 64-bit hash of each, sorted (``_hashes``): words and phrase terms alike, 16
bytes a term and no dictionary of strings (IRPAPERS has 464,000 pair types beside 40,000 words).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pagesight.encode.lexical import BURST_FLOOR, BURST_SCALE, query_weights, tokenize
from pagesight.store.local.maxscore import MaxScore
from pagesight.text.language import query_language

MERGE_FACTOR = 10  # segments of one tier merged into one of the next
SMALLEST_TIER = 1000  # tiles: segments up to this size are all of the first tier
MAX_MERGED = 50_000  # tiles: no merge makes a larger segment (its postings are merged in memory)
FILES = ("tile_ids", "lengths", "terms", "indptr", "docs", "tfs")


def _narrow(values) -> np.ndarray:
    """Non-negative integers (counts and positions, perhaps as floats) in the narrowest unsigned type
    that holds the largest of them."""
    values = np.asarray(values)
    top = int(values.max()) if len(values) else 0
    return values.astype(np.min_scalar_type(top))


@dataclass(frozen=True)
class Segment:
    """Postings of some tiles, never changed once made: ``terms`` (sorted hashes), ``indptr`` (where
    each term's postings start in ``docs`` and ``tfs``), ``docs`` (positions in ``tile_ids``, sorted
    within a term), ``tfs`` (the term's count in that tile), ``lengths`` (each tile's terms).

    ``indptr``, ``docs`` and ``tfs`` are each kept in the narrowest unsigned integer type that holds
    their values (``_narrow``): a segment of up to 65,536 tiles names a tile in 2 bytes and a count
    mostly takes one, 3 bytes a posting instead of 8 (segments written before were int32 and
    float32, and are read as they are). Scores are the same: a count is the same number in any type."""

    tile_ids: np.ndarray  # int64
    lengths: np.ndarray  # float32
    terms: np.ndarray  # uint64, sorted
    indptr: np.ndarray  # unsigned, len(terms) + 1
    docs: np.ndarray  # unsigned (int32 in older segments)
    tfs: np.ndarray  # unsigned (float32 in older segments)
    languages: tuple[str, ...]
    name: str | None = None  # its folder under retrievers/, once saved

    def __len__(self) -> int:
        return len(self.tile_ids)

    @classmethod
    def build(cls, tile_ids: np.ndarray, tokens: Sequence[list[str]], languages: Sequence[str]) -> Segment:
        """The segment of tiles ``tile_ids`` whose analysed terms are ``tokens``."""
        vocab: dict[str, int] = {}
        flat = [vocab.setdefault(term, len(vocab)) for terms in tokens for term in terms]
        lengths = np.array([len(terms) for terms in tokens], dtype=np.int64)
        held = tuple(sorted(set(languages) | {"en"}))
        if not vocab:
            return cls._of(tile_ids, lengths, np.zeros(0, np.uint64), [], [], [], held)
        terms, rank = np.unique(_hashes(list(vocab)), return_inverse=True)
        n = max(1, len(tile_ids))
        key = rank[np.asarray(flat, dtype=np.int64)].astype(np.int64) * n + np.repeat(
            np.arange(len(tile_ids), dtype=np.int64), lengths
        )
        pairs, counts = np.unique(key, return_counts=True)
        return cls._of(tile_ids, lengths, terms, pairs // n, pairs % n, counts, held)

    @classmethod
    def _of(cls, tile_ids, lengths, terms, term_of, docs, tfs, languages) -> Segment:
        """A segment from postings sorted by term, then tile (``term_of``: each one's term index)."""
        counts = np.bincount(np.asarray(term_of, dtype=np.int64), minlength=len(terms))
        return cls(
            np.asarray(tile_ids, dtype=np.int64),
            np.asarray(lengths, dtype=np.float32),
            terms,
            _narrow(np.concatenate([[0], np.cumsum(counts)])),
            _narrow(docs),
            _narrow(tfs),
            languages,
        )

    @classmethod
    def merge(cls, parts: Sequence[tuple[Segment, np.ndarray]]) -> Segment:
        """One segment of the live tiles of ``parts`` (each a segment and its tombstones), from their
        postings: nothing is analysed again."""
        tile_ids, lengths, hashes, docs, tfs, languages = [], [], [], [], [], set()
        offset = 0
        for segment, removed in parts:
            live = ~removed
            position = np.full(len(segment), -1, dtype=np.int64)
            position[live] = np.arange(int(live.sum())) + offset
            of_posting = np.repeat(segment.terms, np.diff(segment.indptr))
            kept = live[segment.docs]
            hashes.append(of_posting[kept])
            docs.append(position[segment.docs[kept]])
            tfs.append(segment.tfs[kept])
            tile_ids.append(segment.tile_ids[live])
            lengths.append(segment.lengths[live])
            languages.update(segment.languages)
            offset += int(live.sum())
        hashes, docs, tfs = np.concatenate(hashes), np.concatenate(docs), np.concatenate(tfs)
        order = np.lexsort((docs, hashes))
        terms, term_of = np.unique(hashes[order], return_inverse=True)
        return cls._of(
            np.concatenate(tile_ids),
            np.concatenate(lengths),
            terms,
            term_of,
            docs[order],
            tfs[order],
            tuple(sorted(languages)),
        )

    def save(self, folder: Path) -> Segment:
        """Written to ``folder`` (new), and named after it."""
        folder.mkdir(parents=True)
        for name in FILES:
            np.save(folder / f"{name}.npy", getattr(self, name))
        (folder / "segment.json").write_text(json.dumps({"tiles": len(self), "languages": self.languages}))
        return Segment(*(getattr(self, name) for name in FILES), self.languages, folder.name)

    @classmethod
    def load(cls, folder: Path) -> Segment:
        """The segment saved in ``folder``, its arrays mapped from the files, not read: a search
        reads the postings of its terms, and processes share the pages (a merge may remove the
        files meanwhile; a mapping outlives its file)."""
        about = json.loads((folder / "segment.json").read_text())
        # plain arrays over the mappings: np.memmap's own slicing costs microseconds a call
        arrays = [np.load(folder / f"{name}.npy", mmap_mode="r").view(np.ndarray) for name in FILES]
        return cls(*arrays, tuple(about["languages"]), folder.name)


class LexicalRetriever:
    """BM25 over segments and their tombstones (the module docstring). Immutable in use: adding a
    segment, removing tiles or merging gives a new retriever, so searches running over this one
    go on undisturbed."""

    def __init__(
        self,
        segments: Sequence[Segment],
        removed: Sequence[np.ndarray] | None = None,
        *,
        phrases: bool = False,
        term_weights: bool = False,
    ):
        self.segments = tuple(segments)
        self.removed = (
            tuple(removed) if removed is not None else tuple(np.zeros(len(s), bool) for s in segments)
        )
        self.phrases = phrases  # the index's phrase terms (encode.lexical.with_phrases)
        self.term_weights = term_weights  # words weigh by their burstiness (encode.lexical.burst_weights)
        live = [~gone for gone in self.removed]
        self.live_tiles = sum(int(mask.sum()) for mask in live)
        self.live_length = float(
            sum(float(s.lengths[mask].sum(dtype=np.float64)) for s, mask in zip(segments, live))
        )
        # the languages of its tiles' pages (text.language): a query is read in one of them
        self.languages = tuple(sorted({code for s in segments for code in s.languages} | {"en"}))
        self.bursts = Bursts(self) if term_weights else None
        self.dirty = [bool(gone.any()) for gone in self.removed]  # which segments hold tombstones
        self._gone_postings: dict[int, np.ndarray] = {}  # per dirty segment, made when first needed
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
        return cls([segment(tile_ids, texts, phrases, languages)], phrases=phrases, term_weights=term_weights)

    @property
    def tile_ids(self) -> np.ndarray:
        """Every tile of its segments, tombstoned ones too."""
        if not self.segments:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([s.tile_ids for s in self.segments])

    def with_segment(self, added: Segment) -> LexicalRetriever:
        return self._like([*self.segments, added], [*self.removed, np.zeros(len(added), bool)])

    def remove(self, tile_ids: np.ndarray) -> LexicalRetriever:
        """This retriever with ``tile_ids`` tombstoned."""
        gone = np.asarray(tile_ids, dtype=np.int64)
        return self._like(
            self.segments, [was | np.isin(s.tile_ids, gone) for s, was in zip(self.segments, self.removed)]
        )

    def merges(self) -> list[list[int]]:
        """The merges due (``plan_merges``), each a list of segment positions."""
        return plan_merges([len(s) for s in self.segments], [int(r.sum()) for r in self.removed])

    def live(self, plan: list[int]) -> int:
        """The live tiles of the segments at positions ``plan``."""
        return sum(len(self.segments[i]) - int(self.removed[i].sum()) for i in plan)

    def merged(self, plans: list[list[int]]) -> LexicalRetriever:
        """Its segments merged as ``plans`` say (of ``merges``): the segments not merged in their
        order, then each plan's merged segment."""
        if not plans:
            return self
        merged = {i for plan in plans for i in plan}
        segments = [s for i, s in enumerate(self.segments) if i not in merged]
        removed = [r for i, r in enumerate(self.removed) if i not in merged]
        for plan in plans:
            segments.append(Segment.merge([(self.segments[i], self.removed[i]) for i in plan]))
            removed.append(np.zeros(len(segments[-1]), bool))
        return self._like(segments, removed)

    def swapped(self, positions: list[int], merged: Segment) -> LexicalRetriever:
        """The segments at ``positions`` replaced by ``merged``, a merge of them made elsewhere
        (``store.merging``), last as ``merged`` puts it; their tiles tombstoned since that merge
        read them stay tombstoned in it."""
        gone = np.concatenate([self.segments[i].tile_ids[self.removed[i]] for i in positions])
        segments = [s for i, s in enumerate(self.segments) if i not in positions] + [merged]
        removed = [r for i, r in enumerate(self.removed) if i not in positions]
        return self._like(segments, [*removed, np.isin(merged.tile_ids, gone)])

    def named(self, segments: list[Segment]) -> LexicalRetriever:
        """The same segments, as saved (``segments``: each one's copy with its name)."""
        return self._like(segments, self.removed)

    def taking(self, positions: list[int]) -> LexicalRetriever:
        """The segments at ``positions`` alone (a merge that left an empty one, dropped)."""
        return self._like([self.segments[i] for i in positions], [self.removed[i] for i in positions])

    def _like(self, segments, removed) -> LexicalRetriever:
        return LexicalRetriever(segments, removed, phrases=self.phrases, term_weights=self.term_weights)

    def counts(self, term: str) -> tuple[int, float]:
        """The live tiles holding ``term`` and its occurrences in them."""
        held, occurrences = 0, 0.0
        for i, _, _, starts, ends in self._spans(_hashes([term])):
            part, start, end = self.segments[i], int(starts[0]), int(ends[0])
            tfs = part.tfs[start:end]
            if self.dirty[i]:
                tfs = tfs[~self.removed[i][part.docs[start:end]]]
            held += len(tfs)
            occurrences += float(tfs.sum(dtype=np.float64))
        return held, occurrences

    def _spans(self, hashes: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """For each segment holding any of the terms ``hashes``: its position, which of the terms
        it holds (positions in ``hashes``), their rows in it, and where their postings start and end."""
        spans = []
        for i, part in enumerate(self.segments):
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
                held[matched] -= self._tombstoned(i)[rows]
        return held

    def _tombstoned(self, i: int) -> np.ndarray:
        """For each term of segment ``i``, its postings of tombstoned tiles (counted once)."""
        if i not in self._gone_postings:
            part = self.segments[i]
            gone = self.removed[i][part.docs].astype(np.int64)
            self._gone_postings[i] = np.add.reduceat(gone, part.indptr[:-1].astype(np.int64))
        return self._gone_postings[i]

    @property
    def offsets(self) -> np.ndarray:
        """Where each segment's tiles start among all tiles (segment after segment): a tile's place."""
        return np.cumsum([0, *map(len, self.segments)])

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
        spans = self._spans(_hashes(ordered))
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


def segment(tile_ids: np.ndarray, texts: list[str], phrases: bool, languages: list[str] | None) -> Segment:
    """The segment of tiles ``tile_ids`` of indexed text ``texts``, each in its language."""
    return Segment.build(tile_ids, tokenize(texts, phrases, languages), languages or ["en"] * len(texts))


def plan_merges(sizes: Sequence[int], removed: Sequence[int]) -> list[list[int]]:
    """Which segments (by position) to merge: once a tier (sizes within a factor of ten, all up to
    ``SMALLEST_TIER`` in the first) holds ``MERGE_FACTOR``, its smallest into one, as many of them
    as fit in ``MAX_MERGED`` tiles (two at least); and a segment more than half deleted alone."""
    plans: list[list[int]] = []
    taken: set[int] = set()
    for i, (size, gone) in enumerate(zip(sizes, removed)):
        if size and gone * 2 > size:
            plans.append([i])
            taken.add(i)
    tiers: dict[int, list[int]] = {}
    for i, (size, gone) in enumerate(zip(sizes, removed)):
        if i not in taken:
            tiers.setdefault(int(math.log10(max(size - gone, SMALLEST_TIER) / SMALLEST_TIER)), []).append(i)
    for members in tiers.values():
        members.sort(key=lambda i: sizes[i] - removed[i])
        while len(members) >= MERGE_FACTOR:
            group, total = [], 0
            for i in members[:MERGE_FACTOR]:  # the smallest, as many as fit in MAX_MERGED
                if total + sizes[i] - removed[i] <= MAX_MERGED:
                    group.append(i)
                    total += sizes[i] - removed[i]
            if len(group) < 2:
                break
            plans.append(group)
            members = [i for i in members if i not in group]
    return plans


def _hashes(terms: list[str]) -> np.ndarray:
    """A stable 64-bit hash of each term."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little") for t in terms],
        dtype=np.uint64,
    )
