"""Ingestion speed, retrieval quality and query latency on IRPAPERS (issue 2's numbers).

    python -m benchmarks.irpapers --index DIR [--ingest [--no-dense]] [--configs lexical rsf:0.1 ...]
    python -m benchmarks.irpapers --index qdrant:DIR ...      # the same on the Qdrant store
    python -m benchmarks.irpapers --index DIR --configs dense rsf:0.1 --rerank cross-encoder --rerank-model M
    python -m benchmarks.irpapers --tiny      # four typeset tables, ingested and searched lexically

With --ingest, DIR is created afresh by `pagesight ingest` over the 155 PDFs (end to end, as a user
runs it), then the unchanged folder is ingested again; both are timed, with the peak memory of the
largest process. Then each search configuration (``pagesight eval``'s, ``eval.harness``) over the
180 questions: Recall@1/5/10/20, nDCG@10 and MRR@10, page-level (``eval.metrics``), and the search
latency in a warm process. With --rerank, each configuration again with that reranker over its
--rerank-candidates best hits (latency includes the reranking). ``rankings``: each configuration's
ranked pages by question (``--rankings FILE``), to compare two commits' rankings exactly.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import harness
from pagesight import Index
from pagesight.eval import harness as eval_harness
from pagesight.eval.dataset import Dataset
from pagesight.request import SearchRequest

DEPTH = 20  # the pages ranked a question


def ingest(index: str, pdfs: Path, dense: bool) -> dict:
    shutil.rmtree(index.removeprefix("qdrant:"), ignore_errors=True)  # a folder, or a local-mode Qdrant's
    cli = [*harness.PYTHON_M, "pagesight", "ingest", str(pdfs), "--index", str(index), "--json"]
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


def configurations(names: list[str], rerank: str | None, candidates: int, model: str | None) -> list:
    configs = []
    for name in names:
        parsed = eval_harness.Config.parse(name)
        configs.append(parsed)
        if rerank:
            configs.append(parsed.reranked(rerank, candidates, model))
    return configs


def searched(index: Index, data: Dataset, configs: list) -> tuple[list[dict], dict]:
    """Each configuration's summary (metrics and latency) and its ranked pages by question."""
    pages = index.catalog.counts()["pages"]
    rows, rankings = [], {}
    for result in eval_harness.evaluate(index, data, configs, depth=DEPTH):
        rows.append(result.summary(pages))
        rankings[result.config.name] = {
            qid: [page for page, _ in ranked] for qid, ranked in result.run.items()
        }
    return rows, rankings


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--index", help="an index folder or store location")
    parser.add_argument("--data", type=Path, default=harness.SHARED / "irpapers")
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
    parser.add_argument("--rankings", type=Path, help="write each configuration's ranked pages here")
    args = harness.start(parser, argv)
    result: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            data = harness.toy_dataset(Path(tmp) / "data")
            location, build, dense = str(Path(tmp) / "index"), True, False
        elif args.index:
            data, location, build, dense = Dataset.load(args.data), args.index, args.ingest, not args.no_dense
        else:
            parser.error("--index is needed (or --tiny)")
        if build:
            result["ingest"] = ingest(location, data.documents, dense)
        configs = configurations(args.configs, args.rerank, args.rerank_candidates, args.rerank_model)
        with Index.open(location, create=False) as index:
            result["tiles"] = index.catalog.counts()["tiles"]
            result["configs"], rankings = searched(index, data, configs)
    if args.rankings:
        args.rankings.write_text(json.dumps(rankings, indent=1) + "\n")
    harness.finish(args, __spec__.name, {"dataset": data.name, **result})


if __name__ == "__main__":
    main()
