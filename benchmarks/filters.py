"""Search latency with a ``where`` filter passing 1 %, 10 % and all of an index's documents.

    python -m benchmarks.filters --index DIR [--data ../shared/data/irpapers] [--mode hybrid]
    python -m benchmarks.filters --tiny      # an index of four typeset tables, made here

The filters keep the first documents by id (``id in (...)``), and ``pages >= 1`` for all of them;
each configuration runs the dataset's questions (k 10, snippets and boxes) in a warm process: the
share of documents passing, the latency quantiles, and whether every filtered BM25 ranking equals
the whole index's BM25 ranking (its first 1,000 tiles) with the other documents taken out. Fused
rankings and document evidence differ by design: relative score fusion and the document score
scale each run by the tiles it ranks.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks import harness
from pagesight import Index
from pagesight.eval.dataset import Dataset
from pagesight.request import SearchRequest


def measure(index: Index, questions: list[str], mode: str | None) -> list[dict]:
    ids = index.documents()
    filters = {
        0.01: f"id in ({', '.join(ids[: max(1, len(ids) // 100)])})",
        0.1: f"id in ({', '.join(ids[: max(1, len(ids) // 10)])})",
        1.0: "pages >= 1",
    }
    base = SearchRequest(mode=mode)
    tiles = index.catalog.counts()["tiles"]
    lexical = SearchRequest(mode="lexical", candidates=min(tiles, 1000), document_weight=0)
    index.search(base.replace(query="warm up"))
    rows = []
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
        rows.append(
            {
                "where": where,
                "share": round(len(kept) / len(ids), 4),
                "documents": len(kept),
                **harness.latency(latencies),
                "equal_to_filtering_the_ranking": equal,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--index", help="an index of the dataset's documents")
    parser.add_argument("--data", type=Path, default=harness.SHARED / "irpapers", help="its questions")
    parser.add_argument("--mode", default=None, help="the search's mode (default: the index's)")
    args = harness.start(parser, argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            data = harness.toy_dataset(Path(tmp) / "data")
            index = harness.toy_index(Path(tmp) / "index", data)
        elif args.index:
            data, index = Dataset.load(args.data), Index.open(args.index, create=False)
        else:
            parser.error("--index is needed (or --tiny)")
        with index:
            counts = index.catalog.counts()
            rows = measure(index, list(data.queries.values()), args.mode)
    result = {"documents": counts["documents"], "tiles": counts["tiles"], "questions": len(data.queries)}
    harness.finish(args, __spec__.name, {**result, "filters": rows})


if __name__ == "__main__":
    main()
