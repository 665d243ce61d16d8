"""Qdrant's own engine in-process: qdrant-edge-py on synthetic tiles shaped like pagesight's, against
qdrant-client's local mode, which is all the Qdrant store is tested on here (issue 39: try the real
engine, keep it only if it earns its place).

    python -m venv /tmp/edgevenv
    /tmp/edgevenv/bin/pip install qdrant-edge-py -e '.[qdrant]'
    /tmp/edgevenv/bin/python -m benchmarks.qdrant_edge --tiles 10000 [100000] [--kinds edge edge-int8 edge-mean local]
        [--ef 256 512 1024] [--indexes doc_id,live,...] [--local-max 10000] [--check-api]
    python -m benchmarks.qdrant_edge --tiny  # 300 tiles, local mode (and the edge shard if installed)

Needs no model: the tiles are seeded synthetic data with the Qdrant store's shapes, their payloads
made by the store's own code (``store/qdrant/points.py``'s ``tile_points``, the ``where`` fields by
``fields.fields_payload``), written not yet live and made live as the catalog's commit makes them:

- ``bm25``: a sparse vector of about 50 distinct terms (64 drawn: 48 from a Zipf vocabulary of
  50,000, 16 from its document's own 30), each valued by BM25's saturated tf part, searched with Qdrant's IDF modifier;
- ``dense``: 3 chunk vectors of 384 dimensions a tile, a MAX_SIM multi-vector (tiles are noisy
  copies of their document's direction, chunks of their tile's), queried with one vector;
- ``mean``: the chunks' mean, a plain vector, searched first (512) before MaxSim over ``dense``, as
  the visual retriever does;
- payload: the store's (``doc_id``, 20 tiles a document; ``live``; ``version``; the tile's text and
  spans; the document's ``where`` fields ``f_year`` with ``s`` and ``n``, ``f_source`` with
  ``s``), with payload indexes on ``doc_id``, ``live``, ``where.f_year.n`` and
  ``where.f_source.s`` (nested keys).

Every local-mode search carries ``live = true``, as the store's do. qdrant-edge-py 0.9.0 matches no
boolean payload (``MatchValue(True)`` counts none of the store's live tiles: ``--check-api`` shows
it), so the edge shards are searched without the live condition (``live_filter`` in the result says
so): their figures are what the engine gives without that filter, not what the store would get.
Measured for each backend, each phase in a process of its own (so RSS is its own): build (upsert in
batches of 256, then ``optimize()``, which builds the HNSW graphs), opening the built store, search
p50/p95 over the queries (warm, top 10), RSS and disk, one 20-tile document added (upsert, ``live``
set by filter, flush) and deleted (by filter, flush), and recall@10 against exact scores from numpy
(MaxSim over every chunk, and BM25 with Qdrant's IDF), also within each filter. ``edge-int8`` is
the same shard with int8 scalar codes on ``dense`` (kept in RAM, the originals memory-mapped),
searched with default parameters, with rescoring (oversampling 4, as the visual retriever asks) and
without. ``edge-mean`` is a shard of the ``mean`` vector alone, to tell what HNSW loses on this data
from what the multi-vector graph loses. ``--ef`` adds searches with those ``hnsw_ef``; ``--indexes``
picks the payload indexes made.

``--check-api`` runs small checks of what a store would need (count, scroll, set/delete by filter,
nested payload indexes, reopening, a second opener) and gives what each gave.

A table goes to stderr. Times are wall clock: the machine's load average is given with them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import harness
from pagesight.records import Document, Page, Span, Tile
from pagesight.store.qdrant.fields import fields_payload
from pagesight.store.qdrant.points import tile_points

qe = None
if importlib.util.find_spec("qdrant_edge") is not None:  # the benchmark's engine; pagesight does not need it
    import qdrant_edge as qe

DIM = 384
CHUNKS = 3
VOCAB = 50_000
TILES_PER_DOC = 20
SOURCES = ["annual", "filing", "paper", "manual", "web", "letter", "report", "slide"]
YEARS = (1990, 2025)  # a document's year is in [1990, 2025)
YEAR_FROM = 2020  # the range filter: where.f_year.n >= 2020, about 1 document in 7
BATCH = 256
INDEXES = ["doc_id", "live", "where.f_year.n", "where.f_source.s"]  # the payload indexes, by default
PREFETCH = 512
K = 10
K1, B = 1.2, 0.75


# -- data --------------------------------------------------------------------------------------


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def generate(n: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded tiles: dense chunks, their mean, a BM25 sparse vector (CSR) and payload columns."""
    rng = np.random.default_rng(seed)
    doc = np.arange(n) // TILES_PER_DOC
    docs = int(doc[-1]) + 1
    common = rng.standard_normal(DIM)  # embeddings share a direction, as real ones do
    centers = _unit(0.5 * _unit(common) + _unit(rng.standard_normal((docs, DIM))))
    sigma = 1 / np.sqrt(DIM)
    tiles = _unit(centers[doc] + 1.0 * sigma * rng.standard_normal((n, DIM)))
    chunks = np.empty((n, CHUNKS, DIM), dtype=np.float32)
    for start in range(0, n, 10_000):
        part = tiles[start : start + 10_000, None, :]
        noise = 0.8 * sigma * rng.standard_normal((len(part), CHUNKS, DIM))
        chunks[start : start + 10_000] = _unit(part + noise)
    mean = _unit(chunks.mean(axis=1))

    ranks = np.arange(1, VOCAB + 1, dtype=np.float64)
    zipf = ranks**-1.07
    zipf /= zipf.sum()
    topics = rng.integers(500, VOCAB, size=(docs, 30))  # each document's own rarer words
    drawn = np.concatenate(
        [
            rng.choice(VOCAB, size=(n, 48), p=zipf),
            np.take_along_axis(topics[doc], rng.integers(0, 30, size=(n, 16)), axis=1),
        ],
        axis=1,
    )
    lengths = 3.0 * drawn.shape[1] * rng.uniform(0.5, 1.5, size=n)  # tokens a tile, about 200
    avg = lengths.mean()
    indptr = np.zeros(n + 1, dtype=np.int64)
    indices, values = [], []
    for i in range(n):
        terms, tf = np.unique(drawn[i], return_counts=True)
        norm = K1 * (1 - B + B * lengths[i] / avg)
        indices.append(terms.astype(np.int32))
        values.append((tf * (K1 + 1) / (tf + norm)).astype(np.float32))
        indptr[i + 1] = indptr[i] + len(terms)

    doc_years = rng.integers(*YEARS, size=docs)
    doc_sources = rng.integers(0, len(SOURCES), size=docs)
    return {
        "chunks": chunks,
        "mean": mean,
        "indptr": indptr,
        "indices": np.concatenate(indices),
        "values": np.concatenate(values),
        "doc": doc,
        "year": doc_years[doc],
        "source": doc_sources[doc],
    }


def make_queries(data: dict[str, np.ndarray], count: int, seed: int) -> dict[str, np.ndarray]:
    """Dense queries (a chunk of a random tile, noised), sparse ones (3-4 terms, two of a random
    tile's rarer ones) and, for each, 5 % of the documents to filter by."""
    rng = np.random.default_rng(seed + 1)
    n = len(data["doc"])
    docs = int(data["doc"][-1]) + 1
    picked = rng.integers(0, n, size=count)
    chunk = rng.integers(0, CHUNKS, size=count)
    dense = _unit(data["chunks"][picked, chunk] + (1.2 / np.sqrt(DIM)) * rng.standard_normal((count, DIM)))
    terms = np.full((count, 4), -1, dtype=np.int64)
    for q, tile in enumerate(rng.integers(0, n, size=count)):
        own = data["indices"][data["indptr"][tile] : data["indptr"][tile + 1]]
        rare = np.sort(own)[-8:]  # larger ids are rarer words
        chosen = set(rng.choice(rare, size=2, replace=False).tolist())
        chosen |= set(rng.choice(own, size=rng.integers(1, 3), replace=False).tolist())
        terms[q, : len(chosen)] = sorted(chosen)
    in_filter = np.stack([rng.choice(docs, size=max(1, docs // 20), replace=False) for _ in range(count)])
    return {"dense": dense, "terms": terms, "filter_docs": in_filter}


def exact(data: dict[str, np.ndarray], queries: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Exact top-10 tile ids of each query set, from numpy."""
    n = len(data["doc"])
    count = len(queries["dense"])
    # MaxSim of one query vector: the best chunk's cosine
    maxsim = np.empty((count, n), dtype=np.float32)
    flat = data["chunks"].reshape(-1, DIM)
    for start in range(0, n * CHUNKS, 300_000):
        part = flat[start : start + 300_000] @ queries["dense"].T  # (rows, count)
        tiles = part.reshape(-1, CHUNKS, count).max(axis=1)
        maxsim[:, start // CHUNKS : start // CHUNKS + len(tiles)] = tiles.T

    # BM25 with Qdrant's IDF: ln(1 + (N - df + 0.5) / (df + 0.5))
    order = np.argsort(data["indices"], kind="stable")
    sorted_terms = data["indices"][order]
    owner = np.repeat(np.arange(n), np.diff(data["indptr"]))[order]
    df = np.bincount(data["indices"], minlength=VOCAB)
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    bm25 = np.zeros((count, n), dtype=np.float32)
    for q, terms in enumerate(queries["terms"]):
        for term in terms[terms >= 0]:
            lo, hi = np.searchsorted(sorted_terms, [term, term + 1])
            bm25[q, owner[lo:hi]] += idf[term] * data["values"][order[lo:hi]]

    in_docs = np.zeros((count, n), dtype=bool)
    for q, docs in enumerate(queries["filter_docs"]):
        in_docs[q] = np.isin(data["doc"], docs)
    recent = data["year"] >= YEAR_FROM

    def top(scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        scores = scores.copy()
        if mask is not None:
            scores[~np.broadcast_to(mask, scores.shape)] = -np.inf
        best = np.argsort(-scores, axis=1, kind="stable")[:, :K]
        return np.where(np.take_along_axis(scores, best, axis=1) > 0, best, -1)

    cosine = queries["dense"] @ np.asarray(data["mean"]).T  # the mean vector's own ranking
    return {
        "mean": top(cosine),
        "mean_docs": top(cosine, in_docs),
        "dense": top(maxsim),
        "dense_docs": top(maxsim, in_docs),
        "dense_year": top(maxsim, recent),
        "sparse": top(bm25),
        "sparse_docs": top(bm25, in_docs),
        "year_share": np.array(recent.mean()),
    }


def save(folder: Path, arrays: dict[str, np.ndarray]) -> None:
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", array)


def load(folder: Path, names) -> dict[str, np.ndarray]:
    return {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in names}


DATA = ["chunks", "mean", "indptr", "indices", "values", "doc", "year", "source"]
QUERIES = ["dense", "terms", "filter_docs"]
TRUTH = ["mean", "mean_docs", "dense", "dense_docs", "dense_year", "sparse", "sparse_docs"]


VERSION = "v1"


def payloads(data, ids: range, doc: str | None = None) -> list[dict]:
    """The store's payloads of tiles ``ids`` (whole documents of ``TILES_PER_DOC``), not yet live:
    ``tile_points`` of a document holding them, its text each tile's terms as words; ``doc``: the
    tiles re-filed under a new document (add and delete)."""
    found = []
    for first in range(ids.start, ids.stop, TILES_PER_DOC):
        number = int(data["doc"][first])
        members = range(first, min(ids.stop, first + TILES_PER_DOC))
        tiles = [
            Tile(
                i - first,
                (0.0, 100.0 * (i - first), 100.0, 100.0 * (i - first + 1)),
                [Span(words(data, i), (0.0, 0.0, 9.0, 9.0), "pdf")],
            )
            for i in members
        ]
        page = Page(1, 100, 100 * len(tiles), "pdf", tiles)
        doc_id = doc or f"doc{number:07d}"
        document = Document(doc_id, f"/docs/{doc_id}.pdf", f"sha{number}", "pdf", 1, 1, [page])
        where = fields_payload(
            {"year": int(data["year"][first]), "source": SOURCES[int(data["source"][first])]}
        )
        points = tile_points(
            document, [(page, tile) for tile in tiles], first, terms=[[] for _ in tiles],
            fields=[("", "", "")] * len(tiles), vectors={}, visual={}, multi_vector=False, average=1.0,
            version=VERSION, where=where,
        )  # fmt: skip
        found += [point.payload for point in points]
    return found


def words(data, i: int) -> str:
    """Tile ``i``'s text: its terms as words."""
    lo, hi = int(data["indptr"][i]), int(data["indptr"][i + 1])
    return " ".join(f"w{term}" for term in data["indices"][lo:hi].tolist())


def point_parts(data, ids: range, sparse_vector, doc: str | None = None) -> list[tuple[dict, dict]]:
    """Each of tiles ``ids``' payload (``payloads``) and named vectors, the sparse one made by the
    engine's ``sparse_vector`` class."""
    parts = []
    for i, body in zip(ids, payloads(data, ids, doc)):
        lo, hi = int(data["indptr"][i]), int(data["indptr"][i + 1])
        indices, values = data["indices"][lo:hi].tolist(), data["values"][lo:hi].tolist()
        vectors = {
            "dense": data["chunks"][i].tolist(),
            "mean": data["mean"][i].tolist(),
            "bm25": sparse_vector(indices=indices, values=values),
        }
        parts.append((body, vectors))
    return parts


# -- backends ----------------------------------------------------------------------------------


class Edge:
    """A qdrant-edge-py shard (``int8``: scalar codes on ``dense``; ``mean_only``: the ``mean``
    vector alone, to see HNSW over single vectors of the same data)."""

    def __init__(self, path: Path, int8: bool = False, indexes: list[str] = INDEXES, mean_only: bool = False):
        self.path = path
        self.int8 = int8
        self.indexes = indexes
        self.mean_only = mean_only
        self.shard = None

    def config(self):
        if self.mean_only:
            return qe.EdgeConfig(vectors={"mean": qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)})
        max_sim = qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim)
        codes = qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, always_ram=True) if self.int8 else None
        return qe.EdgeConfig(
            vectors={
                "dense": qe.EdgeVectorParams(
                    size=DIM,
                    distance=qe.Distance.Cosine,
                    multivector_config=max_sim,
                    quantization_config=codes,
                ),
                "mean": qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine),
            },
            sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )

    def create(self) -> None:
        self.shard = qe.EdgeShard.create(str(self.path), self.config())
        schemas = {
            "doc_id": qe.PayloadSchemaType.Keyword,
            "live": qe.PayloadSchemaType.Bool,
            "where.f_year.n": qe.PayloadSchemaType.Float,
            "where.f_source.s": qe.PayloadSchemaType.Keyword,
        }
        for field in self.indexes:
            self.shard.update(qe.UpdateOperation.create_field_index(field, schemas[field]))

    def upsert(self, data, ids: range, id_base: int = 0, doc: str | None = None) -> None:
        points = []
        for i, (body, vectors) in zip(ids, point_parts(data, ids, qe.SparseVector, doc)):
            if self.mean_only:
                vectors = {"mean": vectors["mean"]}
            points.append(qe.Point(id_base + i, vectors, body))
        self.shard.update(qe.UpdateOperation.upsert_points(points))
        self.shard.update(qe.UpdateOperation.set_payload_by_filter(self._version(), {"live": True}))

    def _version(self):
        return qe.Filter(must=[qe.FieldCondition(key="version", match=qe.MatchValue(VERSION))])

    def finish(self) -> dict:
        started = time.perf_counter()
        self.shard.optimize()
        optimized = time.perf_counter() - started
        info = self.shard.info()
        self.shard.flush()
        self.shard.close()
        return {
            "optimize_s": optimized,
            "segments": info.segments_count,
            "points": info.points_count,
            "indexed_vectors": info.indexed_vectors_count,
        }

    def open(self) -> None:
        self.shard = qe.EdgeShard.load(str(self.path))

    def close(self) -> None:
        self.shard.close()

    # filters: without the live condition, which matches no boolean here (the module's docstring)
    def filter(self, docs=None, year=False):
        must = []
        if docs is not None:
            must.append(qe.FieldCondition(key="doc_id", match=qe.MatchAny(any=docs)))
        if year:
            must.append(qe.FieldCondition(key="where.f_year.n", range=qe.RangeFloat(gte=float(YEAR_FROM))))
        return qe.Filter(must=must) if must else None

    def sparse(self, terms, flt):
        vector = qe.SparseVector(indices=terms, values=[1.0] * len(terms))
        request = qe.QueryRequest(limit=K, query=qe.Query.Nearest(vector, using="bm25"), filter=flt)
        return [int(p.id) for p in self.shard.query(request) if p.score > 0]

    def dense(self, vector, flt, exact=False, rescore=None, ef=None):
        params = None
        if exact:
            params = qe.SearchParams(exact=True)
        elif ef is not None:
            params = qe.SearchParams(hnsw_ef=ef)
        elif rescore is not None:
            quantized = qe.QuantizationSearchParams(rescore=rescore, oversampling=4.0 if rescore else None)
            params = qe.SearchParams(quantization=quantized)
        request = qe.QueryRequest(
            limit=K, query=qe.Query.Nearest([vector], using="dense"), filter=flt, params=params
        )
        return [int(p.id) for p in self.shard.query(request)]

    def mean(self, vector, flt, exact=False, ef=None):
        params = qe.SearchParams(exact=True) if exact else qe.SearchParams(hnsw_ef=ef) if ef else None
        request = qe.QueryRequest(
            limit=K, query=qe.Query.Nearest(vector, using="mean"), filter=flt, params=params
        )
        return [int(p.id) for p in self.shard.query(request)]

    def prefetch(self, vector, flt, rescore=None):
        params = None
        if rescore is not None:
            params = qe.SearchParams(
                quantization=qe.QuantizationSearchParams(rescore=rescore, oversampling=4.0)
            )
        first = qe.Prefetch(limit=PREFETCH, query=qe.Query.Nearest(vector, using="mean"), filter=flt)
        request = qe.QueryRequest(
            limit=K,
            prefetches=[first],
            query=qe.Query.Nearest([vector], using="dense"),
            filter=flt,
            params=params,
        )
        return [int(p.id) for p in self.shard.query(request)]

    # a document added and deleted, as the catalog does it
    def add_document(self, data, doc: str, id_base: int) -> None:
        self.upsert(data, range(TILES_PER_DOC), id_base=id_base, doc=doc)
        self.shard.flush()

    def delete_document(self, doc: str) -> None:
        of_doc = qe.Filter(must=[qe.FieldCondition(key="doc_id", match=qe.MatchValue(doc))])
        self.shard.update(qe.UpdateOperation.delete_points_by_filter(of_doc))
        self.shard.flush()

    def count(self, doc: str) -> int:
        of_doc = qe.Filter(must=[qe.FieldCondition(key="doc_id", match=qe.MatchValue(doc))])
        return self.shard.count(qe.CountRequest(exact=True, filter=of_doc))


class Local:
    """qdrant-client's local mode (pure Python, brute force), as the Qdrant store is tested."""

    name = "tiles"

    def __init__(self, path: Path):
        from qdrant_client import QdrantClient, models

        self.models = models
        self.path = path
        self.connect = lambda: QdrantClient(path=str(path))
        self.client = None

    def create(self) -> None:
        m = self.models
        self.client = self.connect()
        max_sim = m.MultiVectorConfig(comparator=m.MultiVectorComparator.MAX_SIM)
        self.client.create_collection(
            self.name,
            vectors_config={
                "dense": m.VectorParams(size=DIM, distance=m.Distance.COSINE, multivector_config=max_sim),
                "mean": m.VectorParams(size=DIM, distance=m.Distance.COSINE),
            },
            sparse_vectors_config={"bm25": m.SparseVectorParams(modifier=m.Modifier.IDF)},
        )  # local mode has no payload indexes (and warns), so none are made, as in schema.py

    def upsert(self, data, ids: range, id_base: int = 0, doc: str | None = None) -> None:
        m = self.models
        points = [
            m.PointStruct(id=id_base + i, vector=vectors, payload=body)
            for i, (body, vectors) in zip(ids, point_parts(data, ids, m.SparseVector, doc))
        ]
        self.client.upsert(self.name, points)
        version = m.Filter(must=[m.FieldCondition(key="version", match=m.MatchValue(value=VERSION))])
        self.client.set_payload(self.name, {"live": True}, version)  # as the catalog's commit

    def finish(self) -> dict:
        points = self.client.count(self.name, exact=True).count
        self.client.close()
        # qdrant-client's local mode builds no index and has no optimizer: nothing to time
        return {"optimize_s": None, "segments": None, "points": points, "indexed_vectors": None}

    def open(self) -> None:
        self.client = self.connect()

    def close(self) -> None:
        self.client.close()

    def filter(self, docs=None, year=False):
        m = self.models
        must = [m.FieldCondition(key="live", match=m.MatchValue(value=True))]
        if docs is not None:
            must.append(m.FieldCondition(key="doc_id", match=m.MatchAny(any=docs)))
        if year:
            must.append(m.FieldCondition(key="where.f_year.n", range=m.Range(gte=float(YEAR_FROM))))
        return m.Filter(must=must)

    def _query(self, query, using, flt, **options):
        found = self.client.query_points(
            self.name, query=query, using=using, limit=K, query_filter=flt, with_payload=False, **options
        )
        return found.points

    def sparse(self, terms, flt):
        vector = self.models.SparseVector(indices=terms, values=[1.0] * len(terms))
        return [int(p.id) for p in self._query(vector, "bm25", flt) if p.score > 0]

    def dense(self, vector, flt, exact=False, rescore=None, ef=None):
        return [int(p.id) for p in self._query([vector], "dense", flt)]

    def prefetch(self, vector, flt, rescore=None):
        first = self.models.Prefetch(query=vector, using="mean", limit=PREFETCH, filter=flt)
        return [int(p.id) for p in self._query([vector], "dense", flt, prefetch=first)]

    def _of_doc(self, doc: str):
        m = self.models
        return m.Filter(must=[m.FieldCondition(key="doc_id", match=m.MatchValue(value=doc))])

    def add_document(self, data, doc: str, id_base: int) -> None:
        self.upsert(data, range(TILES_PER_DOC), id_base=id_base, doc=doc)

    def delete_document(self, doc: str) -> None:
        self.client.delete(self.name, self.models.FilterSelector(filter=self._of_doc(doc)))

    def count(self, doc: str) -> int:
        return self.client.count(self.name, count_filter=self._of_doc(doc), exact=True).count


def backend(kind: str, path: Path, indexes: list[str] = INDEXES):
    if kind == "local":
        return Local(path)
    return Edge(path, int8=kind == "edge-int8", indexes=indexes, mean_only=kind == "edge-mean")


# -- phases, each run in a process of its own ----------------------------------------------------


def memory() -> dict[str, float]:
    """This process's resident and peak resident MB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return {"rss_mb": fields.get("VmRSS", 0.0), "peak_rss_mb": fields.get("VmHWM", 0.0)}


def disk_mb(path: Path) -> float:
    used = 0
    for root, _, files in os.walk(path):
        for name in files:
            used += os.stat(os.path.join(root, name)).st_blocks * 512
    return used / 2**20


def phase_build(kind: str, folder: Path, indexes: list[str]) -> dict:
    data = load(folder / "data", DATA)
    store = backend(kind, folder / kind, indexes)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    store.create()
    n = len(data["doc"])
    for start in range(0, n, BATCH):
        store.upsert(data, range(start, min(start + BATCH, n)))
    upserted = time.perf_counter() - started
    info = store.finish()
    total = time.perf_counter() - started
    return {
        "upsert_s": upserted,
        **info,
        "build_s": total,
        "build_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "disk_mb": disk_mb(folder / kind),
        "load_during_build": [load_before, os.getloadavg()[0]],
    }


def timed(run, items) -> tuple[list[float], list[list[int]]]:
    for item in items[:3]:  # warm up
        run(item)
    times, found = [], []
    for item in items:
        started = time.perf_counter()
        found.append(run(item))
        times.append(time.perf_counter() - started)
    return times, found


def recall(found: list[list[int]], truth: np.ndarray) -> float | None:
    """Recall against ``truth`` over the queries it has tiles for (None: none has)."""
    scores = []
    for ids, best in zip(found, truth, strict=False):
        wanted = {int(t) for t in best if t >= 0}
        if wanted:
            scores.append(len(wanted & set(ids)) / len(wanted))
    return float(np.mean(scores)) if scores else None


def phase_search(kind: str, folder: Path, count: int, efs: list[int]) -> dict:
    queries = load(folder / "data", QUERIES)
    truth = load(folder / "data", [f"truth_{name}" for name in TRUTH])
    truth = {name: truth[f"truth_{name}"][:count] for name in TRUTH}
    dense = [queries["dense"][q].tolist() for q in range(count)]
    terms = [[int(t) for t in queries["terms"][q] if t >= 0] for q in range(count)]
    docs = [[f"doc{int(d):07d}" for d in queries["filter_docs"][q]] for q in range(count)]
    store = backend(kind, folder / kind)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    store.open()
    opened = time.perf_counter() - started
    after_open = memory()["rss_mb"]
    live = store.filter()
    year = store.filter(year=True)
    q = range(count)
    runs = {}
    if kind == "edge-mean":
        runs["mean alone"] = (lambda i: store.mean(dense[i], live), "mean")
        runs["mean alone, exact=True"] = (lambda i: store.mean(dense[i], live, exact=True), "mean")
        runs["mean alone, 5 % of documents"] = (
            lambda i: store.mean(dense[i], store.filter(docs=docs[i])),
            "mean_docs",
        )
        for ef in efs:
            runs[f"mean alone, hnsw_ef={ef}"] = (lambda i, ef=ef: store.mean(dense[i], live, ef=ef), "mean")
    if kind in ("edge", "local"):
        runs["sparse"] = (lambda i: store.sparse(terms[i], live), "sparse")
        runs["sparse, 5 % of documents"] = (
            lambda i: store.sparse(terms[i], store.filter(docs=docs[i])),
            "sparse_docs",
        )
    if kind == "edge-mean":
        pass
    elif kind == "edge-int8":
        runs["dense MaxSim, int8, default params"] = (lambda i: store.dense(dense[i], live), "dense")
    else:
        runs["dense MaxSim"] = (lambda i: store.dense(dense[i], live), "dense")
    if kind == "edge":
        runs["dense MaxSim, exact=True"] = (lambda i: store.dense(dense[i], live, exact=True), "dense")
    if kind == "edge-int8":
        runs["dense MaxSim, int8 + rescore"] = (lambda i: store.dense(dense[i], live, rescore=True), "dense")
        runs["dense MaxSim, int8, no rescore"] = (
            lambda i: store.dense(dense[i], live, rescore=False),
            "dense",
        )
    if kind != "edge-mean":
        runs["mean 512 -> MaxSim"] = (
            lambda i: store.prefetch(dense[i], live, rescore=True if kind == "edge-int8" else None),
            "dense",
        )
        runs["dense, 5 % of documents"] = (
            lambda i: store.dense(dense[i], store.filter(docs=docs[i])),
            "dense_docs",
        )
        runs["dense, year >= 2020"] = (lambda i: store.dense(dense[i], year), "dense_year")
    for ef in efs if kind == "edge" else []:
        runs[f"dense MaxSim, hnsw_ef={ef}"] = (lambda i, ef=ef: store.dense(dense[i], live, ef=ef), "dense")
        runs[f"dense, 5 % of documents, hnsw_ef={ef}"] = (
            lambda i, ef=ef: store.dense(dense[i], store.filter(docs=docs[i]), ef=ef),
            "dense_docs",
        )
    searches = {}
    for name, (run, truth_name) in runs.items():
        times, found = timed(run, list(q))
        searches[name] = {
            "p50_ms": 1000 * statistics.median(times),
            "p95_ms": 1000 * float(np.percentile(times, 95)),
            "recall@10": recall(found, truth[truth_name]),
        }
    after_search = memory()
    data = load(folder / "data", DATA)
    started = time.perf_counter()
    store.add_document(data, "added", id_base=10**9)
    added = time.perf_counter() - started
    added_count = store.count("added")
    started = time.perf_counter()
    store.delete_document("added")
    deleted = time.perf_counter() - started
    left = store.count("added")
    store.close()
    return {
        "open_s": opened,
        "rss_after_open_mb": after_open,
        "rss_after_search_mb": after_search["rss_mb"],
        "peak_rss_mb": after_search["peak_rss_mb"],
        "searches": searches,
        "queries": count,
        "add_20_tiles_s": added,
        "delete_20_tiles_s": deleted,
        "add_delete_counts": [added_count, left],
        "load_during_search": [load_before, os.getloadavg()[0]],
    }


def child(phase: str, kind: str, folder: Path, count: int, indexes: list[str], efs: list[int]) -> dict:
    command = [*harness.PYTHON_M, __spec__.name, "--phase", phase, "--kind", kind, "--dir", str(folder)]
    command += ["--queries", str(count), "--indexes", ",".join(indexes), "--ef", *map(str, efs)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{phase} {kind} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- API checks ----------------------------------------------------------------------------------


def check_api(folder: Path) -> dict[str, str]:
    """What the calls a store would make give on a small shard."""
    checks = {}
    path = folder / "api"
    shard = qe.EdgeShard.create(
        str(path), qe.EdgeConfig(vectors={"v": qe.EdgeVectorParams(size=2, distance=qe.Distance.Cosine)})
    )
    shard.update(qe.UpdateOperation.create_field_index("where.f_year.n", qe.PayloadSchemaType.Float))
    shard.update(qe.UpdateOperation.create_field_index("live", qe.PayloadSchemaType.Bool))
    points = [
        qe.Point(
            i,
            {"v": [1.0, float(i)]},
            {"live": True, "n": 1, "doc_id": f"d{i // 5}", "where": {"f_year": {"n": 2000.0 + i}}},
        )
        for i in range(20)
    ]
    shard.update(qe.UpdateOperation.upsert_points(points))

    def count(*must, must_not=()):
        return shard.count(
            qe.CountRequest(exact=True, filter=qe.Filter(must=list(must), must_not=list(must_not)))
        )

    checks["count live = True (bool, indexed), of 20"] = count(
        qe.FieldCondition(key="live", match=qe.MatchValue(True))
    )
    checks["count n = 1 (integer), of 20"] = count(qe.FieldCondition(key="n", match=qe.MatchValue(1)))
    checks["count where.f_year.n >= 2015 (nested, indexed), of 5"] = count(
        qe.FieldCondition(key="where.f_year.n", range=qe.RangeFloat(gte=2015.0))
    )
    d1 = qe.Filter(must=[qe.FieldCondition(key="doc_id", match=qe.MatchValue("d1"))])
    records, offset = shard.scroll(qe.ScrollRequest(limit=3, filter=d1, with_payload=["doc_id"]))
    checks["scroll 3 of d1: ids, next offset"] = f"{[r.id for r in records]}, {offset}"
    shard.update(qe.UpdateOperation.set_payload_by_filter(d1, {"version": "v2"}))
    checks["set_payload_by_filter then count version = v2, of 5"] = count(
        qe.FieldCondition(key="version", match=qe.MatchValue("v2"))
    )
    shard.update(qe.UpdateOperation.delete_points_by_filter(d1))
    checks["delete_points_by_filter d1, points left of 15"] = count()
    shard.flush()
    try:
        qe.EdgeShard.load(str(path))
        checks["a second EdgeShard on the open directory"] = "opened"
    except Exception as exc:  # noqa: BLE001 - the error is the finding
        checks["a second EdgeShard on the open directory"] = f"refused: {exc}"
    code = f"import qdrant_edge as qe\ntry:\n    qe.EdgeShard.load({str(path)!r}); print('opened')\nexcept Exception as e:\n    print('refused:', e)"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=folder)
    checks["another process, same directory"] = other.stdout.strip()
    shard.close()
    again = qe.EdgeShard.load(str(path))
    checks["closed and loaded again: points"] = again.count(qe.CountRequest(exact=True))
    again.close()
    return checks


# -- the run -------------------------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    """A phase's seconds, or a dash for a phase the backend does not have."""
    return "—" if value is None else f"{value:.1f}"


def table(results: dict) -> str:
    lines = []
    for n, result in results["sizes"].items():
        lines.append(
            f"\n{n} tiles: {result['nonzeros_a_tile']:.1f} terms a tile, {result['year_share']:.1%} of tiles "
            f"from 2020 on; data {result['generate_s']:.1f} s, exact truth {result['truth_s']:.1f} s"
        )
        lines.append(
            "| backend | build: upsert + optimize | peak RSS building | segments, indexed vectors | open "
            "| RSS opened / searched | disk | add / delete 20 tiles |"
        )
        lines.append("|---|---|---|---|---|---|---|---|")
        for kind, r in result["backends"].items():
            lines.append(
                f"| {kind} | {r['build_s']:.1f} s = {r['upsert_s']:.1f} + {_seconds(r['optimize_s'])} "
                f"| {r['build_peak_rss_mb']:,.0f} MB | {r['segments']}, {r['indexed_vectors']} | {r['open_s']:.2f} s "
                f"| {r['rss_after_open_mb']:,.0f} / {r['rss_after_search_mb']:,.0f} MB | {r['disk_mb']:,.0f} MB "
                f"| {1000 * r['add_20_tiles_s']:.0f} / {1000 * r['delete_20_tiles_s']:.0f} ms |"
            )
        lines.append(
            "\n| backend | search (local mode's with live = true) | queries | p50 | p95 | recall@10 |"
        )
        lines.append("|---|---|---|---|---|---|")
        for kind, r in result["backends"].items():
            for name, s in r["searches"].items():
                lines.append(
                    f"| {kind} | {name} | {r['queries']} | {s['p50_ms']:.2f} ms | {s['p95_ms']:.2f} ms "
                    f"| {'-' if s['recall@10'] is None else format(s['recall@10'], '.3f')} |"
                )
        loads = ", ".join(
            f"{kind} {r['load_during_build'][0]:.1f}->{r['load_during_build'][1]:.1f} building, "
            f"{r['load_during_search'][0]:.1f}->{r['load_during_search'][1]:.1f} searching"
            for kind, r in result["backends"].items()
        )
        lines.append(f"\nload average (1 min): {loads}")
    return "\n".join(lines)


def measure(args, work: Path, sizes: list[int], kinds: list[str], indexes: list[str]) -> dict:
    from importlib.metadata import version

    names = ("qdrant-edge-py", "qdrant-client", "numpy") if qe else ("qdrant-client", "numpy")
    results = {
        "versions": {name: version(name) for name in names},
        "payload_indexes": indexes,
        "live_filter": {kind: kind == "local" for kind in kinds},
        "sizes": {},
    }
    if args.check_api:
        work.mkdir(parents=True, exist_ok=True)
        results["api"] = check_api(work)
    for n in sizes:
        folder = work / str(n)
        if folder.exists():
            shutil.rmtree(folder)
        (folder / "data").mkdir(parents=True)
        started = time.perf_counter()
        data = generate(n, args.seed)
        queries = make_queries(data, args.queries, args.seed)
        generated = time.perf_counter() - started
        started = time.perf_counter()
        truth = exact(data, queries)
        truthed = time.perf_counter() - started
        save(folder / "data", data)
        save(folder / "data", queries)
        save(folder / "data", {f"truth_{name}": truth[name] for name in TRUTH})
        del data
        result = {
            "generate_s": generated,
            "truth_s": truthed,
            "year_share": float(truth["year_share"]),
            "nonzeros_a_tile": None,
            "backends": {},
        }
        for kind in [kind for kind in kinds if kind != "local" or n <= args.local_max]:
            count = args.local_queries if kind == "local" else args.queries
            built = child("build", kind, folder, count, indexes, args.ef)
            searched = child("search", kind, folder, count, indexes, args.ef)
            result["backends"][kind] = {**built, **searched}
            print(f"{n} {kind}: built {built['build_s']:.1f} s", file=sys.stderr)
        indptr = np.load(folder / "data" / "indptr.npy")
        result["nonzeros_a_tile"] = float(indptr[-1] / (len(indptr) - 1))
        results["sizes"][str(n)] = result
        shutil.rmtree(folder)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--tiles", type=int, nargs="+", default=[10_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--local-queries", type=int, default=20, help="local mode is slow: fewer queries")
    parser.add_argument("--local-max", type=int, default=10_000, help="largest size local mode is run at")
    parser.add_argument(
        "--kinds",
        nargs="+",
        default=["edge", "edge-int8", "local"],
        choices=["edge", "edge-int8", "edge-mean", "local"],
        help="the stores built (edge-mean: the mean vector alone; local: up to --local-max tiles)",
    )
    parser.add_argument(
        "--indexes",
        default=",".join(INDEXES),
        help="the payload indexes made, comma-separated (default: all)",
    )
    parser.add_argument("--ef", type=int, nargs="*", default=[], help="hnsw_ef values also searched with")
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one, removed)")
    parser.add_argument("--check-api", action="store_true")
    parser.add_argument("--phase", choices=["build", "search"], help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    args = harness.start(parser, argv)
    indexes = [field for field in args.indexes.split(",") if field]
    if args.phase == "build":
        print(json.dumps(phase_build(args.kind, args.dir, indexes)))
        return
    if args.phase == "search":
        print(json.dumps(phase_search(args.kind, args.dir, args.queries, args.ef)))
        return
    if args.tiny:
        sizes, kinds = [300], ["edge", "local"] if qe else ["local"]
        args.queries = args.local_queries = 5
        args.check_api = qe is not None
    else:
        if qe is None:
            parser.error(
                "this benchmark needs qdrant-edge-py: pip install qdrant-edge-py (and qdrant-client)"
            )
        sizes, kinds = args.tiles, args.kinds
    work = args.dir or Path(tempfile.mkdtemp(prefix="qdrant-edge-"))
    try:
        results = measure(args, work, sizes, kinds, indexes)
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if "api" in results:
        print("\n".join(f"{name}: {value}" for name, value in results["api"].items()), file=sys.stderr)
    print(f"payload indexes: {', '.join(indexes) or 'none'}", file=sys.stderr)
    print(table(results), file=sys.stderr)
    harness.finish(args, __spec__.name, results)


if __name__ == "__main__":
    main()
