"""``pagesight train`` end to end on a small real index: queries written as eval datasets, hard
negatives, the packaged MiniLM and a cross-encoder trained a step, and what it writes used by
ingest --dense-model, search --rerank and eval."""

from __future__ import annotations

import json

import pytest

from pagesight import Index
from pagesight.eval.dataset import Dataset
from tests.conftest import cli


@pytest.mark.timeout(300)
def test_train_then_index_search_and_evaluate_with_what_it_wrote(corpus, tmp_path):
    index, out = tmp_path / "index", tmp_path / "out"
    cli("ingest", str(corpus), "--index", str(index), "--jobs", "1")
    trained = cli(
        "train", "--index", str(index), "--out", str(out), "--per-tile", "1", "--negatives", "1",
        "--batch-size", "2", "--max-steps", "1", "--heldout", "0.34", "--cross-encoder",
        "--cross-passage-words", "48", "--negatives-from", "lexical", "--negatives-from", "dense", "--json",
    )  # fmt: skip
    report = json.loads(trained.stdout)
    assert report["queries"]["made"] == 6 and report["queries"]["heldout"] == 2
    assert report["negatives"]["modes"] == ["lexical", "dense"] and report["negatives"]["kept"] == 6
    assert report["dense"]["steps"] == 1 and report["dense"]["heldout_before"]["pool"]["queries"] == 2
    assert set(report["dense"]["heldout_after"]) == {"pool", "own_negatives"}
    assert report["cross_encoder"]["heldout_after"]["own_negatives"]["candidates"] == 2
    assert json.loads((out / "report.json").read_text()) == report

    heldout = Dataset.load(out / "heldout")
    assert len(heldout.queries) == 2 and all(len(judged) == 1 for judged in heldout.qrels.values())
    assert sorted(p.name for p in (out / "queries" / "documents").iterdir()) == sorted(
        p.name for p in corpus.iterdir()
    )

    new = tmp_path / "trained-index"
    cli("ingest", str(corpus), "--index", str(new), "--jobs", "1", "--dense-model", str(out / "dense"))
    with Index.open(new, create=False) as opened:
        assert opened.settings.dense_model == str((out / "dense").resolve())
        assert opened.search("glacier retreat", k=1, mode="dense")[0].doc_id == "topic-3"
    evaluated = cli(
        "eval", str(out / "heldout"), "--index", str(new), "-m", "dense", "--rerank", "cross-encoder",
        "--rerank-model", str(out / "cross-encoder"), "--rerank-candidates", "3", "--json",
    )  # fmt: skip
    configs = [row["config"] for row in json.loads(evaluated.stdout)["configs"]]
    assert configs == ["dense", "dense+cross-encoder"]
    refused = cli(
        "ingest", str(corpus), "--index", str(index), "--dense-model", str(out / "dense"), check=False
    )
    assert refused.returncode == 2 and "make a new index for --dense-model" in refused.stderr
