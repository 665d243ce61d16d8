"""MUVERA FDEs and the FDE -> MaxSim rescoring retriever."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pagesight.errors import IndexFormatError, PagesightError
from pagesight.vectors import Muvera, MuveraRetriever, VectorIndex, maxsim, pack
from tests.vectors.conftest import planted_queries, recall, topic_pages, unit

DIM = 32


@pytest.fixture(scope="module")
def corpus():
    pages, _ = topic_pages(600, DIM, topics=150, per_page=4, lengths=(20, 60), seed=5)
    queries, targets = planted_queries(pages, 25, seed=6)
    exact = maxsim(queries, pages)
    return pages, queries, targets, exact


def test_fde_inner_product_tracks_maxsim(corpus):
    pages, queries, _, exact = corpus
    encoder = Muvera(DIM, k_sim=4, d_proj=16, reps=10, seed=0)
    approx = encoder.encode_queries(queries) @ encoder.encode_documents(pages).T
    correlation = np.mean([np.corrcoef(a, e)[0, 1] for a, e in zip(approx, exact)])
    assert correlation > 0.6
    # A random encoding of the same size would not: shuffle the documents' FDEs against the queries.
    assert np.mean([np.corrcoef(a, e)[0, 1] for a, e in zip(approx[:, ::-1], exact)]) < 0.2


def test_one_bucket_full_dim_fde_is_exact_for_single_vectors():
    # With one bucket (k_sim=1 on vectors all on one side) and no projection, a query's FDE inner
    # product with a one-vector document is the sum of its inner products: MaxSim exactly.
    rng = np.random.default_rng(0)
    encoder = Muvera(8, k_sim=1, d_proj=8, reps=1, seed=3)
    plane = encoder._hyperplanes[:, 0]
    vectors = rng.standard_normal((30, 8)).astype(np.float32)
    vectors[vectors @ plane < 0] *= -1  # every vector in bucket 1
    query, document = [vectors[:5]], [vectors[5:6]]
    fde = encoder.encode_queries(query) @ encoder.encode_documents(document).T
    np.testing.assert_allclose(fde, maxsim(query, document), rtol=1e-5)


def test_document_averages_query_sums_and_empty_buckets_fill():
    encoder = Muvera(4, k_sim=2, d_proj=4, reps=1, seed=1)
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((40, 4)).astype(np.float32)
    codes = ((vectors @ encoder._hyperplanes) > 0) @ np.array([1, 2])
    bucket = int(codes[0])
    members = vectors[codes == bucket]
    query = encoder.encode_queries([members]).reshape(4, 4)
    document = encoder.encode_documents([members]).reshape(4, 4)
    np.testing.assert_allclose(query[bucket], members.sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(document[bucket], members.mean(axis=0), rtol=1e-5)
    others = [b for b in range(4) if b != bucket]
    assert not query[others].any()  # query buckets stay empty
    for other in others:  # document buckets take a member vector, nearest by Hamming distance
        assert np.isclose(members, document[other], atol=1e-6).all(axis=1).any()


def test_deterministic_by_seed_and_sizes(corpus):
    pages = corpus[0][:20]
    a, b, c = Muvera(DIM, seed=4), Muvera(DIM, seed=4), Muvera(DIM, seed=5)
    np.testing.assert_array_equal(a.encode_documents(pages), b.encode_documents(pages))
    assert not np.allclose(a.encode_documents(pages), c.encode_documents(pages))
    assert a.output_dim == 20 * 16 * 16
    sketched = Muvera(DIM, final_dim=512, seed=4)
    assert sketched.encode_documents(pages).shape == (20, 512)
    np.testing.assert_array_equal(
        sketched.encode_documents(pages), Muvera(DIM, final_dim=512, seed=4).encode_documents(pages)
    )
    # Batching does not change an FDE: one page alone encodes as in a batch.
    np.testing.assert_allclose(
        a.encode_documents(pages[3:4])[0], a.encode_documents(pages)[3], rtol=1e-5, atol=1e-6
    )


def test_errors_name_the_input():
    encoder = Muvera(DIM)
    with pytest.raises(ValueError, match="vectors have dimension 16, the encoder expects 32"):
        encoder.encode_documents([np.ones((3, 16), dtype=np.float32)])
    with pytest.raises(ValueError, match="k_sim must be between 1 and 16, got 0"):
        Muvera(DIM, k_sim=0)
    with pytest.raises(ValueError, match="d_proj must be between 1 and dim=32, got 64"):
        Muvera(DIM, d_proj=64)
    retriever = MuveraRetriever(encoder)
    with pytest.raises(ValueError, match="multi-vectors have dimension 16, the encoder expects 32"):
        retriever.add([1], [np.ones((3, 16), dtype=np.float32)])
    with pytest.raises(ValueError, match="query vectors have dimension 16, the index holds 32"):
        retriever.search([np.ones((3, 16), dtype=np.float32)])
    with pytest.raises(ValueError, match="2 ids for 1 multi-vectors"):
        retriever.add([1, 2], [np.ones((3, DIM), dtype=np.float32)])
    with pytest.raises(ValueError, match="is not the encoder's FDE dimension"):
        MuveraRetriever(encoder, VectorIndex(10))
    assert len(retriever) == 0


def test_retriever_recall_against_exact_maxsim(corpus):
    pages, queries, targets, exact = corpus
    truth = np.argsort(-exact, axis=1)[:, :10] + 1000
    retriever = MuveraRetriever(Muvera(DIM, k_sim=4, d_proj=16, reps=10, seed=0))
    retriever.add(np.arange(len(pages)) + 1000, pages)
    recalls = {}
    for ef in (10, 60, 200):
        scores, found = retriever.search(queries, 10, ef=ef)
        recalls[ef] = recall(found, truth)
        assert (found[:, 0] == targets + 1000).mean() >= 0.9  # the planted page is found first
        # Scores are exact MaxSim (float16 storage), best first.
        for row in range(len(queries)):
            np.testing.assert_allclose(scores[row], exact[row, found[row] - 1000], atol=2e-2)
            assert (np.diff(scores[row]) <= 0).all()
    assert recalls[10] < recalls[60] <= recalls[200] and recalls[200] >= 0.9
    scores, found = retriever.search(queries, 10, ef=len(pages))  # every page rescored: exact
    assert recall(found, truth) >= 0.98


def test_more_candidates_never_lower_recall_and_the_cells_visited_are_the_searchs(corpus):
    """``ef`` pages by FDE re-scored exactly, from the ``nprobe`` cells of an IVF FDE index: with
    every cell, a larger ``ef`` rescores a superset, so recall against exact MaxSim never drops."""
    pages, queries, _, exact = corpus
    truth = np.argsort(-exact, axis=1)[:, :10]
    encoder = Muvera(DIM, reps=8, seed=0)
    index = VectorIndex(encoder.output_dim, "ivf", "fp16", normalize=False, train_threshold=300)
    retriever = MuveraRetriever(encoder, index)
    retriever.add(np.arange(len(pages)), pages)
    every = index._index.nlist
    recalls = [
        recall(retriever.search(queries, 10, ef=ef, nprobe=every)[1], truth)
        for ef in (10, 20, 40, 80, 160, 320, len(pages))
    ]
    assert recalls == sorted(recalls) and recalls[0] < 0.8 and recalls[-1] >= 0.98, recalls
    one_cell = recall(retriever.search(queries, 10, ef=len(pages), nprobe=1)[1], truth)
    assert one_cell < recalls[-1] - 0.2 and index.nprobe == 32, one_cell


def test_retriever_add_remove_replace_and_reload(corpus, tmp_path):
    pages, queries, targets, _ = corpus
    retriever = MuveraRetriever(Muvera(DIM, reps=8, seed=2), dtype=np.float32)
    retriever.add(np.arange(300), pages[:300])
    retriever.add(np.arange(300, 600), pack(pages[300:]))
    assert len(retriever) == 600
    inside = targets < 360
    assert retriever.remove(np.arange(360)) == 360 and retriever.remove([0]) == 0
    _, found = retriever.search(queries, 10, ef=100)
    assert found.min() >= 360
    assert (found[~inside, 0] == targets[~inside]).all()
    # Removing half of the rows compacted the store; the rest is intact.
    assert retriever._rows == sum(len(p) for p in pages[360:])
    np.testing.assert_array_equal(retriever.multivectors([450])[0], pages[450])
    # Replacing a page with another's vectors moves its hits.
    retriever.add([450], [pages[0]])
    _, found = retriever.search([queries[0]] if targets[0] == 0 else [pages[0][:5]], 1, ef=100)
    assert found[0, 0] == 450

    retriever.save(tmp_path / "muvera")
    retriever.save(tmp_path / "muvera")  # a second save replaces the first generation
    files = sorted(p.name for p in (tmp_path / "muvera").iterdir())
    assert files == ["g2-fde.index", "g2-ids.npy", "g2-offsets.npy", "g2-vectors.npy", "muvera.json"]
    for mmap in (False, True):
        loaded = MuveraRetriever.load(tmp_path / "muvera", mmap=mmap)
        assert len(loaded) == len(retriever)
        np.testing.assert_array_equal(
            loaded.search(queries, 10, ef=50)[1], retriever.search(queries, 10, ef=50)[1]
        )
    loaded.add([7], [pages[7]])  # a memory-mapped store becomes a copy when it grows
    assert 7 in loaded and len(loaded) == len(retriever) + 1


def test_retriever_uses_the_given_index_and_trains_it(corpus, tmp_path):
    pages, queries, targets, _ = corpus
    encoder = Muvera(DIM, reps=8, seed=0)
    index = VectorIndex(encoder.output_dim, "ivf", "fp16", normalize=False, train_threshold=300, nprobe=64)
    retriever = MuveraRetriever(encoder, index)  # an empty index is falsy (len 0) but must be kept
    assert retriever.index is index
    retriever.add(np.arange(len(pages)), pages)
    assert index.is_trained and len(index) == len(pages)
    _, found = retriever.search(queries, 10, ef=100)
    assert (found[:, 0] == targets).mean() >= 0.9
    retriever.save(tmp_path / "m")
    loaded = MuveraRetriever.load(tmp_path / "m")
    assert loaded.index.kind == "ivf" and loaded.index.is_trained


def test_load_errors(tmp_path):
    with pytest.raises(PagesightError, match="no MUVERA index at"):
        MuveraRetriever.load(tmp_path)
    (tmp_path / "muvera.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(IndexFormatError, match="MUVERA format 99, this build reads 1"):
        MuveraRetriever.load(tmp_path)


def test_fde_of_unit_vectors_has_bounded_norm(corpus):
    pages = [unit(p) for p in corpus[0][:50]]
    fde = Muvera(DIM, d_proj=DIM, reps=4, seed=0).encode_documents(pages)
    # With no projection each bucket holds a mean (or member) of unit vectors: norm at most 1.
    assert (np.linalg.norm(fde.reshape(50, 4 * 16, DIM), axis=2) <= 1 + 1e-5).all()


@pytest.mark.parametrize("storage", ["int8", "binary"])
def test_compact_codes_rescored_keep_the_ranking_in_less_memory(corpus, tmp_path, storage):
    """Codes find the candidates, the float16 originals rescore the best: the same top 10 as float16
    storage, scores exact MaxSim, in a half (int8) or a sixteenth (binary) of the memory."""
    pages, queries, targets, exact = corpus
    ids = np.arange(len(pages)) + 1000
    plain = MuveraRetriever(Muvera(DIM, reps=10, seed=0))
    compact = MuveraRetriever(Muvera(DIM, reps=10, seed=0), storage=storage)
    plain.add(ids, pages)
    compact.add(ids, pages)
    want_scores, want = plain.search(queries, 10, ef=200)
    scores, found = compact.search(queries, 10, ef=200, rescore=40)
    assert recall(found, want) >= 0.95 and (found[:, 0] == targets + 1000).mean() >= 0.9
    for row in range(len(queries)):  # rescored: the float16 MaxSim of what was found
        np.testing.assert_allclose(scores[row], exact[row, found[row] - 1000], atol=2e-2)
    sizes = compact.bytes_per_page()
    assert sizes["multivectors"] == pytest.approx(sizes["on_disk"] / (2 if storage == "int8" else 16))
    # codes alone rank worse than codes rescored (rescore = k: no float rescoring of a wider pool)
    _, rough = compact.search(queries, 10, ef=200, rescore=10)
    assert recall(rough, want) <= recall(found, want)

    compact.remove(np.arange(1000, 1400))  # two thirds gone: the codes compact with the vectors
    compact.save(tmp_path / "compact")
    loaded = MuveraRetriever.load(tmp_path / "compact")
    assert loaded.storage == storage and isinstance(loaded._vectors, np.memmap)  # originals on disk
    np.testing.assert_array_equal(
        loaded.search(queries, 10, ef=200, rescore=40)[1], compact.search(queries, 10, ef=200, rescore=40)[1]
    )
    assert (loaded.search(queries, 10, ef=200)[1] >= 1400).all()
