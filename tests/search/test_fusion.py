"""Rank fusion (``search/fusion.py``) on runs written out by hand."""

from __future__ import annotations

import pytest

from pagesight.search.fusion import reciprocal_rank_fusion, relative_score_fusion


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
