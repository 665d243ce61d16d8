"""VectorIndex: exact when small, recall when trained, add/remove/reload, filters, storage size."""

from __future__ import annotations

import io

import numpy as np
import pytest

from pagesight.errors import IndexFormatError, PagesightError
from pagesight.vectors import VectorIndex
from tests.vectors.conftest import clustered, exact_top, recall, unit

DIM = 32
ALL = [
    ("flat", "fp32"),
    ("flat", "fp16"),
    ("ivf", "fp32"),
    ("ivf", "fp16"),
    ("hnsw", "fp32"),
    ("hnsw", "fp16"),
    ("ivfpq", "pq"),
]


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return clustered(3000, DIM, centres=40)


@pytest.fixture(scope="module")
def queries(data) -> np.ndarray:
    rng = np.random.default_rng(7)
    return unit(data[rng.choice(len(data), 50, replace=False)] + 0.05 * rng.standard_normal((50, DIM)))


@pytest.mark.parametrize(("kind", "storage"), ALL)
def test_small_index_is_exact(kind, storage, data, queries):
    index = VectorIndex(DIM, kind, storage)  # 500 vectors: far below the training threshold
    ids = np.arange(500) * 3 + 11
    index.add(ids, data[:500])
    assert not index.is_trained and len(index) == 500
    scores, found = index.search(queries, 10)
    truth_scores = unit(queries) @ data[:500].T
    truth = ids[np.argsort(-truth_scores, axis=1)[:, :10]]
    if storage == "fp32":
        assert (found == truth).all()
        np.testing.assert_allclose(scores, np.sort(truth_scores, axis=1)[:, ::-1][:, :10], atol=1e-5)
    else:  # fp16 rounding may swap near-ties only
        assert recall(found, truth) >= 0.99
        np.testing.assert_allclose(scores, np.sort(truth_scores, axis=1)[:, ::-1][:, :10], atol=2e-3)


@pytest.mark.parametrize(
    ("kind", "storage", "minimum"),
    [
        ("ivf", "fp32", 0.9),
        ("ivf", "fp16", 0.9),
        ("hnsw", "fp32", 0.9),
        ("hnsw", "fp16", 0.9),
        ("ivfpq", "pq", 0.5),
    ],
)
def test_trained_index_recall(kind, storage, minimum, data, queries):
    index = VectorIndex(DIM, kind, storage, train_threshold=1000, pq_m=16)
    index.add(np.arange(len(data)), data)
    assert index.is_trained
    if kind != "hnsw":
        assert 1 < index._index.nlist <= len(data) // 39
    _, found = index.search(queries, 10)
    assert recall(found, exact_top(queries, data, 10)) >= minimum


def test_index_trains_when_crossing_threshold_and_keeps_earlier_vectors(data, queries):
    index = VectorIndex(DIM, "ivf", train_threshold=1000, nprobe=4)
    index.add(np.arange(600), data[:600])
    assert not index.is_trained and index.structure() == "IndexIDMap2(IndexFlatIP)"
    index.add(np.arange(600, 1200), data[600:1200])
    assert index.is_trained and len(index) == 1200
    nlist = index._index.nlist
    assert index.structure() == f"IndexIVFFlat, nlist {nlist}, nprobe 4" and nlist > 1
    index.nprobe = index._index.nlist  # every cell: the result must then be exact
    _, found = index.search(queries, 10)
    assert (found == exact_top(queries, data[:1200], 10)).all()


def test_a_search_visits_the_ivf_cells_and_hnsw_beam_it_asks_for(data, queries):
    """``nprobe`` and ``ef_search`` given to one search reach FAISS and change only that search."""
    truth = exact_top(queries, data, 10)
    ivf = VectorIndex(DIM, "ivf", train_threshold=1000)
    ivf.add(np.arange(len(data)), data)
    nlist = ivf._index.nlist
    one = recall(ivf.search(queries, 10, nprobe=1)[1], truth)
    every = ivf.search(queries, 10, nprobe=nlist)[1]
    assert (every == truth).all() and one < 0.9  # every cell: exact; one cell: not
    assert recall(ivf.search(queries, 10)[1], truth) > one and ivf.nprobe == 32  # its own again
    hnsw = VectorIndex(DIM, "hnsw", train_threshold=1000, hnsw_m=4, ef_construction=8)
    hnsw.add(np.arange(len(data)), data)
    narrow = recall(hnsw.search(queries, 10, ef_search=10)[1], truth)
    wide = recall(hnsw.search(queries, 10, ef_search=400)[1], truth)
    assert narrow + 0.15 < wide, (narrow, wide)  # a sparse graph: the beam is what finds them
    exact = VectorIndex(DIM, "flat")  # neither applies to an exact search
    exact.add(np.arange(len(data)), data)
    assert (exact.search(queries, 10, nprobe=1, ef_search=1)[1] == truth).all()
    for name in ("nprobe", "ef_search"):
        with pytest.raises(ValueError, match=f"{name} must be positive, got 0"):
            ivf.search(queries, 10, **{name: 0})


def test_ivf_retrains_after_growing(data):
    index = VectorIndex(DIM, "ivf", train_threshold=200, retrain_growth=4)
    index.add(np.arange(200), data[:200])
    first = index._index.nlist
    index.add(np.arange(200, 1000), data[200:1000])
    assert index._trained_size == 1000 and index._index.nlist > first and len(index) == 1000


@pytest.mark.parametrize(("kind", "storage"), ALL)
def test_remove_readd_and_reload(kind, storage, data, queries, tmp_path):
    index = VectorIndex(DIM, kind, storage, train_threshold=1000, pq_m=16)
    index.add(np.arange(2000), data[:2000])
    assert index.remove(np.arange(0, 2000, 2)) == 1000
    assert index.remove([0, 2, 999_999]) == 0  # absent ids are ignored
    assert len(index) == 1000 and 0 not in index and 1 in index
    _, found = index.search(queries, 10)
    assert (found % 2 == 1).all()
    # A removed id added again with another vector is found under it, by that vector.
    index.add([4], data[2500:2501])
    scores, found = index.search(data[2500:2501], 1)
    assert found[0, 0] == 4
    # Replacing a live id keeps one copy of it.
    index.add([5], data[2600:2601])
    assert len(index) == 1001
    _, found = index.search(data[2600:2601], 5)
    assert list(found[0]).count(5) == 1 and found[0, 0] == 5
    path = tmp_path / "vectors.index"
    index.save(path)
    loaded = VectorIndex.load(path)
    assert len(loaded) == len(index) and loaded.is_trained == index.is_trained
    assert (loaded.ids() == index.ids()).all()
    np.testing.assert_array_equal(loaded.search(queries, 10)[1], index.search(queries, 10)[1])
    loaded.add([2], data[2:3])  # the loaded index keeps working
    assert 2 in loaded and len(loaded) == 1002
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file is gone


@pytest.mark.parametrize(("kind", "storage"), ALL)
def test_loaded_index_reads_its_file_in_place_and_changes_a_copy(kind, storage, data, queries, tmp_path):
    """A loaded index views its file's mapping: it searches and gives its stored vectors after the
    file is replaced, and its changes (add, remove, a rebuild reading every stored vector) go to a
    copy, never the file."""
    index = VectorIndex(DIM, kind, storage, train_threshold=1000, pq_m=16)
    index.add(np.arange(2000), data[:2000])
    path = tmp_path / "vectors.index"
    index.save(path)
    loaded = VectorIndex.load(path)
    streamed = VectorIndex.load(io.BytesIO(path.read_bytes()))  # read from a stream: a copy
    VectorIndex(DIM, "flat").save(path)  # a merge replaces the file under a searcher
    np.testing.assert_array_equal(loaded.search(queries, 10)[1], index.search(queries, 10)[1])
    some = np.array([1999, 3, 1000, 4])  # read as rows of the mapped file (IVF), or by FAISS
    np.testing.assert_array_equal(loaded.fetch(some), index.fetch(some))
    np.testing.assert_array_equal(streamed.fetch(some), index.fetch(some))
    assert streamed.remove(some) == 4 and len(streamed) == 1996
    for twin in (index, loaded):
        twin.remove(np.arange(0, 2000, 3))
        twin.add([1], data[2500:2501])
        twin.rebuild()
    np.testing.assert_array_equal(loaded.search(queries, 10)[1], index.search(queries, 10)[1])
    np.testing.assert_array_equal(loaded.fetch(np.array([1, 2])), index.fetch(np.array([1, 2])))
    index.save(path)
    assert len(VectorIndex.load(path)) == len(loaded) == 2000 - 667


def test_hnsw_tombstones_then_rebuild(data, queries):
    index = VectorIndex(DIM, "hnsw", train_threshold=500, tombstone_limit=0.25)
    index.add(np.arange(1000), data[:1000])
    index.remove(np.arange(200))
    assert index._index.ntotal == 1000 and (~index._alive).sum() == 200  # tombstones, no rebuild yet
    _, found = index.search(queries, 10)
    assert found.min() >= 200
    index.remove(np.arange(200, 300))  # 30% dead: rebuilt from the live vectors
    assert index._index.ntotal == 700 and index._alive.all() and len(index) == 700
    _, found = index.search(queries, 10)
    assert found.min() >= 300 and recall(found, 300 + exact_top(queries, data[300:1000], 10)) >= 0.9


@pytest.mark.parametrize(("kind", "storage"), ALL)
@pytest.mark.parametrize("reloaded", [False, True])
def test_allowed_ids(kind, storage, reloaded, data, queries, tmp_path):
    index = VectorIndex(DIM, kind, storage, train_threshold=1000, exact_filter_limit=100, pq_m=16)
    index.add(np.arange(len(data)), data)
    if reloaded:  # as loaded, its live ids are a sorted array until a change needs them as a set
        index.save(tmp_path / "index")
        index = VectorIndex.load(tmp_path / "index")
    small = np.arange(5, 3000, 60)  # 50 ids: scored exactly
    scores, found = index.search(queries, 10, allowed_ids=small)
    assert set(found.ravel().tolist()) <= set(small.tolist())
    if storage != "pq":
        assert recall(found, small[exact_top(queries, data[small], 10)]) >= 0.98
    large = np.arange(1, 3000, 2)  # 1,500 ids: filtered by FAISS while searching
    _, found = index.search(queries, 10, allowed_ids=large)
    assert (found % 2 == 1).all()
    # Fewer allowed ids than k: the rest is -1 / -inf; ids that are not in the index are ignored.
    scores, found = index.search(queries[:2], 5, allowed_ids={7, 8, 10**9})
    assert (np.sort(found[:, :2], axis=1) == [7, 8]).all() and (found[:, 2:] == -1).all()
    assert np.isneginf(scores[:, 2:]).all()
    assert (index.search(queries[:1], 3, allowed_ids=[])[1] == -1).all()


def test_fp16_storage_halves_bytes(data):
    sizes = {}
    for kind in ("flat", "ivf", "hnsw"):
        for storage in ("fp32", "fp16"):
            index = VectorIndex(DIM, kind, storage, train_threshold=1000)
            index.add(np.arange(1500), data[:1500])
            assert index.is_trained == (kind != "flat")
            sizes[kind, storage] = index.bytes_per_vector()
    assert sizes["flat", "fp32"] == pytest.approx(4 * DIM + 8, abs=1)  # vector + id
    assert sizes["flat", "fp16"] == pytest.approx(2 * DIM + 8, abs=1)
    for kind in ("ivf", "hnsw"):
        assert sizes[kind, "fp32"] - sizes[kind, "fp16"] == pytest.approx(2 * DIM, abs=1)
    pq = VectorIndex(DIM, "ivfpq", train_threshold=1000, pq_m=8)
    pq.add(np.arange(1500), data[:1500])
    assert pq.bytes_per_vector() < 2 * DIM


def test_missing_results_and_empty_index(data):
    index = VectorIndex(DIM)
    scores, found = index.search(data[:2], 4)
    assert (found == -1).all() and np.isneginf(scores).all()
    index.add([1, 2], data[:2])
    scores, found = index.search(data[:1], 4)
    assert found[0, 0] == 1 and (found[0, 2:] == -1).all() and np.isneginf(scores[0, 2:]).all()


def test_normalize_flag(data):
    raw = data[:10] * np.arange(1, 11, dtype=np.float32)[:, None]
    cosine, inner = VectorIndex(DIM), VectorIndex(DIM, normalize=False)
    cosine.add(np.arange(10), raw)
    inner.add(np.arange(10), raw)
    assert cosine.search(data[3], 1)[1][0, 0] == 3
    np.testing.assert_allclose(inner.search(data[3], 10)[0][0].max(), (raw @ data[3]).max(), rtol=1e-5)


def test_bad_inputs_name_the_problem(data, tmp_path):
    with pytest.raises(ValueError, match="unknown index kind 'annoy'"):
        VectorIndex(DIM, "annoy")
    with pytest.raises(ValueError, match="storage 'pq' is not available for kind 'hnsw'"):
        VectorIndex(DIM, "hnsw", "pq")
    with pytest.raises(ValueError, match="pq_m=5 must divide dim=32"):
        VectorIndex(DIM, "ivfpq", pq_m=5)
    index = VectorIndex(DIM)
    with pytest.raises(ValueError, match=r"vectors must have shape \(n, 32\), got \(2, 16\)"):
        index.add([1, 2], data[:2, :16])
    with pytest.raises(ValueError, match="2 ids for 3 vectors"):
        index.add([1, 2], data[:3])
    with pytest.raises(ValueError, match="ids contain duplicates"):
        index.add([1, 1], data[:2])
    with pytest.raises(ValueError, match="non-negative"):
        index.add([-1], data[:1])
    with pytest.raises(ValueError, match="NaN"):
        index.add([1], np.full((1, DIM), np.nan))
    with pytest.raises(ValueError, match=r"queries must have shape \(n, 32\)"):
        index.search(data[:1, :8], 3)
    assert len(index) == 0  # nothing half-added
    (tmp_path / "junk").write_bytes(b"not an index")
    with pytest.raises(IndexFormatError, match="junk is not a pagesight vector index"):
        VectorIndex.load(tmp_path / "junk")
    with pytest.raises(PagesightError, match="no vector index at"):
        VectorIndex.load(tmp_path / "missing")
