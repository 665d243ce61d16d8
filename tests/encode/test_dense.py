"""Queries are encoded by the cached ONNX export of MiniLM, equal to the torch model's vectors,
so a search process needs neither torch nor sentence-transformers."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from pagesight import Index
from pagesight.encode import exported
from pagesight.encode.dense import SentenceEncoder
from tests.conftest import SAMPLES, make_pdf

TEXTS = [
    "What was the West region's revenue in Q3?",
    "",
    "TOTAL 1,234.50 EUR   VAT 7 %",
    "Ünïcödé, 東京, µm, — and emoji 🙂",
    " ".join(f"word{i}" for i in range(700)),  # far past the 256-token limit
]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGESIGHT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_loading_the_model_caches_an_export_whose_vectors_equal_torch(cache):
    model = SentenceEncoder()
    assert not list(cache.rglob("*.onnx"))
    reference = model.model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    (path,) = cache.rglob("*.onnx")
    assert path == exported.export_path(model.name, model.model_dir)

    queries = SentenceEncoder().encode_queries(TEXTS)
    assert queries.dtype == np.float32 and queries.shape == (len(TEXTS), SentenceEncoder().dim)
    session = exported.load(path, model.model_dir, 128).session  # threads sleep, never spin, when idle
    assert session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert np.abs(queries - reference).max() <= 1e-5
    assert np.allclose(np.linalg.norm(queries, axis=1), 1, atol=1e-5)


def test_without_an_export_queries_fall_back_to_torch_and_cache_one(cache):
    model = SentenceEncoder()
    vector = model.encode_queries(["reciprocal rank fusion"])
    assert model._model is not None  # torch did the work
    assert len(list(cache.rglob("*.onnx"))) == 1  # and the next process will not need it
    again = SentenceEncoder().encode_queries(["reciprocal rank fusion"])
    # The same vector: torch runs in bfloat16 on CPUs that have it, the export in float32.
    assert float((again * vector).sum()) >= 0.9999


def test_a_damaged_export_is_ignored(cache):
    model = SentenceEncoder()
    path = exported.export_path(model.name, model.model_dir)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a model")
    vector = model.encode_queries(["reciprocal rank fusion"])
    assert model._model is not None and np.isclose(np.linalg.norm(vector), 1, atol=1e-5)


@pytest.mark.parametrize("model", ["minilm-static", "minilm-l6-v2"])
def test_a_hybrid_search_process_never_imports_torch(tmp_path, model):
    pdf = make_pdf(tmp_path / "regions.pdf", [["Revenue of the North region"], ["West region revenue in Q3"]])
    with Index.open(tmp_path / "index", settings={"dense_model": model}) as index:
        assert index.add(pdf).ok  # ingestion distils the static model or caches MiniLM's export
    script = (
        "import sys\n"
        "from pagesight import Index\n"
        f"index = Index.open({str(tmp_path / 'index')!r}, create=False)\n"
        "hits = index.search('West region revenue in Q3', k=3)\n"
        "assert set(hits[0].scores) == {'bm25', 'dense', 'ranker'}, hits[0].scores\n"
        "print(hits[0].page_id)\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    top, loaded = done.stdout.split("\n")[:2]
    assert top == "regions_2" and loaded == "[]"


def test_the_first_ask_prints_no_progress_bar(tmp_path):
    """The first ask on a machine loads MiniLM for the extractive reader (and caches its export)
    after a search with the static model: no progress bar may reach the terminal."""
    from pagesight.encode.dense import dense_model

    static = dense_model("minilm-static")
    static.encode(["distilled in this run's cache"])
    cache = tmp_path / "cache"
    (cache / "static").mkdir(parents=True)
    (cache / "static" / static.path.name).symlink_to(static.path)  # no MiniLM export in it
    with Index.open(tmp_path / "index") as index:  # the demo's question and page
        assert index.add(SAMPLES / "quarterly-report.pdf").ok
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    env["PAGESIGHT_CACHE"] = str(cache)
    done = subprocess.run(
        [sys.executable, "-m", "pagesight", "ask", "What was the West region's revenue in Q3?",
         "--index", str(tmp_path / "index")],
        capture_output=True, text=True, timeout=300, check=True, env=env,
    )  # fmt: skip
    assert "4,870" in done.stdout and list(cache.rglob("*.onnx"))  # MiniLM was loaded
    assert "Loading weights" not in done.stderr and "%|" not in done.stderr, done.stderr
