"""Fit the learned ranker (``search.ranking``) on judged questions, and measure it on sets it was not
fitted on: ``pagesight fit-ranker``.

Every question of a dataset (queries.jsonl, qrels.tsv with page ids) is searched twice, as
``pagesight eval --within-document`` does: over the whole collection and inside its own documents.
Each search's first ``depth`` hybrid hits, with the ranker off, are the candidates, with their
features (``ranking.features``) and whether their page is relevant.

With two sets or more, each set is also measured with a ranker fitted on the others (leave one set
out) against the same hits unranked: what a collection of another kind than those it was fitted
on can expect. The ranker written is fitted on all the sets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pagesight.errors import PagesightError
from pagesight.eval import metrics
from pagesight.eval.dataset import Dataset
from pagesight.index import Index
from pagesight.request import SearchRequest
from pagesight.search import ranking

REPORTED = ("recall@1", "recall@5", "recall@10", "ndcg@10")
PROTOCOLS = ("whole", "within")


@dataclass
class JudgedSearch:
    """One search of a judged question: its candidates' pages in fused order, features, relevance."""

    protocol: str
    qid: str
    pages: list[str]
    features: np.ndarray
    relevant: list[bool]
    judged: dict[str, int]


def collect(
    dataset: Dataset, index: Index, depth: int = ranking.DEPTH, progress: Callable[[int], None] | None = None
) -> list[JudgedSearch]:
    """Each judged question's candidates in each protocol."""
    if not (index.settings.dense_model and not index.settings.visual_encoder):
        raise PagesightError(
            f"{index.store.location}: the ranker reorders hybrid text searches: the index needs a dense model "
            "and no visual encoder"
        )
    catalog = index.catalog
    bursts = index.store.retrievers().lexical.bursts
    found = []
    for protocol in PROTOCOLS:
        for qid, text in dataset.queries.items():
            judged = dataset.qrels.get(qid)
            if not judged or not any(grade > 0 for grade in judged.values()):
                continue
            doc_ids = dataset.documents_of(qid, "page") if protocol == "within" else None
            request = SearchRequest(text, k=depth, mode="hybrid", ranker=False, doc_ids=doc_ids)
            hits = index.search(request, evidence=False)
            ids = [catalog.tile_at(hit.doc_id, hit.page, hit.tile).id for hit in hits]
            profiles = ranking.tile_profiles(catalog, ids)
            candidates = [
                ranking.FirstStageHit(
                    profiles[tile_id], hit.score, hit.scores.get("bm25", 0.0), hit.scores.get("dense", 0.0)
                )
                for hit, tile_id in zip(hits, ids)
            ]
            weights = ranking.question_weights(text, bursts)
            found.append(
                JudgedSearch(
                    protocol,
                    qid,
                    [hit.page_id for hit in hits],
                    ranking.features(weights, text, candidates),
                    [judged.get(hit.page_id, 0) > 0 for hit in hits],
                    judged,
                )
            )
            if progress:
                progress(len(found))
    if not found:
        raise PagesightError(f"{dataset.root}: no question has a relevant page")
    return found


def measure(questions: Sequence[JudgedSearch], chosen: ranking.Ranker | None) -> dict[str, dict[str, float]]:
    """Mean metrics per protocol of the candidates in fused order, or reordered by ``chosen``."""
    result = {}
    for protocol in PROTOCOLS:
        run, qrels = {}, {}
        for q in questions:
            if q.protocol != protocol:
                continue
            pages = q.pages
            if chosen is not None and pages:
                head = min(chosen.depth, len(pages))
                order = np.argsort(-chosen.scores(q.features[:head]), kind="stable")
                pages = [pages[i] for i in order] + pages[head:]
            run[q.qid] = list(dict.fromkeys(pages))  # a page once, at its best tile
            qrels[q.qid] = q.judged
        means = metrics.mean(metrics.per_query(run, qrels))
        result[protocol] = {name: round(means[name], 3) for name in REPORTED}
    return result


@dataclass
class Fitted:
    """The ranker fitted on every set, and each set measured unranked and ranked by a ranker fitted
    on the others (with two sets or more)."""

    ranker: ranking.Ranker
    left_out: dict[str, dict[str, dict]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"about": self.ranker.about, "left_out": self.left_out}


def fit_rankers(sets: dict[str, list[JudgedSearch]], depth: int = ranking.DEPTH, C: float = 1.0) -> Fitted:
    """Fit on every set of ``sets`` (name -> its questions' candidates, ``collect``), and, with two
    sets or more, measure each with a ranker fitted on the others."""

    def groups(names):
        return [(q.features, q.relevant) for name in names for q in sets[name]]

    left_out = {}
    if len(sets) > 1:
        for held in sets:
            fitted = ranking.fit(groups([name for name in sets if name != held]), depth, C)
            left_out[held] = {"unranked": measure(sets[held], None), "ranked": measure(sets[held], fitted)}
    about = {
        "fitted on": {name: sum(q.protocol == "whole" for q in qs) for name, qs in sets.items()},
        "protocols": list(PROTOCOLS),
    }
    return Fitted(ranking.fit(groups(sets), depth, C, about=about), left_out)
