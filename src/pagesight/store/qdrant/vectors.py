"""The Qdrant store's retrievers: views of a named vector of the live tiles, searched in Qdrant
with an allowed set of tile ids. Read-only: the catalog writes each tile's vectors with its
document.

A search's ``Effort``: ``ef_search`` is a server's ``hnsw_ef`` (local mode searches exactly, and
does without it); ``ef`` is the late-interaction candidates prefetched by their mean vector and
compared by MaxSim, as MUVERA's ``ef`` in the local store; ``nprobe`` is refused, since Qdrant has no
IVF index."""

from __future__ import annotations

from collections import Counter

import numpy as np

from pagesight.errors import PagesightError
from pagesight.store.base import Allowed, Effort
from pagesight.store.qdrant.bm25 import term_index
from pagesight.store.qdrant.catalog import QdrantCatalog
from pagesight.store.qdrant.schema import qdrant_models


class _Vectors:
    """A named vector of the live tiles, searched in Qdrant with an allowed set of tile ids."""

    using = ""

    def __init__(self, catalog: QdrantCatalog):
        self.catalog = catalog
        self.client = catalog.client

    def tile_ids(self) -> np.ndarray:
        return np.array(sorted(tid for tid, _ in self.catalog.tile_texts()), dtype=np.int64)

    def _params(self, effort: Effort | None, **options):
        """Qdrant's search parameters for ``effort`` and ``options`` (None: none to give)."""
        if effort is not None and effort.nprobe is not None:
            raise PagesightError(
                "nprobe: a Qdrant store has no IVF index (its vectors are searched by HNSW); use ef_search"
            )
        if effort is not None and effort.ef_search is not None and self.catalog.path is None:
            options["hnsw_ef"] = effort.ef_search
        return qdrant_models().SearchParams(**options) if options else None

    def _query(self, query, n: int, allowed, **options) -> list[tuple[int, float]]:
        if allowed is not None and not (allowed.doc_ids if isinstance(allowed, Allowed) else len(allowed)):
            return []  # nothing allowed
        if not self.catalog._has_tiles():
            return []
        found = self.client.query_points(
            self.catalog.tiles_name,
            query=query,
            using=self.using,
            limit=n,
            query_filter=self.catalog.live_filter(allowed),
            with_payload=False,
            **options,
        )
        return [(int(p.id), float(p.score)) for p in found.points]


class Bm25Vectors(_Vectors):
    using = "bm25"

    def __init__(
        self, catalog: QdrantCatalog, bursts: dict[str, float] | None, languages: tuple[str, ...] = ("en",)
    ):
        super().__init__(catalog)
        self.bursts = bursts  # the collection's bursty words (Bm25Weights.bursts); None: all weigh 1
        self.languages = languages  # of its pages (text.language): a query is read in one of them

    def search(
        self, query: str, n: int, allowed: np.ndarray | None = None, language: str | None = None
    ) -> list[tuple[int, float]]:
        from pagesight.encode.lexical import query_weights
        from pagesight.text.language import query_language

        models = qdrant_models()
        weights: Counter[int] = Counter()
        language = language or query_language(query, self.languages)
        for term, weight in query_weights(
            query, self.catalog.settings.phrases, self.bursts, language
        ).items():
            weights[term_index(term)] += weight
        if not weights:
            return []
        vector = models.SparseVector(indices=list(weights), values=[float(w) for w in weights.values()])
        return [pair for pair in self._query(vector, n, allowed) if pair[1] > 0]


class DenseVectors(_Vectors):
    using = "dense"

    def search(
        self, query: np.ndarray, n: int, allowed: np.ndarray | None = None, effort: Effort | None = None
    ) -> list[tuple[int, float]]:
        vector = [np.asarray(query, dtype=np.float32).tolist()]
        return self._query(vector, n, allowed, search_params=self._params(effort))


class VisualVectors(_Vectors):
    using = "visual"

    def __init__(self, catalog: QdrantCatalog, multi_vector: bool, prefetch: int = 512):
        super().__init__(catalog)
        self.multi_vector = multi_vector
        self.prefetch = prefetch

    def search(
        self, query: np.ndarray, n: int, allowed: np.ndarray | None = None, effort: Effort | None = None
    ) -> list[tuple[int, float]]:
        """The ``n`` best tiles: by the one vector, or, for token vectors, the ``effort.ef`` (default
        ``prefetch``) best by their mean vector compared by MaxSim."""
        effort = effort or Effort()
        matrix = np.asarray(query, dtype=np.float32)
        if not self.multi_vector:
            return self._query(matrix.reshape(-1).tolist(), n, allowed, search_params=self._params(effort))
        models = qdrant_models()
        mean = matrix.mean(axis=0)
        prefetch = models.Prefetch(
            query=(mean / max(np.linalg.norm(mean), 1e-12)).tolist(),
            using="visual_mean",
            limit=max(effort.ef or self.prefetch, n),
            filter=self.catalog.live_filter(allowed),
            params=self._params(effort),
        )
        # A server scores the codes first and rescores with the originals; local mode searches
        # exactly and warns of search parameters.
        quantized = {}
        if self.catalog.settings.multi_vector_storage != "float16" and self.catalog.path is None:
            quantized["quantization"] = models.QuantizationSearchParams(rescore=True, oversampling=4.0)
        params = self._params(None, **quantized)
        return self._query(matrix.tolist(), n, allowed, prefetch=prefetch, search_params=params)
