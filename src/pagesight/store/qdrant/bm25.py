"""BM25 in Qdrant: each tile's sparse vector holds Lucene's term-frequency part, weighed with the
average tile length known when it was written, and Qdrant multiplies by the IDF at query time
(``Modifier.IDF``). ``Bm25Weights.reweigh_bm25`` weighs again the tiles whose average drifted."""

from __future__ import annotations

import zlib
from collections import Counter

from pagesight.store.qdrant.schema import BURSTS_POINT, SCROLLED, qdrant_models, scroll

BM25_K1, BM25_B = 1.2, 0.75  # as the local store's bm25s index
BM25_DRIFT = 0.01  # tiles weighed with an average tile length off by more are weighed again
BURST_SAMPLE = 50_000  # live tiles counted at most for the bursty words, evenly spaced by id
BURST_RECOUNT = 0.1  # ... counted again when the live tiles grew or shrank by more than this share


class Bm25Weights:
    """The BM25 methods of ``QdrantCatalog`` (its index point's statistics, its tiles collection)."""

    def bm25_average(self) -> float:
        """The average tile length in BM25 terms, over the live tiles."""
        stats = self.load()["bm25"]
        return stats["terms"] / stats["tiles"] if stats["tiles"] else 1.0

    def reweigh_bm25(self, drift: float = BM25_DRIFT) -> int:
        """Weigh again the live tiles whose BM25 weights used an average tile length more than
        ``drift`` away from today's; returns how many. Early tiles of a growing index are the
        ones: each document is weighed with the average known when it was written."""

        if not self._has_tiles():
            return 0
        models = qdrant_models()
        average = self.bm25_average()
        close = models.FieldCondition(
            key="bm25_avg", range=models.Range(gte=average / (1 + drift), lte=average * (1 + drift))
        )
        stale = models.Filter(must=self.live_filter().must, must_not=[close])
        count, batch = 0, []
        for record in scroll(
            self.client,
            self.tiles_name,
            stale,
            with_payload=["text", "context", "heading", "cells", "language"],
        ):
            batch.append(record)
            if len(batch) == SCROLLED:
                count += self._reweigh(batch, average)
                batch = []
        return count + (self._reweigh(batch, average) if batch else 0)

    def _reweigh(self, batch: list, average: float) -> int:
        from pagesight.encode.lexical import tokenize

        models = qdrant_models()
        languages = [r.payload.get("language", "en") for r in batch]
        terms = tokenize([self._indexed_text(r.payload) for r in batch], self.settings.phrases, languages)
        points = [
            models.PointVectors(id=r.id, vector={"bm25": bm25_document(t, average)})
            for r, t in zip(batch, terms)
        ]
        self.client.update_vectors(self.tiles_name, points)
        # The weights first, then the mark: a writer killed in between leaves the mark stale, and
        # the next refresh weighs those tiles again.
        self.client.set_payload(self.tiles_name, {"bm25_avg": average}, points=[r.id for r in batch])
        return len(batch)

    def _indexed_text(self, payload: dict) -> str:
        from pagesight.encode.lexical import indexed_text

        return indexed_text(
            payload.get("text", ""),
            payload.get("context", ""),
            payload.get("heading", ""),
            self.settings,
            payload.get("cells", ""),  # none in tiles written before cells were indexed
        )

    def update_bursts(self) -> bool:
        """Count the bursty words of the live tiles (``encode.lexical.burst_weights``) again when
        their number moved by more than ``BURST_RECOUNT`` since the last count, over
        ``BURST_SAMPLE`` of them at most; returns whether it counted. The local store counts every
        tile at each rebuild; the counts change slowly as a collection grows, and a count reads
        every tile it takes."""
        from pagesight.encode.lexical import burst_weights, tokenize

        if not self.settings.term_weights or not self._has_tiles():
            return False
        tiles = self.load()["bm25"]["tiles"]
        counted = self._bursts_payload()
        if counted is not None and abs(tiles - counted["tiles"]) <= BURST_RECOUNT * counted["tiles"]:
            return False
        ids = sorted(int(r.id) for r in scroll(self.client, self.tiles_name, self.live_filter(), False))
        if len(ids) > BURST_SAMPLE:
            ids = [ids[round(i * (len(ids) - 1) / (BURST_SAMPLE - 1))] for i in range(BURST_SAMPLE)]
        texts, languages = [], []
        for start in range(0, len(ids), SCROLLED):
            found = self.client.retrieve(
                self.tiles_name,
                ids[start : start + SCROLLED],
                with_payload=["text", "context", "heading", "cells", "language"],
            )
            texts += [self._indexed_text(r.payload) for r in found]
            languages += [r.payload.get("language", "en") for r in found]
        models = qdrant_models()
        weights = burst_weights(tokenize(texts, languages=languages))
        payload = {"kind": "bursts", "tiles": tiles, "weights": weights}
        self.client.upsert(
            self.catalog_name, [models.PointStruct(id=BURSTS_POINT, vector={}, payload=payload)]
        )
        self.load()
        self._index["bursts_counted"] = self._index.get("bursts_counted", 0) + 1  # readers read again
        self._save_index()
        return True

    def bursts(self) -> dict[str, float] | None:
        """The bursty words last counted (``update_bursts``), read again only when counted again
        since (the index record, loaded by the caller, says how often); None when the index
        weighs no terms."""
        if not self.settings.term_weights:
            return None
        counted = self._index.get("bursts_counted", 0)
        if self._bursts is None or self._bursts[0] != counted:
            payload = self._bursts_payload()
            self._bursts = (counted, payload["weights"] if payload is not None else {})
        return self._bursts[1]

    def _bursts_payload(self) -> dict | None:
        found = self.client.retrieve(self.catalog_name, [BURSTS_POINT], with_payload=True)
        return found[0].payload if found else None


def term_index(term: str) -> int:
    """A stable sparse-vector dimension for a term (CRC-32, 31 bits)."""
    return zlib.crc32(term.encode()) & 0x7FFFFFFF


def bm25_document(terms: list[str], average_length: float):
    """Lucene's BM25 term-frequency part for each term of a tile; Qdrant applies the IDF."""
    models = qdrant_models()
    counts = Counter(terms)
    norm = BM25_K1 * (1 - BM25_B + BM25_B * len(terms) / max(average_length, 1e-9))
    weights: dict[int, float] = {}
    for term, tf in counts.items():
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + tf / (tf + norm)
    return models.SparseVector(indices=list(weights), values=list(weights.values()))
