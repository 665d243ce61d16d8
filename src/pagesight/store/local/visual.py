"""The visual retriever of an index: the page-image vectors of one visual encoder, searchable.

Single-vector encoders (DSE, Qwen3-VL-Embedding, VisRAG-Ret, jina-embeddings-v4, CLIP, SigLIP) go
into a ``VectorIndex`` of the index's chosen kind (exact while small, then the ANN structure). Late
interaction encoders (ColQwen2, ...) go into a ``MuveraRetriever``: MUVERA encodings find candidates
and exact MaxSim over the stored multi-vectors ranks them, so an index smaller than ``ef`` pages is
searched exactly. A filter to some documents scores the allowed tiles exactly when they are few.

Ids are tile ids of the catalog, which are never reused, so a retriever file can never mix tiles up.

Each segment of the local store holds such a retriever of its tiles (``store.local.segment``), so
a commit adds the segment of its new tiles and never rewrites the vectors already written; a merge
joins the parts' stored vectors into one retriever (``segment.joins``; an ``ivfpq`` part's
are its codes' approximations: joined again, they are coded again).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from pagesight.store.base import Effort
from pagesight.store.local.layout import VISUAL
from pagesight.store.local.parts import Held, Saved
from pagesight.vectors import Muvera, MuveraRetriever, VectorIndex, maxsim

# Allowed tiles up to this many are scored exactly by MaxSim rather than searched through MUVERA.
_EXACT_FILTER_LIMIT = 4096
# MUVERA candidates rescored by exact MaxSim (at least the number of tiles asked for); a search's
# Effort.ef (SearchRequest.ef) in its place.
_EF = 512


class VisualRetriever:
    """Tile vectors of one encoder (``multi_vector`` or not) in a ``VectorIndex`` or MUVERA."""

    def __init__(self, engine: VectorIndex | MuveraRetriever):
        self.engine = engine
        self.multi_vector = isinstance(engine, MuveraRetriever)

    @classmethod
    def empty(
        cls,
        dim: int,
        multi_vector: bool,
        kind: str = "hnsw",
        multi_vector_storage: str = "float16",
        muvera: Mapping[str, int] | None = None,
    ) -> VisualRetriever:
        """An empty retriever for ``dim``-dimensional vectors, the ANN structure of ``kind``; token
        vectors searched as ``multi_vector_storage`` (``vectors.quantize``), found by MUVERA
        encodings of ``muvera``'s ``reps``, ``k_sim`` and ``d_proj`` (``Muvera``'s defaults for
        those not given; ``d_proj`` at most ``dim``)."""
        storage = "pq" if kind == "ivfpq" else "fp16"
        if multi_vector:
            encoding = dict(muvera or {})
            if "d_proj" in encoding:
                encoding["d_proj"] = min(encoding["d_proj"], dim)
            encoder = Muvera(dim, **encoding)
            index = VectorIndex(encoder.output_dim, kind=kind, storage=storage, normalize=False)
            return cls(MuveraRetriever(encoder, index=index, storage=multi_vector_storage))
        return cls(VectorIndex(dim, kind=kind, storage=storage))

    def __len__(self) -> int:
        return len(self.engine)

    def tile_ids(self) -> np.ndarray:
        return self.engine.ids()

    def add(self, tile_ids: np.ndarray, vectors: Sequence[np.ndarray]) -> None:
        """Add tiles with one array each: ``(dim,)``, or ``(n, dim)`` for a multi-vector encoder."""
        if not len(tile_ids):
            return
        if self.multi_vector:
            self.engine.add(tile_ids, list(vectors))
        else:
            self.engine.add(tile_ids, np.stack([np.asarray(v).reshape(-1) for v in vectors]))

    def remove(self, tile_ids: np.ndarray) -> None:
        if len(tile_ids):
            self.engine.remove(tile_ids)

    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None, effort: Effort | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` best tiles for one encoded query, as (tile id, score), best first; ``effort``:
        MUVERA's ``ef`` (default ``_EF``) and the vector index's ``nprobe`` or ``ef_search``."""
        if not len(self):
            return []
        effort = effort or Effort()
        structure = {"nprobe": effort.nprobe, "ef_search": effort.ef_search}
        allowed = None if allowed is None else np.asarray(allowed)  # an Allowed lists its tiles
        if not self.multi_vector:
            scores, ids = self.engine.search(query.reshape(1, -1), k, allowed_ids=allowed, **structure)
            return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
        if allowed is not None:
            # The allowed tiles this index holds, sorted, without listing all it holds.
            allowed = np.array([i for i in np.unique(allowed).tolist() if i in self.engine], dtype=np.int64)
            if len(allowed) <= _EXACT_FILTER_LIMIT:
                if not len(allowed):
                    return []
                scores = maxsim([query], self.engine.multivectors(allowed))[0]
                best = np.argsort(-scores, kind="stable")[:k]
                return [(int(allowed[i]), float(scores[i])) for i in best]
        # A large filter: widen the candidate pool, then keep the allowed tiles.
        wanted = k if allowed is None else min(len(self), k * 8)
        scores, ids = self.engine.search([query], wanted, ef=max(effort.ef or _EF, wanted), **structure)
        found = [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
        if allowed is not None:
            keep = set(allowed.tolist())
            found = [pair for pair in found if pair[0] in keep]
        return found[:k]

    def vectors(self, tile_ids: np.ndarray) -> list[np.ndarray]:
        """The stored vectors of live ``tile_ids``, one array each, as ``add`` takes them."""
        if self.multi_vector:
            return list(self.engine.multivectors(tile_ids))
        return list(self.engine.fetch(tile_ids))

    @classmethod
    def joined(cls, parts: list[VisualRetriever], config: Mapping) -> VisualRetriever:
        """One retriever made by ``config`` (``empty``'s arguments) of the live tiles of ``parts``,
        added at once (an ANN structure trains on them all)."""
        joined = cls.empty(**config)
        ids = [part.tile_ids() for part in parts]
        vectors = [vector for part, held in zip(parts, ids) if len(held) for vector in part.vectors(held)]
        if vectors:
            joined.add(np.concatenate(ids), vectors)
        return joined

    def save(self, path: Path) -> None:
        """A file (single vectors) or a folder (MUVERA) at ``path``."""
        self.engine.save(path)

    @classmethod
    def load(cls, path: Path) -> VisualRetriever:
        return cls(MuveraRetriever.load(path) if path.is_dir() else VectorIndex.load(path))


class VisualSegments:
    """The visual vectors of a set of segments, each holding the part of its tiles
    (``Segment.part(VISUAL)``), every part made by ``config`` (``VisualRetriever.empty``'s
    arguments, kept in the pointer): searched part by part, the best tiles kept."""

    def __init__(self, segments: Sequence, config: Mapping):
        self.segments = tuple(segments)
        self.config = dict(config)

    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None, effort: Effort | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` best tiles of all parts for one encoded query (``VisualRetriever.search``). MUVERA's
        ``ef`` candidates are shared among the parts by their size (at least ``k`` each), so the
        exact MaxSim a search costs does not grow with the number of parts."""
        allowed = None if allowed is None else np.asarray(allowed)  # an Allowed lists its tiles once
        effort = effort or Effort()
        parts = [segment.part(VISUAL) for segment in self.segments]
        total = max(sum(map(len, parts)), 1)
        found = []
        for part in parts:
            share = effort
            if self.config["multi_vector"]:
                share = replace(effort, ef=max(k, math.ceil((effort.ef or _EF) * len(part) / total)))
            found += part.search(query, k, allowed, share)
        found.sort(key=lambda hit: (-hit[1], hit[0]))
        return found[:k]


def stored(path: Path) -> Saved | Held:
    """The visual part saved at ``path``: a file, opened and read when first asked for; a MUVERA
    folder of arrays, read now (a merge may remove the folder while a search holds its segment)."""
    if path.is_dir():
        return Held(VisualRetriever.load(path), path, VisualRetriever.load)
    return Saved(path, lambda file: VisualRetriever(VectorIndex.load(file)))
