"""The trade-off knobs of issue 41 on synthetic vectors: recall against exact search, and latency.

    python -m benchmarks.knobs [--docs 20000] [--tokens 30] [--reps 5,10,20] [--ef 64,128,256,512,1024]
                               [--vectors 100000] [--dim 384] [--json FILE]
    python -m benchmarks.knobs --tiny        # both sections at toy size

Prints one JSON object (also written to ``--json``), with the machine's load averages at the start
and end of each section, since timings on a shared machine depend on them.

- ``muvera``: MUVERA's ``ef`` (candidates re-scored by exact MaxSim; ``SearchRequest.ef``) against
  its repetitions (``Settings.muvera_reps``), over ``--docs`` pages of ``--tokens`` 128-dim token
  vectors (``benchmarks/vectors.py``'s ``TopicPages``: each page a few of 2,000 topics, so pages
  share topics and the top 10 is not trivial; queries of 20 vectors sampled from a planted page).
  Each retriever is the local store's (``store.visual.VisualRetriever`` as an index with those
  settings makes it: an IVF index over the encodings, ``Settings.visual_index``'s default, trained
  once the pages reach 20,000), searched through an ``Effort`` as a request's fields reach it.
  Recall@10 is against exact MaxSim over every page, at the FDE index's ``nprobe`` and at every
  cell (MUVERA's own approximation); then the FDE index's ``nprobe`` at one ``ef``.
- ``ann``: single vectors (``--vectors`` x ``--dim``, ``benchmarks/vectors.py``'s ``Clustered``:
  a Gaussian mixture of ``--centres`` clusters in a 64-dim latent space, so a query's neighbours
  span several cells), an IVF index's ``nprobe`` (as the dense parts
  past 100,000 chunks are: fp16, not normalised) and an HNSW graph's ``ef_search`` (``hnsw`` visual
  index: fp16, M 32, efConstruction 80): recall@10 against exact inner product.

Latency is one query at a time, the p50 (and p95) of ``--latency-queries`` queries, on
``--threads`` threads (default 1, FAISS's and BLAS's: a server's request thread searches on one,
``vectors.ann.one_thread_here``, and on a shared machine a second thread's spinning waits cost
more than it gains).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time

import faiss
import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks import harness
from benchmarks.harness import load
from benchmarks.vectors import Clustered, TopicPages, exact_numpy, numbers, recall_at, sections, unit
from pagesight.store.base import Effort
from pagesight.store.local.visual import VisualRetriever
from pagesight.vectors import VectorIndex, maxsim


def progress(**fields) -> None:
    print(json.dumps({**fields, "load": load()}), file=sys.stderr, flush=True)


def retriever_search(retriever: VisualRetriever, effort: Effort):
    return lambda query: [tile for tile, _ in retriever.search(query, 10, effort=effort)]


def index_search(index: VectorIndex, **options):
    return lambda query: index.search(query[None], 10, **options)[1][0]


def timed_searches(search, queries, count: int) -> tuple[np.ndarray, dict[str, float]]:
    """The top 10 of every query (``search(query) -> ids``) and the latency of the first ``count``."""
    found, times = [], []
    for i, query in enumerate(queries):
        start = time.perf_counter()
        ids = search(query)
        if i < count:
            times.append(time.perf_counter() - start)
        found.append(list(ids)[:10] + [-1] * (10 - len(ids)))
    return np.array(found), harness.latency(times)


def bench_muvera(args: argparse.Namespace) -> dict:
    started = load()
    gen = TopicPages(topics=2000, seed=41)
    pages = gen.pages(args.docs, args.tokens)
    queries, targets = gen.queries(pages, args.queries)
    start = time.perf_counter()
    truth = np.argsort(-maxsim(queries, pages), axis=1, kind="stable")[:, :10]
    exact_s = time.perf_counter() - start
    ids = np.arange(len(pages), dtype=np.int64)
    result: dict = {
        "pages": args.docs,
        "vectors_per_page": args.tokens,
        "dim": 128,
        "queries": args.queries,
        "query_vectors": 20,
        "planted_page_is_exact_top1": float(np.mean(truth[:, 0] == targets)),
        "exact_maxsim_ms_per_query": round(exact_s * 1000 / len(queries), 1),
        "rows": [],
    }
    for reps in args.reps:
        retriever = VisualRetriever.empty(128, True, "ivf", muvera={"reps": reps})
        start = time.perf_counter()
        retriever.add(ids, [pages[i] for i in range(len(pages))])
        build_s = time.perf_counter() - start
        engine = retriever.engine
        row = {
            "reps": reps,
            "fde_dim": engine.encoder.output_dim,
            "fde_index": repr(engine.index),  # trained (IVF) from 20,000 pages on, exact below
            "nlist": getattr(engine.index._index, "nlist", None),
            "nprobe": engine.index.nprobe,
            "build_s": round(build_s, 1),
            "fde_index_bytes_per_page": round(engine.bytes_per_page()["fde_index"], 1),
            "by_ef": [],
        }
        # at the index's nprobe, then at every cell: MUVERA's own approximation, no IVF loss
        for nprobe in (None, row["nlist"]):
            for ef in args.ef:
                search = retriever_search(retriever, Effort(ef=ef, nprobe=nprobe))
                found, latency = timed_searches(search, queries, args.latency_queries)
                entry = {
                    "ef": ef,
                    "nprobe": nprobe or row["nprobe"],
                    "recall@10": round(recall_at(found, truth), 4),
                }
                row["by_ef"].append({**entry, **latency})
                progress(section="muvera", reps=reps, **row["by_ef"][-1])
        if reps == args.nprobe_reps:
            row["by_nprobe"] = []
            for nprobe in args.fde_nprobe:
                search = retriever_search(retriever, Effort(ef=args.nprobe_ef, nprobe=nprobe))
                found, latency = timed_searches(search, queries, args.latency_queries)
                entry = {
                    "ef": args.nprobe_ef,
                    "nprobe": nprobe,
                    "recall@10": round(recall_at(found, truth), 4),
                }
                row["by_nprobe"].append({**entry, **latency})
                progress(section="muvera nprobe", reps=reps, **row["by_nprobe"][-1])
        result["rows"].append(row)
        del retriever, engine
        gc.collect()
    result["load_start"], result["load_end"] = started, load()
    return result


def bench_ann(args: argparse.Namespace) -> dict:
    started = load()
    gen = Clustered(args.dim, centres=args.centres, seed=41)
    data = unit(gen.generate(args.vectors, dtype=np.float32))
    queries = unit(gen.queries(data, args.queries))
    truth = exact_numpy(data, queries, 10)
    ids = np.arange(len(data), dtype=np.int64)
    result: dict = {
        "vectors": args.vectors,
        "dim": args.dim,
        "centres": args.centres,
        "queries": args.queries,
    }
    kinds = {
        "ivf": ("nprobe", args.nprobe, {"normalize": False}),
        "hnsw": ("ef_search", args.ef_search, {}),
    }
    for kind, (knob, values, options) in kinds.items():
        index = VectorIndex(args.dim, kind, "fp16", **options)
        start = time.perf_counter()
        index.add(ids, data)
        build_s = time.perf_counter() - start
        section = {"build_s": round(build_s, 1), "default": getattr(index, knob), "curve": []}
        if kind == "ivf":
            section["nlist"] = getattr(index._index, "nlist", None)  # None: exact while small
        for value in values:
            search = index_search(index, **{knob: value})
            found, latency = timed_searches(search, queries, args.latency_queries)
            section["curve"].append({knob: value, "recall@10": round(recall_at(found, truth), 4), **latency})
            progress(section=kind, **section["curve"][-1])
        result[kind] = section
        del index
        gc.collect()
    result["load_start"], result["load_end"] = started, load()
    return result


TINY = {
    "queries": 10, "latency_queries": 5, "docs": 300, "tokens": 8, "reps": [2, 4], "ef": [16, 64],
    "nprobe_reps": 2, "nprobe_ef": 32, "fde_nprobe": [1, 4], "vectors": 2000, "dim": 32, "centres": 10,
    "nprobe": [1, 8], "ef_search": [16, 64],
}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--sections", default="muvera,ann")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--latency-queries", type=int, default=100)
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--reps", type=numbers, default=numbers("5,10,20"))
    parser.add_argument("--ef", type=numbers, default=numbers("64,128,256,512,1024"))
    parser.add_argument("--nprobe-reps", type=int, default=10, help="the repetitions whose nprobe is swept")
    parser.add_argument("--nprobe-ef", type=int, default=512)
    parser.add_argument("--fde-nprobe", type=numbers, default=numbers("8,32,128,512"))
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--centres", type=int, default=100)
    parser.add_argument("--nprobe", type=numbers, default=numbers("1,4,16,32,64,128,256"))
    parser.add_argument("--ef-search", type=numbers, default=numbers("16,32,64,128,256,512"))
    args = harness.start(parser, argv)
    if args.tiny:
        vars(args).update(TINY)
    faiss.omp_set_num_threads(args.threads)
    threadpool_limits(args.threads)
    found = sections(parser, args, {"muvera": bench_muvera, "ann": bench_ann})
    harness.finish(args, __spec__.name, {"threads": args.threads, **found})


if __name__ == "__main__":
    main()
