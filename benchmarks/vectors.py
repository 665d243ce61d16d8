"""The vector layer of issue 5 on synthetic vectors: MaxSim, MUVERA, token pooling, single-vector ANN.

    python benchmarks/vectors.py [--sections maxsim,muvera,compact,pooling,ann] [--ann-sizes 100000,1000000] ...

Prints one JSON object (also written to ``--out`` when given), with the machine's load averages at
the start and end of each section, since timings on a shared machine depend on them.

Synthetic data, and why it looks like this:

- Single vectors (ANN): a Gaussian mixture of ``--ann-centres`` centres in a 64-dimensional latent
  space, mapped to 2,048 dims by a fixed random matrix, plus a little isotropic noise. Real embeddings
  have a low intrinsic dimension; isotropic 2,048-dim noise would make every point of a cluster
  equidistant from a query, so "the top 10" would be a coin toss and recall meaningless. Queries are
  data points perturbed in the latent space. Vectors are generated in chunks and kept as float16
  (1M x 2,048 is 4 GB; float32 would be 8 GB).
- Multi-vectors (MaxSim, MUVERA, pooling): ``--topics`` unit topic vectors in 128 dims; a page draws a
  few topics and each of its vectors is a noisy copy of one of them (pages are redundant, like
  ColPali patch vectors of margins and body text). A query is a noisy sample of 20 vectors of one
  planted page, so that page should rank first and pages sharing its topics next.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time

import numpy as np

from benchmarks import harness
from benchmarks.harness import load
from pagesight.vectors import (
    Muvera,
    MuveraRetriever,
    PackedMultiVectors,
    VectorIndex,
    maxsim,
    pool_multivectors,
)

# ---- synthetic data -----------------------------------------------------------------------------


class Clustered:
    """Deterministic clustered single vectors, generated chunk by chunk (see the module docstring)."""

    def __init__(self, dim: int, centres: int, seed: int = 0, latent: int = 64):
        rng = np.random.default_rng(seed)
        self.dim, self.latent, self.seed = dim, latent, seed
        self.centres = rng.standard_normal((centres, latent)).astype(np.float32)
        self.mixing = (rng.standard_normal((latent, dim)) / np.sqrt(latent)).astype(np.float32)

    def _from_latent(self, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return z @ self.mixing + 0.05 * rng.standard_normal((len(z), self.dim), dtype=np.float32)

    def chunk(self, start: int, stop: int) -> np.ndarray:
        """Vectors ``start:stop`` (float32); any chunking gives the same vectors for the same rows."""
        out = np.empty((stop - start, self.dim), dtype=np.float32)
        step = 10_000
        for block in range(start // step, (stop - 1) // step + 1):
            rng = np.random.default_rng([self.seed, block])
            z = self.centres[rng.integers(0, len(self.centres), step)]
            z = z + 0.35 * rng.standard_normal((step, self.latent), dtype=np.float32)
            lo, hi = max(start, block * step), min(stop, (block + 1) * step)
            x = self._from_latent(z[lo - block * step : hi - block * step], rng)
            out[lo - start : hi - start] = x
        return out

    def generate(self, n: int, dtype: type = np.float16) -> np.ndarray:
        out = np.empty((n, self.dim), dtype=dtype)
        for start in range(0, n, 50_000):
            out[start : start + 50_000] = self.chunk(start, min(n, start + 50_000))
        return out

    def queries(self, data: np.ndarray, count: int, seed: int = 1) -> np.ndarray:
        """Data points moved a little (a tenth of the within-cluster spread) in random directions."""
        rng = np.random.default_rng(seed)
        base = data[rng.choice(len(data), count, replace=False)].astype(np.float32)
        scale = np.linalg.norm(base, axis=1, keepdims=True) / np.sqrt(self.dim)
        return base + 0.3 * scale * rng.standard_normal(base.shape, dtype=np.float32)


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    k = truth.shape[1]
    return float(np.mean([len(set(f[:k].tolist()) & set(t.tolist())) / k for f, t in zip(found, truth)]))


def colpali_engine(name: str):
    """A module of colpali-engine (imported as pagesight imports it, without torchvision)."""
    import importlib

    from pagesight.encode.visual.late_interaction import import_colpali

    import_colpali()
    return importlib.import_module(name)


# ---- (d) single-vector ANN ----------------------------------------------------------------------


def exact_numpy(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """VisRAG's and byaldi's search: one matrix product, then argpartition (here a top-k sort)."""
    scores = queries @ matrix.T
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
    return np.take_along_axis(top, order, axis=1)


def bench_ann(args: argparse.Namespace) -> dict:
    results = {}
    k, extra = 10, args.ann_add
    for n in args.ann_sizes:
        started = load()
        gen = Clustered(args.ann_dim, args.ann_centres)
        t = time.perf_counter()
        data = gen.generate(n)
        generate_s = time.perf_counter() - t
        queries = gen.queries(data, args.ann_queries)
        section: dict = {
            "n": n,
            "dim": args.ann_dim,
            "centres": args.ann_centres,
            "queries": args.ann_queries,
            "generate_s": round(generate_s, 1),
        }
        # Exact numpy over a float32 copy (the matrix numpy needs for a BLAS product), which also gives
        # the ground truth; then it is freed before any FAISS index is built.
        t = time.perf_counter()
        matrix = np.empty(data.shape, dtype=np.float32)
        for start in range(0, n, 50_000):
            matrix[start : start + 50_000] = unit(data[start : start + 50_000])
        prepare_s = time.perf_counter() - t
        normalized = unit(queries)
        truth = np.concatenate(
            [exact_numpy(matrix, normalized[i : i + 50], k) for i in range(0, len(normalized), 50)]
        )
        times = []
        for q in normalized[: args.exact_latency_queries]:
            t = time.perf_counter()
            exact_numpy(matrix, q[None], k)
            times.append(time.perf_counter() - t)
        section["numpy_exact_fp32"] = {  # the truth the others' recall is measured against
            **harness.latency(times),
            "build_s": round(prepare_s, 2),
            "bytes_per_vector": 4 * args.ann_dim,
            "latency_queries": len(times),
        }
        del matrix
        gc.collect()
        progress = {"progress": f"ann n={n} exact", "load": load(), **section["numpy_exact_fp32"]}
        print(json.dumps(progress), file=sys.stderr, flush=True)

        for kind, storage, params in args.ann_kinds:
            if kind == "hnsw" and n > args.hnsw_max:
                section[f"{kind}_{storage}"] = {
                    "skipped": f"HNSW build above {args.hnsw_max} vectors not run; see the 100k build time"
                }
                continue
            index = VectorIndex(args.ann_dim, kind, storage, **params)
            base = n - extra
            ids = np.arange(n, dtype=np.int64)
            t = time.perf_counter()
            for start in range(0, base, 200_000 if kind == "flat" else base):
                stop = min(base, start + (200_000 if kind == "flat" else base))
                index.add(ids[start:stop], data[start:stop])
            build_s = time.perf_counter() - t
            trained = index._trained_size
            t = time.perf_counter()
            for start in range(base, n, 1000):
                index.add(ids[start : start + 1000], data[start : start + 1000])
            add_s = time.perf_counter() - t
            assert index._trained_size == trained, "the incremental add rebuilt the index"
            _, found = index.search(queries, k)
            recall = recall_at(found, truth)
            count = args.latency_queries if kind != "flat" else args.exact_latency_queries
            times = []
            for q in queries[:count]:
                t = time.perf_counter()
                index.search(q[None], k)
                times.append(time.perf_counter() - t)
            entry = {
                "recall@10": round(recall, 4),
                **harness.latency(times),
                "build_s": round(build_s, 1),
                f"add_{extra}_incremental_s": round(add_s, 2),
                "bytes_per_vector": round(index.bytes_per_vector(), 1),
                "latency_queries": len(times),
                "params": {
                    name: value
                    for name, value in [
                        ("nlist", getattr(index._index, "nlist", None)),
                        ("nprobe", index.nprobe if kind in ("ivf", "ivfpq") else None),
                        ("M", index.hnsw_m if kind == "hnsw" else None),
                        ("efConstruction", index.ef_construction if kind == "hnsw" else None),
                        ("efSearch", index.ef_search if kind == "hnsw" else None),
                        ("pq_m", index.pq_m if kind == "ivfpq" else None),
                    ]
                    if value is not None
                },
            }
            # The recall/latency curve over the search-time knob, on the same index.
            knob = {"ivf": "nprobe", "ivfpq": "nprobe", "hnsw": "ef_search"}.get(kind)
            if knob:
                curve = []
                for value in args.nprobe_curve if knob == "nprobe" else args.ef_curve:
                    setattr(index, knob, value)
                    _, found = index.search(queries, k)
                    times = []
                    for q in queries[: args.latency_queries]:
                        t = time.perf_counter()
                        index.search(q[None], k)
                        times.append(time.perf_counter() - t)
                    curve.append(
                        {
                            knob: value,
                            "recall@10": round(recall_at(found, truth), 4),
                            **harness.latency(times),
                        }
                    )
                entry["curve"] = curve
            section[f"{kind}_{storage}"] = entry
            print(
                json.dumps({"progress": f"ann n={n} {kind}", "load": load(), **entry}),
                file=sys.stderr,
                flush=True,
            )
            del index
            gc.collect()
        section["load_start"], section["load_end"] = started, load()
        results[str(n)] = section
        del data
        gc.collect()
    return results


class TopicPages:
    """Multi-vector pages of noisy topic vectors, and planted queries (see the module docstring)."""

    def __init__(self, dim: int = 128, topics: int = 2000, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.dim = dim
        self.topics = unit(self.rng.standard_normal((topics, dim), dtype=np.float32))

    def pages(
        self, count: int, length: int, per_page: int = 8, dtype: type = np.float16
    ) -> PackedMultiVectors:
        offsets = np.arange(count + 1, dtype=np.int64) * length
        vectors = np.empty((count * length, self.dim), dtype=dtype)
        for first in range(0, count, 500):
            last = min(count, first + 500)
            chosen = np.stack(
                [self.rng.choice(len(self.topics), per_page, replace=False) for _ in range(first, last)]
            )
            picks = chosen[
                np.arange(last - first)[:, None], self.rng.integers(0, per_page, (last - first, length))
            ]
            noise = unit(self.rng.standard_normal(((last - first) * length, self.dim), dtype=np.float32))
            vectors[first * length : last * length] = unit(self.topics[picks.ravel()] + 0.6 * noise)
        return PackedMultiVectors(vectors, offsets)

    def queries(
        self, pages: PackedMultiVectors, count: int, length: int = 20
    ) -> tuple[list[np.ndarray], np.ndarray]:
        targets = self.rng.choice(len(pages), count, replace=False)
        out = []
        for target in targets:
            page = pages[target].astype(np.float32)
            rows = page[self.rng.choice(len(page), length)]
            out.append(unit(rows + 0.3 * unit(self.rng.standard_normal(rows.shape, dtype=np.float32))))
        return out, targets


def timed(function, repeat: int = 3) -> tuple[object, float]:
    """The result and the best wall time of ``repeat`` calls (the least disturbed on a shared machine)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - t)
    return result, best


# ---- (a) MaxSim ---------------------------------------------------------------------------------


def bench_maxsim(args: argparse.Namespace) -> dict:
    import torch

    started = load()
    processing = colpali_engine("colpali_engine.utils.processing_utils")
    score_multi_vector = processing.BaseVisualRetrieverProcessor.score_multi_vector
    gen = TopicPages(seed=1)
    store = gen.pages(args.maxsim_pages, args.maxsim_page_vectors, dtype=np.float32)
    queries, _ = gen.queries(store, args.maxsim_queries)
    pages = [torch.from_numpy(store[i]) for i in range(len(store))]
    torch_queries = [torch.from_numpy(q) for q in queries]
    theirs, theirs_s = timed(lambda: score_multi_vector(torch_queries, pages, device="cpu").numpy())
    from_tensors, tensors_s = timed(lambda: maxsim(torch_queries, pages))
    from_packed, packed_s = timed(lambda: maxsim(queries, store))
    half = PackedMultiVectors(store.vectors.astype(np.float16), store.offsets)
    from_half, half_s = timed(lambda: maxsim(queries, half))
    return {
        "pages": args.maxsim_pages,
        "vectors_per_page": args.maxsim_page_vectors,
        "dim": 128,
        "queries": args.maxsim_queries,
        "query_vectors": 20,
        "torch_threads": torch.get_num_threads(),
        "colpali_engine_score_multi_vector_s": round(theirs_s, 3),
        "ours_from_torch_tensor_list_s": round(tensors_s, 3),
        "ours_from_packed_fp32_s": round(packed_s, 3),
        "ours_from_packed_fp16_s": round(half_s, 3),
        "max_abs_diff_vs_colpali": float(np.abs(from_tensors - theirs).max()),
        "max_abs_diff_packed_vs_colpali": float(np.abs(from_packed - theirs).max()),
        "max_abs_diff_fp16_store_vs_colpali": float(np.abs(from_half - theirs).max()),
        "score_range": [round(float(theirs.min()), 3), round(float(theirs.max()), 3)],
        "timing": "best of 3 runs",
        "load_start": started,
        "load_end": load(),
    }


# ---- (b) MUVERA ---------------------------------------------------------------------------------


def bench_muvera(args: argparse.Namespace) -> dict:
    started = load()
    gen = TopicPages(topics=args.topics, seed=2)
    t = time.perf_counter()
    store = gen.pages(args.muvera_pages, args.muvera_page_vectors)
    generate_s = time.perf_counter() - t
    queries, targets = gen.queries(store, args.muvera_queries)
    t = time.perf_counter()
    exact = maxsim(queries, store)
    exact_all_s = time.perf_counter() - t
    truth = np.argsort(-exact, axis=1, kind="stable")[:, :10]
    _, exact_one_s = timed(lambda: maxsim(queries[:1], store), repeat=2)
    result: dict = {
        "pages": args.muvera_pages,
        "vectors_per_page": args.muvera_page_vectors,
        "dim": 128,
        "queries": args.muvera_queries,
        "query_vectors": 20,
        "generate_s": round(generate_s, 1),
        "planted_page_is_exact_top1": float(np.mean(truth[:, 0] == targets)),
        "exact_maxsim_one_query_ms": round(exact_one_s * 1000, 1),
        "exact_maxsim_all_queries_s": round(exact_all_s, 1),
        "raw_multivector_bytes_per_page": {
            "fp16": args.muvera_page_vectors * 128 * 2,
            "fp32": args.muvera_page_vectors * 128 * 4,
        },
    }
    configs = {
        "fde_exact_flat": {"train_threshold": 20_000},  # the default: 10k pages stay exact
        "fde_hnsw": {"train_threshold": 1000},
    }
    for name, params in configs.items():
        encoder = Muvera(128, k_sim=4, d_proj=16, reps=20, seed=0)
        index = VectorIndex(encoder.output_dim, "hnsw", "fp16", normalize=False, **params)
        retriever = MuveraRetriever(encoder, index)
        t = time.perf_counter()
        for first in range(0, len(store), 500):
            chunk = np.arange(first, min(len(store), first + 500))
            retriever.add(chunk, store.take(chunk))
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        encoder.encode_documents(store.take(np.arange(min(1000, len(store)))))
        encode_per_page_ms = (time.perf_counter() - t) * 1000 / min(1000, len(store))
        curve = []
        for ef in args.muvera_ef:
            found, times, fde_only = [], [], []
            for query in queries:
                t = time.perf_counter()
                _, ids = retriever.search([query], 10, ef=ef)
                times.append(time.perf_counter() - t)
                found.append(ids[0])
            found = np.array(found)
            for query in queries[:10]:
                t = time.perf_counter()
                retriever.index.search(encoder.encode_queries([query]), ef)
                fde_only.append(time.perf_counter() - t)
            curve.append(
                {
                    "ef": ef,
                    "recall@10_vs_exact_maxsim": round(recall_at(found, truth), 4),
                    "planted_page_at_1": float(np.mean(found[:, 0] == targets)),
                    **harness.latency(times),
                    "fde_search_only_p50_ms": harness.latency(fde_only)["p50_ms"],
                }
            )
        sizes = retriever.bytes_per_page()
        result[name] = {
            "fde_dim": encoder.output_dim,
            "k_sim": 4,
            "d_proj": 16,
            "reps": 20,
            "index": repr(retriever.index),
            "build_s": round(build_s, 1),
            "fde_encode_per_page_ms": round(encode_per_page_ms, 2),
            "fde_index_bytes_per_page": round(sizes["fde_index"], 1),
            "stored_multivector_bytes_per_page": round(sizes["multivectors"], 1),
            "curve": curve,
        }
        print(json.dumps({"progress": f"muvera {name}", "load": load()}), file=sys.stderr, flush=True)
        del retriever, index
        gc.collect()
    result["load_start"], result["load_end"] = started, load()
    return result


def bench_compact(args: argparse.Namespace) -> dict:
    """Multi-vectors kept as float16, int8 or binary codes (``vectors.quantize``): memory a page,
    recall@10 against the float16 retriever and exact MaxSim, search latency."""
    started = load()
    gen = TopicPages(topics=args.topics, seed=2)
    store = gen.pages(args.compact_pages, args.muvera_page_vectors)
    queries, targets = gen.queries(store, args.muvera_queries)
    truth = np.argsort(-maxsim(queries, store), axis=1, kind="stable")[:, :10]
    result: dict = {"pages": args.compact_pages, "vectors_per_page": args.muvera_page_vectors, "dim": 128}
    reference = None
    for storage in ("float16", "int8", "binary"):
        retriever = MuveraRetriever(Muvera(128, k_sim=4, d_proj=16, reps=20, seed=0), storage=storage)
        t = time.perf_counter()
        for first in range(0, len(store), 500):
            chunk = np.arange(first, min(len(store), first + 500))
            retriever.add(chunk, store.take(chunk))
        build_s = time.perf_counter() - t
        for rescore in (10, args.compact_rescore) if storage != "float16" else (0,):
            found, times = [], []
            for query in queries:
                t = time.perf_counter()
                _, ids = retriever.search([query], 10, ef=args.compact_ef, rescore=rescore)
                times.append(time.perf_counter() - t)
                found.append(ids[0])
            found = np.array(found)
            reference = found if storage == "float16" else reference
            sizes = retriever.bytes_per_page()
            result[storage if storage == "float16" else f"{storage}_rescore{rescore}"] = {
                "bytes_per_page_in_memory": round(sizes["multivectors"], 1),
                "bytes_per_page_on_disk": round(sizes.get("on_disk", sizes["multivectors"]), 1),
                "fde_index_bytes_per_page": round(sizes["fde_index"], 1),
                "recall@10_vs_float16": round(recall_at(found, reference), 4),
                "recall@10_vs_exact_maxsim": round(recall_at(found, truth), 4),
                "planted_page_at_1": float(np.mean(found[:, 0] == targets)),
                "build_s": round(build_s, 1),
                **harness.latency(times),
            }
        print(json.dumps({"progress": f"compact {storage}", "load": load()}), file=sys.stderr, flush=True)
        del retriever
        gc.collect()
    result["ef"], result["load_start"], result["load_end"] = args.compact_ef, started, load()
    return result


# ---- (c) token pooling --------------------------------------------------------------------------


def bench_pooling(args: argparse.Namespace) -> dict:
    import torch

    started = load()
    gen = TopicPages(topics=args.topics, seed=3)
    store = gen.pages(args.pooling_pages, args.pooling_page_vectors, dtype=np.float32)
    queries, targets = gen.queries(store, args.pooling_queries)
    exact = maxsim(queries, store)
    truth = np.argsort(-exact, axis=1, kind="stable")[:, :10]
    pooler = colpali_engine("colpali_engine.compression.token_pooling").HierarchicalTokenPooler()
    sample = [store[i] for i in range(min(5, len(store)))]
    rows = []
    for factor in (1, 2, 3, 4):
        t = time.perf_counter()
        pooled = pool_multivectors(store, factor)
        pool_s = time.perf_counter() - t
        scores = maxsim(queries, pooled)
        found = np.argsort(-scores, axis=1, kind="stable")[:, :10]
        t = time.perf_counter()
        pooler.pool_embeddings([torch.from_numpy(page) for page in sample], pool_factor=factor)
        colpali_ms = (time.perf_counter() - t) * 1000 / len(sample)
        rows.append(
            {
                "pool_factor": factor,
                "vectors_kept": int(pooled.lengths.sum()),
                "fraction_kept": round(float(pooled.lengths.sum() / store.lengths.sum()), 4),
                "recall@10_vs_unpooled": round(recall_at(found, truth), 4),
                "planted_page_at_1": float(np.mean(found[:, 0] == targets)),
                "ours_ms_per_page": round(pool_s * 1000 / len(store), 1),
                "colpali_engine_ms_per_page": round(colpali_ms, 1),
            }
        )
        print(json.dumps({"progress": "pooling", **rows[-1]}), file=sys.stderr, flush=True)
    return {
        "pages": args.pooling_pages,
        "vectors_per_page": args.pooling_page_vectors,
        "dim": 128,
        "queries": args.pooling_queries,
        "colpali_engine_timed_on_pages": len(sample),
        "rows": rows,
        "load_start": started,
        "load_end": load(),
    }


# ---- main ---------------------------------------------------------------------------------------

SECTIONS = ("maxsim", "muvera", "compact", "pooling", "ann")
# --tiny: every section at toy size, in seconds
TINY = {
    "maxsim_pages": 20, "maxsim_page_vectors": 40, "maxsim_queries": 3, "muvera_pages": 200,
    "muvera_page_vectors": 40, "muvera_queries": 5, "muvera_ef": "32,64", "topics": 100, "compact_pages": 200,
    "compact_ef": 64, "compact_rescore": 16, "pooling_pages": 20, "pooling_page_vectors": 40,
    "pooling_queries": 5, "ann_sizes": "3000", "ann_dim": 32, "ann_centres": 20, "ann_queries": 20,
    "ann_add": 1000, "latency_queries": 10, "exact_latency_queries": 5, "nprobe_curve": "1,4",
    "ef_curve": "16,32",
}  # fmt: skip


def numbers(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--sections", default=",".join(SECTIONS))
    # (a) MaxSim
    parser.add_argument("--maxsim-pages", type=int, default=1000)
    parser.add_argument("--maxsim-page-vectors", type=int, default=1030)
    parser.add_argument("--maxsim-queries", type=int, default=20)
    # (b) MUVERA
    parser.add_argument("--muvera-pages", type=int, default=10_000)
    parser.add_argument("--muvera-page-vectors", type=int, default=1030)
    parser.add_argument("--muvera-queries", type=int, default=50)
    parser.add_argument("--muvera-ef", default="256,512,1024")
    parser.add_argument("--topics", type=int, default=2000)
    # (b') compact multi-vectors
    parser.add_argument("--compact-pages", type=int, default=2000)
    parser.add_argument("--compact-ef", type=int, default=512)
    parser.add_argument("--compact-rescore", type=int, default=64)
    # (c) pooling
    parser.add_argument("--pooling-pages", type=int, default=1000)
    parser.add_argument("--pooling-page-vectors", type=int, default=1030)
    parser.add_argument("--pooling-queries", type=int, default=50)
    # (d) ANN
    parser.add_argument("--ann-sizes", default="100000,1000000")
    parser.add_argument("--ann-dim", type=int, default=2048)
    parser.add_argument("--ann-centres", type=int, default=3000)
    parser.add_argument("--ann-queries", type=int, default=200)
    parser.add_argument(
        "--ann-add", type=int, default=10_000, help="vectors added one batch of 1,000 at a time"
    )
    parser.add_argument("--ann-kinds", default="flat:fp16,ivf:fp16,hnsw:fp16,ivfpq:pq", help="or none")
    parser.add_argument("--latency-queries", type=int, default=100)
    parser.add_argument("--exact-latency-queries", type=int, default=20)
    parser.add_argument("--hnsw-max", type=int, default=200_000, help="largest n at which HNSW is built")
    parser.add_argument("--nprobe-curve", default="8,16,32,64")
    parser.add_argument("--ef-curve", default="32,64,128,256")
    args = harness.start(parser, argv)
    if args.tiny:
        vars(args).update(TINY)
    args.ann_sizes, args.muvera_ef = numbers(args.ann_sizes), numbers(args.muvera_ef)
    args.nprobe_curve, args.ef_curve = numbers(args.nprobe_curve), numbers(args.ef_curve)
    args.ann_kinds = [(*item.split(":"), {}) for item in args.ann_kinds.split(",") if item != "none"]

    runners = {
        "maxsim": bench_maxsim,
        "muvera": bench_muvera,
        "compact": bench_compact,
        "pooling": bench_pooling,
        "ann": bench_ann,
    }
    harness.finish(args, __spec__.name, sections(parser, args, runners))


def sections(parser: argparse.ArgumentParser, args: argparse.Namespace, runners: dict) -> dict:
    """The results of the ``runners`` that ``args.sections`` names (comma-separated)."""
    report = {}
    for name in args.sections.split(","):
        if name not in runners:
            parser.error(f"unknown section {name!r}; known: {', '.join(runners)}")
        report[name] = runners[name](args)
    return report


if __name__ == "__main__":
    main()
