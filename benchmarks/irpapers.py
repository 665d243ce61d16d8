"""Ingestion speed, retrieval quality and query latency on IRPAPERS (issue 2's numbers).

    python benchmarks/irpapers.py --index DIR [--ingest [--no-dense]] [--configs lexical rsf:0.1 ...]
    python benchmarks/irpapers.py --index qdrant:DIR ...      # the same on the Qdrant store
    python benchmarks/irpapers.py --index DIR --configs dense rsf:0.1 --rerank cross-encoder --rerank-model M


With --ingest, DIR is created afresh by `pagesight ingest` over the 155 PDFs (end to end, as a user
runs it), then the unchanged folder is ingested again; both are timed, with the peak memory of the
largest process. Then one JSON object per search configuration: Recall@1/5/20 over the 180
questions (page-level: hits of the same page count once, in rank order) and the median / p95
search latency in a warm process. With --rerank, each configuration again with that reranker over
its --rerank-candidates best hits (latency includes the reranking).
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pagesight import Index
from pagesight.eval.harness import Config
from pagesight.request import SearchRequest


def load(data: Path) -> tuple[dict[str, str], dict[str, set[str]]]:
    queries = {}
    with (data / "queries.jsonl").open() as handle:
        for line in handle:
            record = json.loads(line)
            queries[record["_id"]] = record["text"]
    qrels: dict[str, set[str]] = {}
    with (data / "qrels.tsv").open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], set()).add(row["corpus-id"])
    return queries, qrels


def evaluate(index: Index, queries, qrels, request: SearchRequest, cutoffs=(1, 5, 20)) -> dict:
    index.search(request.replace(query="warm up", k=1))
    recall = {c: 0.0 for c in cutoffs}
    latencies = []
    for qid, text in queries.items():
        start = time.perf_counter()
        hits = index.search(request.replace(query=text, k=max(cutoffs)))
        latencies.append(time.perf_counter() - start)
        pages = list(dict.fromkeys(hit.page_id for hit in hits))
        relevant = qrels.get(qid, set())
        for c in cutoffs:
            recall[c] += len(relevant & set(pages[:c])) / max(1, len(relevant))
    latencies.sort()
    return {
        **{f"recall@{c}": round(recall[c] / len(queries), 4) for c in cutoffs},
        "latency_ms_p50": round(statistics.median(latencies) * 1000, 2),
        "latency_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))] * 1000, 2),
        "n_queries": len(queries),
    }


def ingest(index: str, pdfs: Path, dense: bool) -> dict:
    shutil.rmtree(index.removeprefix("qdrant:"), ignore_errors=True)  # a folder, or a local-mode Qdrant's
    cli = [sys.executable, "-m", "pagesight", "ingest", str(pdfs), "--index", str(index), "--json"]
    if not dense:
        cli.append("--no-dense")
    timings = []
    for _ in range(2):
        start = time.perf_counter()
        run = subprocess.run(cli, capture_output=True, text=True, check=True)
        timings.append(time.perf_counter() - start)
    first, again = timings
    with Index.open(index, create=False) as opened:
        pages = opened.catalog.counts()["pages"]
    return {
        "ingest": "dense" if dense else "lexical",
        "pages": pages,
        "ingest_s": round(first, 2),
        "pages_per_s": round(pages / first, 1),
        "reingest_s": round(again, 2),
        "reingest_report": json.loads(run.stdout),
        "peak_rss_mb_largest_process": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, help="an index folder or store location")
    parser.add_argument("--data", type=Path, default=Path(__file__).parents[1] / "../shared/data/irpapers")
    parser.add_argument("--ingest", action="store_true", help="build DIR afresh first, timed")
    parser.add_argument("--no-dense", action="store_true", help="with --ingest: lexical only")
    parser.add_argument(
        "--configs",
        nargs="*",
        default=["lexical"],
        help="eval's configurations: lexical, dense, hybrid, rrf, rsf:ALPHA, ...",
    )
    parser.add_argument("--rerank", help="also each configuration reranked by this reranker")
    parser.add_argument("--rerank-model", help="the reranker's model (hub id or folder)")
    parser.add_argument("--rerank-candidates", type=int, default=SearchRequest.rerank_candidates)
    args = parser.parse_args()
    if args.ingest:
        print(json.dumps(ingest(args.index, args.data / "pdfs", dense=not args.no_dense)), flush=True)
    queries, qrels = load(args.data)
    index = Index.open(args.index, create=False)
    counts = index.catalog.counts()
    for config in args.configs:
        parsed = Config.parse(config)
        runs = {config: parsed.request}
        if args.rerank:
            reranked = parsed.reranked(args.rerank, args.rerank_candidates, args.rerank_model)
            runs[f"{config}+{args.rerank}@{args.rerank_candidates}"] = reranked.request
        for name, request in runs.items():
            result = evaluate(index, queries, qrels, request)
            print(
                json.dumps({"config": name, "pages": counts["pages"], "tiles": counts["tiles"], **result}),
                flush=True,
            )


if __name__ == "__main__":
    main()
