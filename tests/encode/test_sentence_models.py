"""Any sentence-transformers model as the dense text model (a multilingual one, e5 with its prompts),
by folder or hub id: a tiny random-weight BERT built here, 32-dimensional, with query and document
prompts, stands in for the real ones that cannot be downloaded."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from pagesight import Index
from pagesight.encode import dense
from pagesight.encode.dense import SentenceEncoder, dense_dim
from pagesight.errors import PagesightError
from pagesight.settings import Settings
from tests.conftest import make_pdf

pytestmark = pytest.mark.timeout(180)

WORDS = [
    "the",
    "a",
    "of",
    "query",
    "passage",
    "cat",
    "chat",
    "dog",
    "chien",
    "house",
    "maison",
    "red",
    "rouge",
    "garden",
    "jardin",
    "blue",
    "bleu",
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A sentence-transformers folder: 2-layer BERT, mean pooling, normalised, e5-style prompts."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root = tmp_path_factory.mktemp("tiny-sentence-model")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ":", *WORDS]
    base = root / "base"
    BertTokenizerFast(vocab={token: number for number, token in enumerate(tokens)}).save_pretrained(base)
    config = BertConfig(
        vocab_size=len(tokens),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        initializer_range=0.5,  # tokens that tell apart: at the usual 0.02 every text gives about one vector
    )
    BertModel(config).save_pretrained(base)
    model = SentenceTransformer(
        modules=[Transformer(str(base), max_seq_length=48), Pooling(32, "mean"), Normalize()]
    )
    model.prompts = {"query": "query: ", "document": "passage: "}
    model.save(str(root / "model"))
    return root / "model"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGESIGHT_CACHE", str(tmp_path / "cache"))
    dense.dense_model.cache_clear()
    yield tmp_path / "cache"
    dense.dense_model.cache_clear()


def test_its_width_length_and_prompts_come_from_its_configuration(tiny_model, cache):
    model = SentenceEncoder(trained=tiny_model)
    assert (model.dim, model.max_tokens, model.prompts) == (32, 48, ("query: ", "passage: "))
    assert dense_dim(str(tiny_model)) == 32
    loaded = model.model  # loading it exports it to ONNX for queries
    assert model._export_path().is_file()

    texts = ["red cat", "the garden of the house"]
    reference = loaded.encode([f"query: {t}" for t in texts], normalize_embeddings=True, prompt="")
    assert np.abs(SentenceEncoder(trained=tiny_model).encode_queries(texts) - reference).max() < 1e-5
    documents = loaded.encode([f"passage: {t}" for t in texts], normalize_embeddings=True, prompt="")
    # documents in bfloat16 where the CPU has it (SentenceEncoder.model)
    assert np.abs(model.encode(texts) - documents).max() < 1e-2
    assert np.abs(model.encode(texts) - reference).max() > 5e-2  # the prompts make a difference


def test_an_index_with_it_searches_its_vectors(tiny_model, cache, tmp_path):
    pages = [["the red cat of the house"], ["le chat rouge de la maison"], ["a blue garden"]]
    pdf = make_pdf(tmp_path / "pets.pdf", pages)
    with Index.open(tmp_path / "ix", settings=Settings(dense_model=str(tiny_model))) as index:
        assert index.add([pdf]).ok
        hits = index.search("red cat", k=3, mode="dense")
        query = SentenceEncoder(trained=tiny_model).encode_queries(["red cat"])[0]
        owners, vectors = index.catalog.vectors()
        assert vectors.shape[1] == 32
        pages = dict(index.catalog.db.execute("SELECT id, page FROM tiles").fetchall())
        best: dict[int, float] = {}
        for owner, score in zip(owners, vectors @ query):
            best[pages[int(owner)]] = max(best.get(pages[int(owner)], -1.0), float(score))
        assert [hit.page for hit in hits] == sorted(best, key=best.get, reverse=True)


def test_a_hub_id_is_read_from_the_local_hugging_face_cache(tiny_model, cache, tmp_path, monkeypatch):
    from huggingface_hub import constants

    snapshot = tmp_path / "hub" / "models--tiny-org--tiny-e5" / "snapshots" / "0123456789abcdef"
    shutil.copytree(tiny_model, snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0123456789abcdef")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    model = dense.dense_model("tiny-org/tiny-e5")
    assert model.model_dir == snapshot and model.dim == 32
    with pytest.raises(PagesightError, match=r"'tiny-org/missing' is not on this machine.*--dense-model"):
        dense.check_dense_model("tiny-org/missing")
    with pytest.raises(PagesightError, match=r"unknown dense model './nowhere': no such folder"):
        dense.check_dense_model("./nowhere")


def test_qdrant_holds_its_vectors_at_their_width_and_ranks_as_the_local_store(tiny_model, cache, tmp_path):
    pytest.importorskip("qdrant_client")
    pages = [["the red cat of the house"], ["le chat rouge de la maison"], ["a blue garden"]]
    pdf = make_pdf(tmp_path / "pets.pdf", pages)
    settings = Settings(dense_model=str(tiny_model))
    ranked = []
    for location in (str(tmp_path / "local"), f"qdrant:{tmp_path / 'qdrant'}"):
        with Index.open(location, settings=settings) as index:
            assert index.add([pdf]).ok
            ranked.append([(hit.page, hit.score) for hit in index.search("red cat", k=3, mode="dense")])
    # the same pages in the same order, scores alike to float16's precision: the local store keeps
    # chunk vectors as float16, Qdrant as float32 (rounding to 4 places split a score now and then)
    assert [page for page, _ in ranked[0]] == [page for page, _ in ranked[1]] and len(ranked[0]) == 3
    assert [score for _, score in ranked[0]] == pytest.approx([score for _, score in ranked[1]], abs=2e-3)
