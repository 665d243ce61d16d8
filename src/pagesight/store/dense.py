"""The local store's dense text index: every chunk vector of every tile in an exact FAISS
inner-product index whose ids are tile ids, so a tile scores as its best chunk."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np


class DenseRetriever:
    """Exact inner-product search over chunk vectors; FAISS ids are tile ids (one per chunk)."""

    def __init__(self, index: faiss.IndexIDMap2):
        self.index = index

    @classmethod
    def empty(cls, dim: int) -> DenseRetriever:
        return cls(faiss.IndexIDMap2(faiss.IndexFlatIP(dim)))

    def tile_ids(self) -> np.ndarray:
        return faiss.vector_to_array(self.index.id_map).astype(np.int64)

    def add(self, tile_ids: np.ndarray, vectors: np.ndarray) -> None:
        if len(tile_ids):
            self.index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), tile_ids)

    def remove(self, tile_ids: np.ndarray) -> None:
        if len(tile_ids):
            self.index.remove_ids(faiss.IDSelectorBatch(tile_ids))

    def save(self, path: Path) -> None:
        faiss.write_index(self.index, str(path))

    @classmethod
    def load(cls, path: Path) -> DenseRetriever:
        return cls(faiss.read_index(str(path)))

    def search(
        self, query_vector: np.ndarray, n: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The ``n`` best (tile id, best chunk score) pairs, best first."""
        if self.index.ntotal == 0:
            return []
        params = None
        if allowed is not None:
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed.astype(np.int64)))
        # Several chunks of one tile may rank high: ask for more chunks than tiles wanted.
        wanted = min(self.index.ntotal, n * 4)
        scores, ids = self.index.search(query_vector.reshape(1, -1).astype(np.float32), wanted, params=params)
        best: dict[int, float] = {}
        for tile_id, score in zip(ids[0].tolist(), scores[0].tolist()):
            if tile_id >= 0 and tile_id not in best:
                best[tile_id] = score
        return list(best.items())[:n]
