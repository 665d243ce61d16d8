"""Ranking metrics over ranked lists, as trec_eval defines them (linear gains for nDCG).

A run maps a query id to its ranked list of corpus ids (best first, no repeats); qrels map a query
id to graded judgements ``{corpus id: relevance}``, relevance > 0 meaning relevant. Every metric is
computed per query and averaged over the queries that have at least one relevant item; a query the
run does not answer scores zero, as with ``trec_eval -c``.

Written here rather than taken from pytrec-eval or ranx because a run is a list in our rank order
(those libraries re-sort by score and break ties by id), and the core package should not need their
native or JIT-compiled dependencies; tests check every value against pytrec-eval on the same runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Run = Mapping[str, Sequence[str]]
Qrels = Mapping[str, Mapping[str, int]]

RECALL_CUTOFFS = (1, 5, 10, 20)
SUCCESS_CUTOFFS = (1, 5, 10)


def recall(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    relevant = {doc for doc, rel in judged.items() if rel > 0}
    return sum(1 for doc in ranked[:k] if doc in relevant) / len(relevant)


def success(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    return float(any(judged.get(doc, 0) > 0 for doc in ranked[:k]))


def reciprocal_rank(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    for rank, doc in enumerate(ranked[:k], 1):
        if judged.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def ndcg(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    gains = [max(judged.get(doc, 0), 0) for doc in ranked[:k]]
    ideal = sorted((rel for rel in judged.values() if rel > 0), reverse=True)[:k]
    dcg = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, 1))
    idcg = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal, 1))
    return dcg / idcg


def per_query(run: Run, qrels: Qrels) -> dict[str, dict[str, float]]:
    """Every metric for every query with a relevant item, keyed like ``recall@5``."""
    scores = {}
    for qid, judged in qrels.items():
        if not any(rel > 0 for rel in judged.values()):
            continue
        ranked = list(run.get(qid, ()))
        row = {f"recall@{k}": recall(ranked, judged, k) for k in RECALL_CUTOFFS}
        row["ndcg@10"] = ndcg(ranked, judged, 10)
        row["mrr@10"] = reciprocal_rank(ranked, judged, 10)
        row.update({f"success@{k}": success(ranked, judged, k) for k in SUCCESS_CUTOFFS})
        scores[qid] = row
    return scores


def mean(scores: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The average of each metric over queries."""
    if not scores:
        return {}
    names = next(iter(scores.values())).keys()
    return {name: sum(row[name] for row in scores.values()) / len(scores) for name in names}


def recall_curve(run: Run, qrels: Qrels, depth: int = 20) -> list[float]:
    """Mean Recall@k for k = 1..depth, for the recall-at-k plot."""
    judged = {qid: j for qid, j in qrels.items() if any(rel > 0 for rel in j.values())}
    if not judged:
        return []
    return [
        sum(recall(list(run.get(qid, ())), j, k) for qid, j in judged.items()) / len(judged)
        for k in range(1, depth + 1)
    ]
