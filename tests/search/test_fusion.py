"""Rank fusion (``search/fusion.py``) on runs written out by hand, and its weights through a search."""

from __future__ import annotations

import pytest

from pagesight.choices import ACROSS_ALPHA, DEFAULT_ALPHA, DEFAULT_VISUAL_WEIGHT, MODEL_ALPHA
from pagesight.search.fusion import (
    fusion_weights,
    language_alpha,
    reciprocal_rank_fusion,
    relative_score_fusion,
)


def test_reciprocal_rank_fusion_sums_weighted_inverse_ranks():
    runs = {"bm25": [(1, 9.0), (2, 5.0)], "dense": [(2, 0.9), (3, 0.8)]}
    fused = dict(reciprocal_rank_fusion(runs, k=60))
    assert fused[2] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1] == pytest.approx(1 / 61) and fused[3] == pytest.approx(1 / 62)
    assert [tile for tile, _ in reciprocal_rank_fusion(runs)] == [2, 1, 3]
    weighted = reciprocal_rank_fusion(runs, k=1, weights={"bm25": 0.0})
    assert [tile for tile, _ in weighted] == [2, 3, 1]  # the lexical run weighs nothing


def test_relative_score_fusion_scales_each_run_to_0_1_before_weighing():
    runs = {"bm25": [(1, 30.0), (2, 20.0), (3, 10.0)], "dense": [(3, 0.9), (1, 0.5)]}
    fused = dict(relative_score_fusion(runs, {"bm25": 0.8, "dense": 0.2}))
    assert fused[1] == pytest.approx(0.8 * 1.0 + 0.2 * 0.0)
    assert fused[2] == pytest.approx(0.8 * 0.5)
    assert fused[3] == pytest.approx(0.8 * 0.0 + 0.2 * 1.0)
    dense_only = relative_score_fusion(runs, {"bm25": 0.0, "dense": 1.0})
    assert dense_only[0][0] == 3


def test_relative_score_fusion_of_a_single_hit_or_an_empty_run():
    fused = relative_score_fusion({"bm25": [(7, 3.0)], "dense": []}, {"bm25": 0.5, "dense": 0.5})
    assert fused == [(7, 0.5)]  # one score scales to 1; an empty run adds nothing
    assert relative_score_fusion({"visual": [(1, 0.2)]}, {"bm25": 1.0}) == [(1, 0.0)]  # unweighted run


THREE = {
    "bm25": [(1, 9.0), (2, 8.0), (3, 7.0), (4, 6.0)],
    "dense": [(3, 0.9), (4, 0.8), (1, 0.7), (5, 0.6)],
    "visual": [(5, 0.5), (2, 0.4), (6, 0.3), (1, 0.2)],
}


def test_weighted_reciprocal_rank_fusion_weighs_runs_as_relative_score_fusion_does():
    names = set(THREE)
    assert fusion_weights("rrf", names) is None  # its default: the unweighted sum
    unweighted = reciprocal_rank_fusion(THREE)
    # every run weighing the same, however the weights are reached, is the unweighted sum exactly
    for alpha, visual in ((0.5, None), (None, 1 / 3), (0.5, 1 / 3)):
        equal = fusion_weights("rrf", names, alpha, visual)
        assert equal == pytest.approx({name: 1 / 3 for name in names})
        assert reciprocal_rank_fusion(THREE, weights=equal) == unweighted
    assert reciprocal_rank_fusion(THREE, weights={"bm25": 2.0, "dense": 2.0, "visual": 2.0}) == unweighted
    assert [tile for tile, _ in unweighted] == [1, 3, 2, 5, 4, 6]

    def order(**weights) -> list[int]:
        return [
            tile for tile, _ in reciprocal_rank_fusion(THREE, weights=fusion_weights("rrf", names, **weights))
        ]

    assert order(alpha=0.9) == [1, 5, 3, 4, 2, 6]  # dense 0.6 of 1, BM25 1/15, visual 1/3
    assert order(visual_weight=0.8) == [1, 5, 2, 6, 3, 4]
    assert order(alpha=0.0, visual_weight=0.0)[:4] == [tile for tile, _ in THREE["bm25"]]
    # the same weights as relative score fusion's, whose defaults are unchanged
    assert fusion_weights("rrf", names, 0.3, 0.4) == fusion_weights("rsf", names, 0.3, 0.4)
    assert fusion_weights("rsf", {"bm25", "dense"}) == pytest.approx(
        {"bm25": 1 - DEFAULT_ALPHA, "dense": DEFAULT_ALPHA}
    )
    half = 1 - DEFAULT_VISUAL_WEIGHT
    assert fusion_weights("rsf", {"bm25", "visual"}) == {"bm25": half, "visual": DEFAULT_VISUAL_WEIGHT}
    # the multilingual model's own default weight; any other model's is the default
    assert fusion_weights("rsf", {"bm25", "dense"}, dense_model="multilingual") == {"bm25": 0.5, "dense": 0.5}
    assert fusion_weights("rsf", {"bm25", "dense"}, dense_model="minilm-static") == pytest.approx(
        {"bm25": 1 - DEFAULT_ALPHA, "dense": DEFAULT_ALPHA}
    )
    assert fusion_weights("rsf", {"bm25", "dense"}, 0.2, dense_model="multilingual")["dense"] == 0.2


@pytest.mark.parametrize("model", sorted(ACROSS_ALPHA))
def test_a_multilingual_model_weighs_more_when_its_first_tiles_are_in_other_languages(model: str):
    within, across = MODEL_ALPHA[model], ACROSS_ALPHA[model]
    assert across > within
    assert language_alpha(model, "fr", ["en"] * 10) == across
    assert language_alpha(model, "fr", ["fr"] * 10) == within
    assert language_alpha(model, "fr", ["fr"] * 5 + ["en"] * 5) == within  # half in its language
    assert language_alpha(model, "fr", ["fr"] * 4 + ["en", "de"] * 3) == across
    assert language_alpha(model, "en", [None, "en", "en"]) == within  # a tile gone since is not its language
    assert language_alpha(model, "en", [None, None, "en"]) == across
    assert language_alpha(model, "en", []) == within  # no dense run: nothing says it is across
    # a model without a weight across languages has one weight
    assert language_alpha("minilm-static", "fr", ["en"] * 10) == DEFAULT_ALPHA


@pytest.mark.timeout(300)
def test_a_hybrid_search_passes_its_weights_to_reciprocal_rank_fusion(sample_index):
    plain = {"fusion": "rrf", "document_weight": 0, "ranker": False, "k": 8}

    def pages(query: str, **options) -> list[tuple[str, int, float]]:
        return [(hit.page_id, hit.tile, hit.score) for hit in sample_index.search(query, **options)]

    for query in ("how are page images tiled", "late interaction retrieval"):
        default = pages(query, **plain)
        assert pages(query, alpha=0.5, **plain) == default  # equal weights: the unweighted sums
        dense = pages(query, mode="dense", document_weight=0, k=8)
        alone = pages(query, alpha=1.0, **plain)  # BM25 weighs nothing: the dense run's order
        assert [page for page, *_ in alone[: len(dense)]] == [page for page, *_ in dense]
        assert alone != default
