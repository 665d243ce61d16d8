"""The Qdrant store's retrievers: views of a named vector of the live tiles, searched in Qdrant
with an allowed set of tile ids. Read-only: the catalog writes each tile's vectors with its
document."""

from __future__ import annotations

from collections import Counter

import numpy as np

from pagesight.store.base import Allowed
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
        self.languages = languages  # of its pages (read.language): a query is read in one of them

    def search(
        self, query: str, n: int, allowed: np.ndarray | None = None, language: str | None = None
    ) -> list[tuple[int, float]]:
        from pagesight.encode.lexical import query_weights
        from pagesight.read.language import query_language

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

    def search(self, query: np.ndarray, n: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        return self._query([np.asarray(query, dtype=np.float32).tolist()], n, allowed)


class VisualVectors(_Vectors):
    using = "visual"

    def __init__(self, catalog: QdrantCatalog, multi_vector: bool, prefetch: int = 512):
        super().__init__(catalog)
        self.multi_vector = multi_vector
        self.prefetch = prefetch

    def search(self, query: np.ndarray, n: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        matrix = np.asarray(query, dtype=np.float32)
        if not self.multi_vector:
            return self._query(matrix.reshape(-1).tolist(), n, allowed)
        models = qdrant_models()
        mean = matrix.mean(axis=0)
        prefetch = models.Prefetch(
            query=(mean / max(np.linalg.norm(mean), 1e-12)).tolist(),
            using="visual_mean",
            limit=max(self.prefetch, n),
            filter=self.catalog.live_filter(allowed),
        )
        options = {"prefetch": prefetch}
        # A server scores the codes first and rescores with the originals; local mode searches
        # exactly and warns of search parameters.
        if self.catalog.settings.multi_vector_storage != "float16" and self.catalog.path is None:
            quantized = models.QuantizationSearchParams(rescore=True, oversampling=4.0)
            options["search_params"] = models.SearchParams(quantization=quantized)
        return self._query(matrix.tolist(), n, allowed, **options)
