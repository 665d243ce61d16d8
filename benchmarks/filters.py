"""Search latency with a ``where`` filter passing 1 %, 10 % and all of an index's documents.

    python benchmarks/filters.py --index DIR [--data ../shared/data/irpapers] [--mode hybrid]

The filters keep the first documents by id (``id in (...)``), and ``pages >= 1`` for all of them;
each configuration runs the dataset's questions (k 10, snippets and boxes) in a warm process and
prints one JSON object: the share of documents passing, p50 and p95 latency, and whether every
filtered BM25 ranking equals the whole index's BM25 ranking (its first 1,000 tiles) with the other
documents taken out. Fused rankings and document evidence differ by design: relative score fusion
and the document score scale each run by the tiles it ranks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from pagesight import Index
from pagesight.request import SearchRequest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--index", required=True)
    parser.add_argument("--data", type=Path, default=Path("../shared/data/irpapers"))
    parser.add_argument("--mode", default=None)
    args = parser.parse_args()
    questions = [json.loads(line)["text"] for line in (args.data / "queries.jsonl").open()]
    index = Index.open(args.index, create=False)
    ids = index.documents()
    filters = {
        0.01: f"id in ({', '.join(ids[: max(1, len(ids) // 100)])})",
        0.1: f"id in ({', '.join(ids[: max(1, len(ids) // 10)])})",
        1.0: "pages >= 1",
    }
    base = SearchRequest(mode=args.mode)
    tiles = index.catalog.counts()["tiles"]
    lexical = SearchRequest(mode="lexical", candidates=min(tiles, 1000), document_weight=0)
    index.search(base.replace(query="warm up"))
    for where in filters.values():
        kept = {row["id"] for row in index.document_list(where)}
        latencies, equal = [], True
        for text in questions:
            start = time.perf_counter()
            index.search(base.replace(query=text, where=where))
            latencies.append(time.perf_counter() - start)
            everything = index.search(lexical.replace(query=text, k=min(tiles, 1000)), evidence=False)
            filtered = index.search(lexical.replace(query=text, where=where), evidence=False)
            expected = [(h.page_id, h.tile) for h in everything if h.doc_id in kept]
            shown = min(len(filtered), len(expected))  # a document's tiles may lie past the 1,000
            equal &= [(h.page_id, h.tile) for h in filtered][:shown] == expected[:shown]
        latencies.sort()
        print(
            json.dumps(
                {
                    "share": round(len(kept) / len(ids), 4),
                    "documents": len(kept),
                    "p50_ms": round(1000 * statistics.median(latencies), 2),
                    "p95_ms": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 2),
                    "equal_to_filtering_the_ranking": equal,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
