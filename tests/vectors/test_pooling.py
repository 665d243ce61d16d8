"""Hierarchical token pooling: sizes, planted clusters, colpali-engine's pooler, MaxSim quality."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pagesight.vectors import maxsim, pack, pool_multivectors, pool_tokens
from tests.vectors.conftest import colpali_module, planted_queries, recall, topic_pages, unit


def planted_page(
    rng: np.random.Generator, clusters: int, copies: int, dim: int = 48
) -> tuple[np.ndarray, np.ndarray]:
    """``clusters`` well-separated directions, ``copies`` near-duplicates of each, shuffled."""
    centres = unit(rng.standard_normal((clusters, dim)))
    labels = rng.permutation(np.repeat(np.arange(clusters), copies))
    return unit(centres[labels] + 0.05 * unit(rng.standard_normal((len(labels), dim)))), centres


def test_pool_factor_sizes_and_unit_output():
    rng = np.random.default_rng(0)
    page = unit(rng.standard_normal((101, 32)))
    np.testing.assert_array_equal(pool_tokens(page, 1), page)
    for factor in (2, 3, 4):
        pooled = pool_tokens(page, factor)
        assert len(pooled) == 101 // factor
        np.testing.assert_allclose(np.linalg.norm(pooled, axis=1), 1, atol=1e-5)
    assert pool_tokens(page[:1], 3).shape == (1, 32)
    with pytest.raises(ValueError, match="pool_factor must be at least 1, got 0"):
        pool_tokens(page, 0)


def test_planted_clusters_pool_to_their_centres():
    rng = np.random.default_rng(1)
    page, centres = planted_page(rng, clusters=10, copies=3)
    pooled = pool_tokens(page, 3)
    assert pooled.shape == (10, 48)
    # Each pooled vector is one planted direction, and every direction is represented once.
    similarity = pooled @ centres.T
    assert sorted(similarity.argmax(axis=1).tolist()) == list(range(10))
    assert similarity.max(axis=1).min() > 0.99


def test_same_clusters_as_colpali_engine_on_separated_data():
    pooling = colpali_module("colpali_engine.compression.token_pooling")
    pooler = pooling.HierarchicalTokenPooler()
    rng = np.random.default_rng(2)
    for clusters in (5, 12, 30):
        page, _ = planted_page(rng, clusters=clusters, copies=4)
        theirs = pooler.pool_embeddings([torch.from_numpy(page)], pool_factor=4)[0].numpy()
        ours = pool_tokens(page, 4)
        assert ours.shape == theirs.shape == (clusters, 48)
        # Same set of pooled vectors (cluster numbering may differ): each of ours has its twin in theirs.
        match = ours @ theirs.T
        assert sorted(match.argmax(axis=1).tolist()) == list(range(clusters))
        np.testing.assert_allclose(match.max(axis=1), 1, atol=1e-5)


def test_pooling_keeps_maxsim_ranking_on_redundant_pages():
    pages, _ = topic_pages(150, 32, topics=100, per_page=4, lengths=(40, 80), seed=3)
    queries, targets = planted_queries(pages, 20, seed=4)
    exact = maxsim(queries, pages)
    truth = np.argsort(-exact, axis=1)[:, :10]
    pooled = pool_multivectors(pages, 3)
    assert len(pooled) == len(pages)
    assert pooled.lengths.sum() <= pack(pages).lengths.sum() // 3 + len(pages)
    found = np.argsort(-maxsim(queries, pooled), axis=1)[:, :10]
    assert (found[:, 0] == targets).mean() >= 0.9
    assert recall(found, truth) >= 0.7
