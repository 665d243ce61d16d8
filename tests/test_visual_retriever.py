"""The visual retriever over single vectors and multi-vectors: exact answers while small, filters,
removal, a save/load round trip, and how widely a search looks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pagesight.store.base import Effort
from pagesight.store.local.visual import VisualRetriever
from pagesight.vectors import VectorIndex, maxsim
from tests.vectors.conftest import clustered, exact_top, planted_queries, recall, topic_pages


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


def test_a_search_effort_reaches_muvera_and_the_vector_index():
    """A request's ef (MUVERA's candidates) and nprobe (an IVF index's cells) reach the searches."""
    pages, _ = topic_pages(400, 16, topics=100, per_page=3, lengths=(5, 20), seed=3)
    queries, _ = planted_queries(pages, 20, seed=4)
    ids = np.arange(len(pages), dtype=np.int64) + 1
    multi = VisualRetriever.empty(16, multi_vector=True, kind="ivf")
    multi.add(ids, pages)
    truth = ids[np.argsort(-maxsim(queries, [page.astype(np.float16) for page in pages]), axis=1)[:, :10]]

    def found(retriever: VisualRetriever, queries, effort: Effort | None) -> np.ndarray:
        return np.array([[tile for tile, _ in retriever.search(q, 10, effort=effort)] for q in queries])

    by_ef = [recall(found(multi, queries, Effort(ef=ef)), truth) for ef in (10, 40, 160, len(pages))]
    assert by_ef == sorted(by_ef) and by_ef[0] < 0.8 and by_ef[-1] >= 0.98, by_ef
    assert recall(found(multi, queries, None), truth) == by_ef[-1]  # 512 by default: every page here

    vectors = clustered(3000, 16, centres=40, seed=5)
    single = VisualRetriever(VectorIndex(16, "ivf", "fp16", train_threshold=1000))
    single.add(np.arange(3000), list(vectors))
    nearby = vectors[:30] + 0.01
    truth = exact_top(nearby, vectors, 10)
    cells = single.engine._index.nlist
    one, every = (recall(found(single, nearby, Effort(nprobe=n)), truth) for n in (1, cells))
    assert one < 0.9 <= every, (one, every)
