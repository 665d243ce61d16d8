"""Fit the learned ranker (``search.ranking``) on judged questions, and measure it on sets it was not
fitted on (issue 27).

    python benchmarks/ranker.py DATASET=INDEX [DATASET=INDEX ...] [--out ranker.json] [--json out.json]

Each DATASET is a folder as ``pagesight eval`` reads it (queries.jsonl, qrels.tsv with page ids),
INDEX an index of its documents made with the defaults (BM25 and a dense model). Every question is
searched twice, as ``pagesight eval`` does: over the whole collection and inside its own documents
(``--within-document``); each search's first ``--depth`` hybrid hits, with the ranker off, are the
candidates, with their features (``ranking.features``) and whether their page is relevant.

With two sets or more, each set is measured with a ranker fitted on the others (leave one set out),
against the same hits unranked: Recall@1, Recall@5, Recall@10 and nDCG@10 per protocol. A figure
there is what a collection of another kind than those it was fitted on can expect. ``--out``
writes the ranker fitted on all the sets (the packaged ``rankers/default.json`` is fitted on
IRPAPERS, financebench-dev and mmlongbench-dev); ``SearchRequest.ranker_file`` or ``--ranker-file``
then uses it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pagesight import Index
from pagesight.eval import metrics
from pagesight.eval.dataset import Dataset
from pagesight.request import SearchRequest
from pagesight.search import ranking

REPORTED = ("recall@1", "recall@5", "recall@10", "ndcg@10")
PROTOCOLS = ("whole", "within")


def collect(dataset: Dataset, index: Index, depth: int) -> list[dict]:
    """Each question's candidates in each protocol: page ids in fused order, features, relevance."""
    catalog = index.catalog
    bursts = index.store.retrievers().lexical.bursts
    found = []
    for protocol in PROTOCOLS:
        for qid, text in dataset.queries.items():
            judged = dataset.qrels.get(qid)
            if not judged:
                continue
            doc_ids = dataset.documents_of(qid, "page") if protocol == "within" else None
            request = SearchRequest(text, k=depth, mode="hybrid", ranker=False, doc_ids=doc_ids)
            hits = index.search(request, evidence=False)
            rows = [catalog.tile_at(hit.doc_id, hit.page, hit.tile) for hit in hits]
            headings = catalog.headings([row.id for row in rows])
            candidates = [
                ranking.Candidate(
                    ranking.reading("\n".join(span[0] for span in row.spans), headings.get(row.id, "")),
                    hit.score,
                    hit.scores.get("bm25", 0.0),
                    hit.scores.get("dense", 0.0),
                )
                for hit, row in zip(hits, rows)
            ]
            weights = ranking.question_weights(text, bursts)
            found.append(
                {
                    "protocol": protocol,
                    "qid": qid,
                    "pages": [hit.page_id for hit in hits],
                    "features": ranking.features(weights, text, candidates),
                    "relevant": [judged.get(hit.page_id, 0) > 0 for hit in hits],
                    "judged": judged,
                }
            )
    return found


def measure(questions: list[dict], chosen: ranking.Ranker | None) -> dict[str, dict[str, float]]:
    """Mean metrics per protocol of the candidates in fused order, or reordered by ``chosen``."""
    result = {}
    for protocol in PROTOCOLS:
        run, qrels = {}, {}
        for q in questions:
            if q["protocol"] != protocol:
                continue
            pages = q["pages"]
            if chosen is not None and pages:
                head = min(chosen.depth, len(pages))
                order = np.argsort(-chosen.scores(q["features"][:head]), kind="stable")
                pages = [pages[i] for i in order] + pages[head:]
            run[q["qid"]] = list(dict.fromkeys(pages))  # a page once, at its best tile
            qrels[q["qid"]] = q["judged"]
        means = metrics.mean(metrics.per_query(run, qrels))
        result[protocol] = {name: round(means[name], 3) for name in REPORTED}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sets", nargs="+", help="DATASET=INDEX")
    parser.add_argument("--depth", type=int, default=ranking.DEPTH, help="candidates a question")
    parser.add_argument("--out", type=Path, help="write the ranker fitted on all the sets here")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args()
    data = {}
    for given in args.sets:
        folder, _, index = given.partition("=")
        dataset = Dataset.load(folder)
        data[dataset.name] = collect(dataset, Index.open(index or folder), args.depth)
        print(f"{dataset.name}: {len(data[dataset.name]) // 2} questions")

    def groups(names):
        return [(q["features"], q["relevant"]) for name in names for q in data[name]]

    report = {}
    if len(data) > 1:
        print("\nleave one set out: R@1 / R@5 / R@10 / nDCG@10, unranked -> ranked")
        for held in data:
            fitted = ranking.fit(groups([name for name in data if name != held]), args.depth)
            report[held] = {"unranked": measure(data[held], None), "ranked": measure(data[held], fitted)}
            for protocol in PROTOCOLS:
                before = " / ".join(f"{v:.3f}" for v in report[held]["unranked"][protocol].values())
                after = " / ".join(f"{v:.3f}" for v in report[held]["ranked"][protocol].values())
                print(f"{held:18} {protocol:6}  {before}  ->  {after}")
    if args.out:
        about = {"fitted on": {name: len(qs) // 2 for name, qs in data.items()}, "protocols": list(PROTOCOLS)}
        ranking.fit(groups(data), args.depth, about=about).save(args.out)
        print(f"\nwrote {args.out}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
