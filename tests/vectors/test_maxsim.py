"""MaxSim against colpali-engine's own score_multi_vector and against a plain loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pagesight.vectors import PackedMultiVectors, maxsim, pack
from tests.vectors.conftest import colpali_module, unit


def ragged(rng: np.random.Generator, count: int, lengths: tuple[int, int], dim: int) -> list[np.ndarray]:
    return [unit(rng.standard_normal((int(rng.integers(*lengths)), dim))) for _ in range(count)]


def loop_maxsim(queries, documents) -> np.ndarray:
    """The definition, one pair at a time, in float64."""
    return np.array(
        [
            [(q.astype(np.float64) @ d.astype(np.float64).T).max(axis=1).sum() for d in documents]
            for q in queries
        ]
    )


def test_equal_to_colpali_engine_score_multi_vector():
    processing = colpali_module("colpali_engine.utils.processing_utils")
    rng = np.random.default_rng(0)
    queries = ragged(rng, 9, (3, 25), 128)
    documents = ragged(rng, 200, (50, 300), 128)  # > 128, so colpali-engine pads several batches
    theirs = processing.BaseVisualRetrieverProcessor.score_multi_vector(
        [torch.from_numpy(q) for q in queries], [torch.from_numpy(d) for d in documents], device="cpu"
    ).numpy()
    ours = maxsim([torch.from_numpy(q) for q in queries], [torch.from_numpy(d) for d in documents])
    assert ours.shape == theirs.shape == (9, 200)
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)
    # The same from a zero-padded 3-D batch, colpali-engine's other input form.
    padded = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(d) for d in documents], batch_first=True)
    np.testing.assert_allclose(maxsim(queries, padded), theirs, atol=1e-4, rtol=0)


def test_equal_to_a_plain_loop_on_ragged_unnormalised_vectors():
    rng = np.random.default_rng(1)
    queries = [rng.standard_normal((int(n), 16)).astype(np.float32) for n in rng.integers(1, 12, 7)]
    documents = [rng.standard_normal((int(n), 16)).astype(np.float32) for n in rng.integers(1, 90, 250)]
    np.testing.assert_allclose(
        maxsim(queries, documents), loop_maxsim(queries, documents), rtol=1e-5, atol=1e-4
    )


def test_negative_scores_are_not_clipped_by_padding():
    # colpali-engine's zero padding would score a padded row 0 here; the true MaxSim is -1 per vector.
    query = [np.array([[1.0, 0.0]], dtype=np.float32)]
    documents = [
        np.array([[-1.0, 0.0]], dtype=np.float32),
        np.array([[-1.0, 0.0], [-2.0, 0.0]], dtype=np.float32),
    ]
    np.testing.assert_allclose(maxsim(query, documents), [[-1.0, -1.0]])


def test_float16_store_and_block_boundaries():
    rng = np.random.default_rng(2)
    queries = ragged(rng, 3, (2, 6), 32)
    documents = ragged(rng, 40, (1, 30), 32)
    expected = loop_maxsim(queries, documents)
    for block in (1, 7, 64, 1 << 21):  # from one document per block to all in one
        np.testing.assert_allclose(maxsim(queries, documents, block), expected, rtol=1e-5, atol=1e-5)
    packed = pack(documents)
    half = PackedMultiVectors(packed.vectors.astype(np.float16), packed.offsets)
    np.testing.assert_allclose(maxsim(queries, half), expected, atol=5e-3)


def test_pack_take_and_errors():
    rng = np.random.default_rng(3)
    documents = ragged(rng, 6, (1, 5), 4)
    packed = pack(documents)
    assert len(packed) == 6 and packed.dim == 4 and list(packed.lengths) == [len(d) for d in documents]
    taken = packed.take(np.array([4, 1]))
    np.testing.assert_array_equal(taken[0], documents[4])
    np.testing.assert_array_equal(taken[1], documents[1])
    with pytest.raises(ValueError, match="multi-vector 1 has no vector"):
        pack([documents[0], np.zeros((0, 4), dtype=np.float32)])
    with pytest.raises(ValueError, match="query vectors have dimension 4, document vectors 8"):
        maxsim(documents, [np.ones((2, 8), dtype=np.float32)])
    with pytest.raises(ValueError, match="no multi-vectors given"):
        maxsim([], documents)
