"""MiniLM distilled into static token vectors: made once per machine, then encoding without torch."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.encode.dense import StaticMiniLM, dense_model
from pagesight.settings import Settings
from tests.conftest import make_pdf

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def static() -> StaticMiniLM:
    model = dense_model("minilm-static")
    model.encode(["distilled once for the tests of this run"])
    return model


def test_the_distilled_model_keeps_what_minilm_knows_of_meaning(static: StaticMiniLM):
    assert static.path.is_dir() and static.path.is_relative_to(os.environ["PAGESIGHT_CACHE"])
    vectors = static.encode(
        ["capital expenditure", "purchases of property, plant and equipment", "the choir sang at dawn"]
    )
    assert vectors.shape == (3, StaticMiniLM.dim) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > unrelated + 0.1
    assert np.array_equal(static.encode(["capital expenditure"])[0], vectors[0])  # no state between calls
    assert static.encode([]).shape == (0, StaticMiniLM.dim)


def test_queries_are_encoded_without_torch(static: StaticMiniLM):
    probe = (
        "import sys; from pagesight.encode.dense import dense_model; "
        "vector = dense_model('minilm-static').encode_queries(['net revenue in 2018'])[0]; "
        "print(vector.shape[0], 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert found.stdout.split() == [str(StaticMiniLM.dim), "False", "False"], found.stderr


def test_an_index_with_static_vectors_finds_a_page_by_meaning(tmp_path: Path, static: StaticMiniLM):
    pdf = make_pdf(
        tmp_path / "notes.pdf",
        [
            ["The orchestra played a symphony by Mozart for the audience."],
            ["The mechanic repaired the automobile's engine and brakes."],
            ["Quarterly revenue grew in every region of the company."],
        ],
    )
    settings = Settings(dense_model="minilm-static")
    with Index.open(tmp_path / "index", settings=settings) as index:
        assert index.add(pdf).ok
        assert index.search("fixing a car", k=3, mode="lexical") == []  # no word in common
        hits = index.search("fixing a car", k=3, mode="dense")
        assert hits[0].page_id == "notes_2"
        assert index.search("violin concert", k=1, mode="dense")[0].page_id == "notes_1"
