"""A segment's BM25 postings: each term of its tiles (a 64-bit hash of it) with the tiles holding
it and how often, in arrays mapped from the segment's files.

Terms are kept by a 64-bit hash of each, sorted (``term_hashes``): words and phrase terms alike, 16
bytes a term and no dictionary of strings (IRPAPERS has 464,000 pair types beside 40,000 words).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pagesight.encode.lexical import tokenize

FILES = ("tile_ids", "lengths", "terms", "indptr", "docs", "tfs")


def _narrow(values) -> np.ndarray:
    """Non-negative integers (counts and positions, perhaps as floats) in the narrowest unsigned type
    that holds the largest of them."""
    values = np.asarray(values)
    top = int(values.max()) if len(values) else 0
    return values.astype(np.min_scalar_type(top))


@dataclass(frozen=True)
class Postings:
    """The BM25 postings of a segment's tiles, never changed once made: ``terms`` (sorted hashes), ``indptr`` (where
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

    def __len__(self) -> int:
        return len(self.tile_ids)

    @classmethod
    def build(cls, tile_ids: np.ndarray, tokens: Sequence[list[str]], languages: Sequence[str]) -> Postings:
        """The segment of tiles ``tile_ids`` whose analysed terms are ``tokens``."""
        vocab: dict[str, int] = {}
        flat = [vocab.setdefault(term, len(vocab)) for terms in tokens for term in terms]
        lengths = np.array([len(terms) for terms in tokens], dtype=np.int64)
        held = tuple(sorted(set(languages) | {"en"}))
        if not vocab:
            return cls._of(tile_ids, lengths, np.zeros(0, np.uint64), [], [], [], held)
        terms, rank = np.unique(term_hashes(list(vocab)), return_inverse=True)
        n = max(1, len(tile_ids))
        key = rank[np.asarray(flat, dtype=np.int64)].astype(np.int64) * n + np.repeat(
            np.arange(len(tile_ids), dtype=np.int64), lengths
        )
        pairs, counts = np.unique(key, return_counts=True)
        return cls._of(tile_ids, lengths, terms, pairs // n, pairs % n, counts, held)

    @classmethod
    def _of(cls, tile_ids, lengths, terms, term_of, docs, tfs, languages) -> Postings:
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
    def merge(cls, parts: Sequence[tuple[Postings, np.ndarray]]) -> Postings:
        """One segment of the live tiles of ``parts`` (each with its delete bitset), from their
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

    def save(self, folder: Path) -> None:
        """Written to ``folder`` (new)."""
        folder.mkdir(parents=True)
        for name in FILES:
            np.save(folder / f"{name}.npy", getattr(self, name))
        (folder / "segment.json").write_text(json.dumps({"tiles": len(self), "languages": self.languages}))

    @classmethod
    def load(cls, folder: Path) -> Postings:
        """The segment saved in ``folder``, its arrays mapped from the files, not read: a search
        reads the postings of its terms, and processes share the pages (a merge may remove the
        files meanwhile; a mapping outlives its file)."""
        about = json.loads((folder / "segment.json").read_text())
        # plain arrays over the mappings: np.memmap's own slicing costs microseconds a call
        arrays = [np.load(folder / f"{name}.npy", mmap_mode="r").view(np.ndarray) for name in FILES]
        return cls(*arrays, tuple(about["languages"]))


def analysed(tile_ids: np.ndarray, texts: list[str], phrases: bool, languages: list[str] | None) -> Postings:
    """The segment of tiles ``tile_ids`` of indexed text ``texts``, each in its language."""
    return Postings.build(tile_ids, tokenize(texts, phrases, languages), languages or ["en"] * len(texts))


def term_hashes(terms: list[str]) -> np.ndarray:
    """A stable 64-bit hash of each term."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little") for t in terms],
        dtype=np.uint64,
    )
