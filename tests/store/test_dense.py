"""The local store's dense text index: chunk vectors in a VectorIndex, answered per tile."""

from pathlib import Path

import faiss
import numpy as np
import pytest

from pagesight.store.base import Effort
from pagesight.store.local import dense as dense_module
from pagesight.store.local.dense import CHUNKS, DenseRetriever
from pagesight.store.local.layout import DENSE
from pagesight.store.local.parts import Held
from pagesight.store.local.postings import analysed
from pagesight.store.local.segment import Segment

pytestmark = pytest.mark.timeout(60)


def chunks(seed: int = 0):
    """Chunk vectors of 40 tiles with 1 to 4 chunks each, a tile's rows together."""
    rng = np.random.default_rng(seed)
    tile_ids = np.repeat(np.arange(100, 140), rng.integers(1, 5, 40))
    vectors = rng.standard_normal((len(tile_ids), 32)).astype(np.float32)
    return tile_ids, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def best_per_tile(tile_ids, vectors, query, allowed=None):
    """Brute force: each tile's best chunk score, best first."""
    scores = vectors @ query
    best = {}
    for tile, score in zip(tile_ids.tolist(), scores.tolist()):
        if allowed is None or tile in allowed:
            best[tile] = max(best.get(tile, -np.inf), score)
    return sorted(best.items(), key=lambda pair: -pair[1])


def test_a_tile_scores_as_its_best_chunk_with_and_without_a_filter(tmp_path: Path):
    tile_ids, vectors = chunks()
    dense = DenseRetriever.empty(32)
    dense.add(tile_ids, vectors)
    assert dense.tile_ids().tolist() == list(range(100, 140)) and len(dense) == len(tile_ids)
    query = vectors[7] + 0.1
    query /= np.linalg.norm(query)
    expected = best_per_tile(tile_ids, vectors, query)[:5]
    found = dense.search(query, 5)
    assert [t for t, _ in found] == [t for t, _ in expected]
    # the vectors are kept as float16: scores within its rounding of the float32 products
    assert np.allclose([s for _, s in found], [s for _, s in expected], atol=1e-3)
    allowed = np.array([101, 120, 133, 999])
    expected = best_per_tile(tile_ids, vectors, query, set(allowed.tolist()))
    assert [t for t, _ in dense.search(query, 10, allowed)] == [t for t, _ in expected]
    dense.remove(np.array([expected[0][0], 105]))
    assert expected[0][0] not in dense.tile_ids() and 105 not in dense.tile_ids()
    assert [t for t, _ in dense.search(query, 10, allowed)] == [t for t, _ in expected[1:]]
    dense.save(tmp_path / "dense")
    again = DenseRetriever.load(tmp_path / "dense")
    assert again.search(query, 8) == dense.search(query, 8)


def test_a_file_of_the_format_before_is_read_and_searches_the_same(tmp_path: Path):
    tile_ids, vectors = chunks(1)
    old = faiss.IndexIDMap2(faiss.IndexFlatIP(32))  # how dense files were written before
    old.add_with_ids(vectors, tile_ids)
    faiss.write_index(old, str(tmp_path / "dense-3.faiss"))
    converted = DenseRetriever.load(tmp_path / "dense-3.faiss")
    query = vectors[3]
    scores, ids = old.search(query.reshape(1, -1), 40)
    before: dict[int, float] = {}
    for tile, score in zip(ids[0].tolist(), scores[0].tolist()):
        before.setdefault(tile, score)
    found = converted.search(query, 6)
    assert [t for t, _ in found] == list(before)[:6]
    assert [s for _, s in found] == pytest.approx(list(before.values())[:6], abs=1e-3)  # now float16
    assert converted.tile_ids().tolist() == sorted(set(tile_ids.tolist()))


def test_too_many_chunks_for_one_tile_are_refused():
    dense = DenseRetriever.empty(4)
    with pytest.raises(ValueError, match=f"tile 7 has more than {CHUNKS} text chunks"):
        dense.add(np.full(CHUNKS + 1, 7), np.ones((CHUNKS + 1, 4), dtype=np.float32))
    assert len(dense) == 0 and dense.search(np.ones(4, dtype=np.float32), 3) == []


def test_parts_joined_past_the_ivf_size_make_an_ivf_index_that_ranks_as_exact_search(
    monkeypatch, tmp_path: Path
):
    monkeypatch.setattr(dense_module, "IVF_FROM", 2_000)
    rng = np.random.default_rng(3)
    parts, all_ids, all_vectors = [], [], []
    for first in (0, 500, 1000, 1500, 2000):  # five commits' parts of 500 tiles, 1-2 chunks each
        tile_ids = np.repeat(np.arange(first, first + 500), rng.integers(1, 3, 500))
        vectors = rng.standard_normal((len(tile_ids), 32)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        part = DenseRetriever.empty(32)
        part.add(tile_ids, vectors)
        assert not part.index.is_trained  # a commit's part is exact
        parts.append(part)
        all_ids.append(tile_ids)
        all_vectors.append(vectors)
    joined = DenseRetriever.joined(parts, 32)
    assert joined.index.is_trained and len(joined) == sum(map(len, all_ids))
    tile_ids, vectors = np.concatenate(all_ids), np.concatenate(all_vectors)
    # nlist is 4 sqrt(n) capped at n / 39 (below NPROBE here): every cell is visited, so the IVF
    # index must give exact search's tiles
    for row in (3, 777, 2500):
        expected = best_per_tile(tile_ids, vectors, vectors[row])[:10]
        assert [t for t, _ in joined.search(vectors[row], 10)] == [t for t, _ in expected]
    joined.remove(np.array([expected[0][0]]))
    joined.save(tmp_path / "dense")
    again = DenseRetriever.load(tmp_path / "dense")
    assert again.index.is_trained and expected[0][0] not in again.tile_ids()
    assert [t for t, _ in again.search(vectors[2500], 9)] == [t for t, _ in expected[1:]]


@pytest.mark.parametrize("per_part_limit", [50_000, 300])
def test_a_filter_over_parts_ranks_every_allowed_chunk_as_brute_force(
    monkeypatch, tmp_path: Path, per_part_limit
):
    """A filtered search over a saved IVF part (its vectors read as rows of its file) and exact
    parts scores the allowed chunks of all parts at once; a part holding more of them than
    ``EXACT_FILTER`` searches them itself; both rank as brute force over the allowed tiles."""
    monkeypatch.setattr(dense_module, "IVF_FROM", 2_000)
    monkeypatch.setattr(dense_module, "EXACT_FILTER", per_part_limit)
    rng = np.random.default_rng(5)
    tile_ids = np.repeat(np.arange(3000), rng.integers(1, 3, 3000))
    vectors = rng.standard_normal((len(tile_ids), 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    big, small = tile_ids < 2500, (tile_ids >= 2500) & (tile_ids < 2800)
    parts = []
    for held in (big, small, tile_ids >= 2800):
        part = DenseRetriever.empty(32)
        part.add(tile_ids[held], vectors[held])
        parts.append(part)
    parts[0].save(tmp_path / "big")
    held = [dense_module.stored(tmp_path / "big"), Held(parts[1]), Held(parts[2])]
    segments = dense_module.DenseSegments([_segment(part) for part in held], 32)
    assert segments.segments[0].part(DENSE).index.is_trained  # the saved part is an IVF index, read mapped
    allowed = np.sort(rng.choice(3000, 400, replace=False))
    stored = vectors.astype(np.float16).astype(np.float32)  # as kept, so near ties fall alike
    for row in (5, 2600, 2900):
        expected = best_per_tile(tile_ids, stored, vectors[row], set(allowed.tolist()))[:10]
        found = segments.search(vectors[row], 10, allowed)
        assert [t for t, _ in found] == [t for t, _ in expected]
        assert np.allclose([s for _, s in found], [s for _, s in expected], atol=1e-6)


def test_a_search_visits_the_ivf_cells_it_asks_for(monkeypatch):
    """``Effort.nprobe`` reaches every IVF part, with a filter too (a part holding more of its
    chunks than ``EXACT_FILTER`` searches them itself), and leaves exact parts exact."""
    monkeypatch.setattr(dense_module, "IVF_FROM", 2_000)
    monkeypatch.setattr(dense_module, "EXACT_FILTER", 1_000)
    rng = np.random.default_rng(11)
    tile_ids = np.repeat(np.arange(3000), rng.integers(1, 3, 3000))
    vectors = rng.standard_normal((len(tile_ids), 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ivf, exact = DenseRetriever.empty(32), DenseRetriever.empty(32)
    ivf.add(tile_ids[tile_ids < 2500], vectors[tile_ids < 2500])
    exact.add(tile_ids[tile_ids >= 2500], vectors[tile_ids >= 2500])
    assert ivf.index.is_trained and not exact.index.is_trained
    segments = dense_module.DenseSegments([_segment(Held(ivf)), _segment(Held(exact))], 32)
    stored = vectors.astype(np.float16).astype(np.float32)
    allowed = np.arange(0, 3000, 2)
    cells = ivf.index._index.nlist
    for keep in (None, allowed):
        hits = {}
        for nprobe in (1, cells):
            found = 0
            for row in range(0, len(tile_ids), 97):
                expected = best_per_tile(tile_ids, stored, vectors[row], None if keep is None else set(keep))
                best = {t for t, _ in expected[:10]}
                got = segments.search(vectors[row], 10, keep, effort=Effort(nprobe=nprobe))
                found += len(best & {t for t, _ in got})
            hits[nprobe] = found
        rows = len(range(0, len(tile_ids), 97))
        assert hits[1] < 0.7 * rows * 10 and hits[cells] >= 0.99 * rows * 10, hits


def _segment(part) -> Segment:
    """A segment holding the dense ``part`` alone (its postings those of no tile: ``DenseSegments``
    reads its parts only)."""
    return Segment(analysed(np.zeros(0, dtype=np.int64), [], False, None), {DENSE: part})


def test_a_delete_reaches_the_new_segments_part_and_not_the_one_it_came_from(tmp_path: Path):
    """A segment's deletes are its own: the generation before a delete, which a search may hold,
    keeps every tile of the part file both read."""
    rng = np.random.default_rng(2)
    tile_ids = np.arange(20)
    part = DenseRetriever.empty(32)
    part.add(tile_ids, rng.standard_normal((20, 32)).astype(np.float32))
    postings = analysed(tile_ids, ["owl"] * 20, False, None)
    saved = Segment.of(postings, {DENSE: part}).save(tmp_path / "segment")
    before = saved.part(DENSE)
    after = saved.deleting(np.array([3]))
    assert 3 not in after.part(DENSE).tile_ids().tolist()
    assert 3 in before.tile_ids().tolist() and saved.part(DENSE) is before
    assert (after.deleted_count, saved.deleted_count) == (1, 0)
