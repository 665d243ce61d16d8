"""The visual retriever over single vectors and multi-vectors: exact answers while small, filters,
removal, and a save/load round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pagesight.store.visual import VisualRetriever
from pagesight.vectors import maxsim


def _unit(array: np.ndarray) -> np.ndarray:
    return (array / np.linalg.norm(array, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_single_vectors_exact_top_k_filter_remove_reload(tmp_path: Path, rng):
    retriever = VisualRetriever.empty(32, multi_vector=False, kind="hnsw")
    ids = np.arange(100, 400, dtype=np.int64)
    vectors = _unit(rng.standard_normal((len(ids), 32)))
    retriever.add(ids, list(vectors))
    query = _unit(rng.standard_normal(32))
    exact = vectors.astype(np.float16).astype(np.float32) @ query
    found = retriever.search(query, 5)
    assert [tile for tile, _ in found] == ids[np.argsort(-exact)[:5]].tolist()
    assert [score for _, score in found] == pytest.approx(np.sort(exact)[::-1][:5], abs=2e-3)

    allowed = ids[::7]
    filtered = retriever.search(query, 3, allowed)
    in_allowed = np.argsort(-exact[::7])[:3]
    assert [tile for tile, _ in filtered] == allowed[in_allowed].tolist()

    best = found[0][0]
    retriever.remove(np.array([best]))
    assert best not in [tile for tile, _ in retriever.search(query, 5)]
    retriever.save(tmp_path / "visual.index")
    loaded = VisualRetriever.load(tmp_path / "visual.index")
    assert not loaded.multi_vector and len(loaded) == len(ids) - 1
    assert loaded.search(query, 5) == retriever.search(query, 5)


def test_multi_vectors_rank_by_maxsim_and_filter_exactly(tmp_path: Path, rng):
    retriever = VisualRetriever.empty(16, multi_vector=True, kind="hnsw")
    ids = np.arange(1, 61, dtype=np.int64)
    pages = [_unit(rng.standard_normal((int(rng.integers(5, 30)), 16))) for _ in ids]
    retriever.add(ids, pages)
    query = _unit(rng.standard_normal((6, 16)))
    exact = maxsim([query], [page.astype(np.float16) for page in pages])[0]
    order = np.argsort(-exact)
    found = retriever.search(query, 4)  # 60 pages < ef: every page is rescored exactly
    assert [tile for tile, _ in found] == ids[order[:4]].tolist()
    assert [score for _, score in found] == pytest.approx(exact[order[:4]], abs=1e-3)

    allowed = ids[1::2]
    filtered = retriever.search(query, 3, allowed)
    odd = np.argsort(-exact[1::2])[:3]
    assert [tile for tile, _ in filtered] == allowed[odd].tolist()
    assert retriever.search(query, 3, np.array([999])) == []

    retriever.remove(ids[order[:1]])
    retriever.save(tmp_path / "visual-muvera")
    loaded = VisualRetriever.load(tmp_path / "visual-muvera")
    assert loaded.multi_vector and len(loaded) == len(ids) - 1
    assert [tile for tile, _ in loaded.search(query, 3)] == ids[order[1:4]].tolist()
