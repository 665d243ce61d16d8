import random

import pytest
import pytrec_eval

from pagesight.eval import metrics


def random_case(seed: int):
    """Graded qrels and runs with distinct scores (pytrec-eval sorts by score; we keep list order)."""
    rng = random.Random(seed)
    corpus = [f"d{i}" for i in range(60)]
    qrels, run, scored = {}, {}, {}
    for q in range(40):
        qid = f"q{q}"
        judged = rng.sample(corpus, rng.randint(1, 8))
        qrels[qid] = {doc: rng.choice([0, 1, 1, 2, 3]) for doc in judged}
        if not any(qrels[qid].values()):
            qrels[qid][judged[0]] = 1
        if q % 10 == 9:
            continue  # a query the run does not answer scores zero
        ranked = rng.sample(corpus, rng.randint(0, 30))
        run[qid] = ranked
        scored[qid] = {doc: float(len(ranked) - rank) for rank, doc in enumerate(ranked)}
    return qrels, run, scored


@pytest.mark.parametrize("seed", range(5))
def test_metrics_equal_trec_eval(seed):
    qrels, run, scored = random_case(seed)
    ours = metrics.per_query(run, qrels)
    measures = {"recall.1,5,10,20", "ndcg_cut.10", "success.1,5,10"}
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(scored)
    top10 = {qid: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:10]) for qid, docs in scored.items()}
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    checked = 0
    for qid, row in ours.items():
        ref = reference.get(qid)
        if ref is None:  # unanswered: pytrec-eval leaves it out, trec_eval -c counts zeros
            assert all(value == 0 for value in row.values())
            continue
        for k in (1, 5, 10, 20):
            assert row[f"recall@{k}"] == pytest.approx(ref[f"recall_{k}"], abs=1e-6)
        for k in (1, 5, 10):
            assert row[f"success@{k}"] == pytest.approx(ref[f"success_{k}"], abs=1e-6)
        assert row["ndcg@10"] == pytest.approx(ref["ndcg_cut_10"], abs=1e-6)
        assert row["mrr@10"] == pytest.approx(rr[qid]["recip_rank"], abs=1e-6)
        checked += 1
    assert checked >= 30


def test_means_average_over_queries_with_a_relevant_item():
    qrels = {"a": {"x": 1}, "b": {"y": 2, "z": 0}, "c": {"w": 0}}
    run = {"a": ["x"], "b": ["z", "q", "y"]}
    scores = metrics.per_query(run, qrels)
    assert set(scores) == {"a", "b"}
    assert scores["b"]["mrr@10"] == pytest.approx(1 / 3)
    assert metrics.mean(scores)["recall@1"] == pytest.approx(0.5)
    assert metrics.recall_curve(run, qrels, depth=3) == pytest.approx([0.5, 0.5, 1.0])
