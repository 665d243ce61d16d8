"""The local store's dense text index: every chunk vector of every tile in a ``VectorIndex``, so a
tile scores as its best chunk.

A tile's text is cut into overlapping chunks (``encode.dense.chunk_words``), each with its own
vector. The vector index wants one id per vector, so chunk ``c`` of tile ``t`` has id
``t * CHUNKS + c``; a search asks for more chunks than tiles wanted and keeps each tile's best.
Vectors are kept as float16 (half the bytes; searched faster than float32, 9 against 22 ms a query
over 539,452 vectors). A part is exact below ``IVF_FROM`` chunk vectors, the size of a commit's or
a small merge's part; a bigger one (the merging process's) is an IVF index visiting ``NPROBE``
cells, which over the 270,000 chunk vectors of a 50,000-tile part finds 99.6 % of the exact
top 10 and 99.1 % of the top 40 in 0.4 ms a query (BENCHMARKS.md, "Scale"). Inner product on
MiniLM's unit vectors as stored (no second normalisation, so scores are the model's cosines).

Files written before the ``VectorIndex`` (a bare FAISS ``IndexIDMap2`` whose ids were tile ids,
one per chunk) are read and converted, so an older index searches the same.

Each segment of the local store holds such an index of its tiles (``store.local.segment``): a
commit adds the segment of its new tiles, a merge joins the parts of the segments it merges
(``segment.joins``), and a search asks every part and keeps the best (``DenseSegments``), so
a commit never rewrites the vectors already written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from pagesight.errors import IndexFormatError
from pagesight.store.base import Effort
from pagesight.store.local.layout import DENSE
from pagesight.store.local.parts import Saved
from pagesight.vectors import VectorIndex
from pagesight.vectors.maxsim import runs

CHUNKS = 1 << 12  # most chunks of one tile: 4,096 chunks of 120 words, far beyond a page's text
IVF_FROM = 100_000  # chunk vectors (about 18,000 tiles) from which a part is an IVF index
NPROBE = 128  # a search's Effort.nprobe (SearchRequest.nprobe) in its place
EXACT_FILTER = 50_000  # a filter allowing up to this many of a part's chunks scores them exactly


class DenseRetriever:
    """Exact inner-product search over chunk vectors, answered per tile (its best chunk)."""

    def __init__(self, index: VectorIndex):
        self.index = index
        self._chunk_ids: np.ndarray | None = None  # the live chunk ids, sorted; None when stale

    @classmethod
    def empty(cls, dim: int) -> DenseRetriever:
        return cls(
            VectorIndex(
                dim,
                kind="ivf",
                storage="fp16",
                normalize=False,
                train_threshold=IVF_FROM,
                nprobe=NPROBE,
                exact_filter_limit=EXACT_FILTER,
            )
        )

    def __len__(self) -> int:
        return len(self.index)

    def _chunks(self) -> np.ndarray:
        if self._chunk_ids is None:
            self._chunk_ids = self.index.ids()
        return self._chunk_ids

    def _chunks_of(self, tile_ids: np.ndarray) -> np.ndarray:
        """The chunk ids of ``tile_ids`` held here, found by bisection in the sorted chunk ids (a
        tile's are the ids from tile * CHUNKS on), not by testing every chunk: a filter passing 1 %
        of a 1,000,000-tile index took 151 ms a search over 5.4 M chunk ids."""
        chunks, tiles = self._chunks(), tile_ids
        if len(tiles) > 1 and not (np.diff(tiles) > 0).all():  # DenseSegments gives them sorted, once
            tiles = np.unique(tiles)
        starts = np.searchsorted(chunks, tiles * CHUNKS)
        counts = np.searchsorted(chunks, (tiles + 1) * CHUNKS) - starts
        return chunks[runs(starts, counts)]

    def tile_ids(self) -> np.ndarray:
        """The tiles held, sorted, each once."""
        return np.unique(self._chunks() // CHUNKS)

    def add(self, tile_ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add chunk vectors: ``tile_ids`` names the tile of each row, a tile's rows together."""
        tile_ids = np.asarray(tile_ids, dtype=np.int64)
        if not len(tile_ids):
            return
        starts = np.r_[0, np.flatnonzero(np.diff(tile_ids)) + 1]
        first = np.repeat(starts, np.diff(np.r_[starts, len(tile_ids)]))
        chunk = np.arange(len(tile_ids)) - first
        if chunk.max() >= CHUNKS:
            raise ValueError(
                f"tile {int(tile_ids[first[chunk.argmax()]])} has more than {CHUNKS} text chunks"
            )
        self.index.add(tile_ids * CHUNKS + chunk, np.asarray(vectors, dtype=np.float32))
        self._chunk_ids = None

    def remove(self, tile_ids: np.ndarray) -> None:
        """Remove every chunk of ``tile_ids`` (a part holding none of them is left as it is)."""
        if not len(tile_ids):
            return
        held = self._chunks_of(np.asarray(tile_ids, dtype=np.int64))
        if len(held):
            self.index.remove(held)
            self._chunk_ids = None

    def search(
        self,
        query_vector: np.ndarray,
        n: int,
        allowed: np.ndarray | None = None,
        effort: Effort | None = None,
    ) -> list[tuple[int, float]]:
        """The ``n`` best (tile id, best chunk score) pairs, best first; ``effort``'s ``nprobe`` for
        an IVF part (its ``ef`` and ``ef_search`` have no structure here)."""
        allowed_chunks = None
        if allowed is not None:
            allowed_chunks = self._chunks_of(np.asarray(allowed, dtype=np.int64))
            if not len(allowed_chunks):
                return []
        return self.search_chunks(query_vector, n, allowed_chunks, effort)

    def search_chunks(
        self,
        query_vector: np.ndarray,
        n: int,
        allowed_chunks: np.ndarray | None = None,
        effort: Effort | None = None,
    ) -> list[tuple[int, float]]:
        """``search`` within the chunk ids ``allowed_chunks`` (of ``_chunks_of``; None: all)."""
        if not len(self.index):
            return []
        # Several chunks of one tile may rank high: ask for more chunks than tiles wanted.
        wanted = min(len(self.index), n * 4)
        nprobe = effort.nprobe if effort is not None else None
        scores, ids = self.index.search(
            query_vector.reshape(1, -1), wanted, allowed_ids=allowed_chunks, nprobe=nprobe
        )
        found = ids[0] >= 0
        tiles, scores = ids[0][found] // CHUNKS, scores[0][found]
        first = np.sort(np.unique(tiles, return_index=True)[1])[:n]  # each tile at its best chunk
        return list(zip(tiles[first].tolist(), scores[first].tolist()))

    def save(self, path: Path) -> None:
        self.index.save(path)

    @classmethod
    def joined(cls, parts: list[DenseRetriever], dim: int) -> DenseRetriever:
        """One index of the live chunks of ``parts``, added at once (an IVF index trains on them all)."""
        joined = cls.empty(dim)
        ids = [part.index.ids() for part in parts]
        if sum(map(len, ids)):
            joined.index.add(
                np.concatenate(ids), np.concatenate([p.index.fetch(i) for p, i in zip(parts, ids)])
            )
        return joined

    @classmethod
    def load(cls, path: Path | BinaryIO) -> DenseRetriever:
        """The part saved at ``path``, or in an open binary file."""
        try:
            return cls(VectorIndex.load(path))
        except IndexFormatError:
            return cls._from_faiss(path)

    @classmethod
    def _from_faiss(cls, path: Path | BinaryIO) -> DenseRetriever:
        """A file of the format before (a FAISS IndexIDMap2 of tile ids over a flat index)."""
        import faiss

        try:
            if hasattr(path, "read"):
                path.seek(0)
                old = faiss.read_index(faiss.PyCallbackIOReader(path.read))
            else:
                old = faiss.read_index(str(path))
        except RuntimeError as error:
            raise IndexFormatError(f"{path} is neither a vector index nor a FAISS index: {error}") from None
        tile_ids = faiss.vector_to_array(old.id_map).astype(np.int64)
        order = np.argsort(tile_ids, kind="stable")  # a tile's chunks together, in their order
        vectors = old.index.reconstruct_n(0, old.ntotal) if old.ntotal else np.zeros((0, old.d), np.float32)
        converted = cls.empty(old.d)
        converted.add(tile_ids[order], vectors[order])
        return converted


def _best_tiles(
    query: np.ndarray, parts: list[tuple[DenseRetriever, np.ndarray]], n: int
) -> list[tuple[int, float]]:
    """The ``n`` best tiles of the chunks given for each part (sorted, live), each chunk scored
    exactly, a tile by its best: one ranking over every part, no per-part search (a filter passing
    1 % of a 1,000,000-tile index's documents reaches 54,000 chunks in 23 parts)."""
    if not parts:
        return []
    ids = np.concatenate([chunks for _, chunks in parts])
    scores = np.concatenate([part.index.scores(query, chunks) for part, chunks in parts])
    tiles = ids // CHUNKS  # a tile's chunks are together, in one part
    starts = np.flatnonzero(np.r_[True, tiles[1:] != tiles[:-1]])
    best, tiles = np.maximum.reduceat(scores, starts), tiles[starts]
    keep = np.lexsort((tiles, -best))[:n]  # ties by tile id
    return list(zip(tiles[keep].tolist(), best[keep].tolist()))


class DenseSegments:
    """The dense index of a set of segments, each holding the part of its tiles
    (``Segment.part(DENSE)``): searched part by part, the best tiles kept."""

    def __init__(self, segments: Sequence, dim: int):
        self.segments = tuple(segments)
        self.dim = dim

    def search(
        self,
        query_vector: np.ndarray,
        n: int,
        allowed: np.ndarray | None = None,
        effort: Effort | None = None,
    ) -> list[tuple[int, float]]:
        """The ``n`` best (tile id, best chunk score) pairs of all parts, best first, each IVF part
        visiting ``effort.nprobe`` cells (None: ``NPROBE``). A filter's chunks are scored exactly
        from their stored vectors, every part's at once, where a part holds up to ``EXACT_FILTER``
        of them; a part holding more searches them itself."""
        parts = [segment.part(DENSE) for segment in self.segments]
        if allowed is None:
            found = [hit for part in parts for hit in part.search(query_vector, n, effort=effort)]
        else:
            allowed = np.unique(np.asarray(allowed, dtype=np.int64))  # listed once
            found, few = [], []
            for part in parts:
                chunks = part._chunks_of(allowed)
                if len(chunks) > EXACT_FILTER:
                    found.extend(part.search_chunks(query_vector, n, chunks, effort))
                elif len(chunks):
                    few.append((part, chunks))
            found.extend(_best_tiles(query_vector, few, n))
        found.sort(key=lambda hit: (-hit[1], hit[0]))
        return found[:n]


def stored(path: Path) -> Saved:
    """The dense part saved at ``path``, opened, read when first asked for."""
    return Saved(path, DenseRetriever.load)
