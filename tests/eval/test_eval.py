"""`pagesight eval`, `compare` and `import-dataset`, run in this process on the shared sample index."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import pytrec_eval
from PIL import Image, ImageDraw, ImageFont

from pagesight.errors import InputError, PagesightError
from pagesight.eval.dataset import Dataset
from pagesight.eval.report import run_filename
from pagesight.eval.runs import read_trec
from tests.conftest import ROOT, cli

METRICS = ("recall@1", "recall@5", "recall@10", "recall@20", "ndcg@10", "mrr@10", "success@5")


def test_eval_samples_reports_metrics_runs_and_plots(tmp_path: Path, sample_index):
    report = tmp_path / "report"
    result = cli(
        "eval", str(ROOT / "samples"), "--index", str(sample_index.root), "-m", "lexical", "-m", "rsf:0.5",
        "-m", "rrf", "--report", str(report), "--json",
    )  # fmt: skip
    summary = json.loads(result.stdout)
    assert {*METRICS, "n_queries", "n_pages"} <= summary.keys()
    assert summary["n_queries"] == 13 and summary["n_pages"] == 8
    assert [c["config"] for c in summary["configs"]] == ["lexical", "rsf:0.5", "rrf"]
    assert summary["config"] == summary["best"] and summary["primary"] == "ndcg@10"
    assert summary["ndcg@10"] == max(c["ndcg@10"] for c in summary["configs"])
    assert summary["recall@20"] == 1.0  # every sample answer page is found

    samples = Dataset.load(ROOT / "samples")
    for config in summary["configs"]:
        run, tag = read_trec(report / "runs" / f"{config['config'].replace(':', '-')}.trec")
        assert tag == config["config"].replace(":", "-") and set(run) == set(samples.qrels)
        scored = {q: {d: float(len(r) - i) for i, (d, _) in enumerate(r)} for q, r in run.items()}
        ref = pytrec_eval.RelevanceEvaluator(samples.qrels, {"recall.1,5,20", "ndcg_cut.10"}).evaluate(scored)
        for ours, theirs in (("recall@1", "recall_1"), ("recall@5", "recall_5"), ("ndcg@10", "ndcg_cut_10")):
            expected = sum(row[theirs] for row in ref.values()) / len(ref)
            assert config[ours] == pytest.approx(expected, abs=1e-6)

    for name in ("report.md", "report.html", "summary.json", "recall_at_k.png"):
        assert (report / name).stat().st_size > 0
    assert Image.open(report / "recall_at_k.png").size == (600, 400)
    assert "| lexical |" in (report / "report.md").read_text()

    compared = json.loads(
        cli(
            "compare", *(str(p) for p in sorted((report / "runs").glob("*.trec"))),
            "--qrels", str(ROOT / "samples" / "qrels.tsv"), "--json",
        ).stdout
    )  # fmt: skip
    by_name = {row["config"]: row for row in compared["runs"]}
    assert by_name["lexical"]["ndcg@10"] == pytest.approx(summary["configs"][0]["ndcg@10"], abs=1e-6)
    assert len(compared["comparisons"]) == 3


def test_an_evaluation_runs_from_the_library_as_from_the_command_line(tmp_path: Path, sample_index):
    from pagesight.eval.runner import SearchGrid, evaluate_dataset

    seen = []
    evaluation = evaluate_dataset(
        ROOT / "samples",
        index=sample_index.root,
        searches=SearchGrid(modes=("lexical", "rrf")),
        reader="extractive",
        report=tmp_path / "report",
        progress=lambda config, done, total: seen.append((config.name, done, total)),
    )
    assert [r.config.name for r in evaluation.results] == ["lexical", "rrf"]
    assert seen[-1] == ("rrf", 13, 13) and ("lexical", 1, 13) in seen
    assert (
        evaluation.answers.summary()["n_answers"] == 13
        and evaluation.answers.config == evaluation.best.config
    )
    assert (tmp_path / "report" / "answers.jsonl").exists() and evaluation.report_files["html"].exists()
    command = json.loads(
        cli(
            "eval",
            str(ROOT / "samples"),
            "--index",
            str(sample_index.root),
            "-m",
            "lexical",
            "-m",
            "rrf",
            "--json",
        ).stdout
    )
    library = evaluation.to_dict()
    for key in ("best", "recall@1", "recall@5", "ndcg@10", "n_queries", "n_pages"):
        assert library[key] == command[key], key
    with pytest.raises(PagesightError, match="primary metric must be one of"):
        evaluate_dataset(ROOT / "samples", index=sample_index.root, primary="precision")
    with pytest.raises(PagesightError, match="a judge scores a reader's answers"):
        evaluate_dataset(ROOT / "samples", index=sample_index.root, judge=lambda *a: None)


def test_within_document_searches_each_question_inside_its_own_documents(tmp_path: Path, sample_index):
    report = tmp_path / "report"
    result = cli(
        "eval", str(ROOT / "samples"), "--index", str(sample_index.root), "-m", "lexical/doc:0",
        "--within-document", "--report", str(report), "--json",
    )  # fmt: skip
    summary = json.loads(result.stdout)
    names = [c["config"] for c in summary["configs"]]
    assert names == ["lexical/doc:0", "lexical/doc:0/within"]
    assert summary["best"] == "lexical/doc:0"  # the whole collection's, never the easier protocol's
    samples = Dataset.load(ROOT / "samples")
    whole, _ = read_trec(report / "runs" / "lexical_doc-0.trec")
    within, tag = read_trec(report / "runs" / "lexical_doc-0_within.trec")
    assert tag == "lexical_doc-0_within" and set(within) == set(samples.qrels)
    for qid, ranked in within.items():
        documents = {page.rpartition("_")[0] for page in samples.qrels[qid]}
        assert ranked and {page.rpartition("_")[0] for page, _ in ranked} <= documents
        # the same ranking as the whole collection's, with other documents' pages left out
        assert [page for page, _ in ranked] == [p for p, _ in whole[qid] if p.rpartition("_")[0] in documents]
    by_name = {c["config"]: c for c in summary["configs"]}
    assert by_name["lexical/doc:0/within"]["ndcg@10"] >= by_name["lexical/doc:0"]["ndcg@10"]


def test_a_question_can_name_the_documents_it_is_asked_of(tmp_path: Path, sample_index):
    from pagesight.eval.harness import Config, evaluate

    data = Dataset.load(ROOT / "samples")
    qid = next(iter(data.qrels))
    other = next(d for d in sample_index.documents() if d != data.documents_of(qid, "page")[0])
    data.doc_ids[qid] = [other]  # a question asked of a document its answer is not in
    (within,) = evaluate(sample_index, data, [Config.parse("lexical/within")])
    assert within.config.within_document and within.per_query[qid]["recall@20"] == 0.0
    assert {page.rpartition("_")[0] for page, _ in within.run[qid]} <= {other}

    bad = tmp_path / "bad"
    shutil.copytree(ROOT / "samples", bad)
    (bad / "queries.jsonl").write_text('{"_id": "s1", "text": "tiles", "doc_ids": "retrieval-primer"}\n')
    with pytest.raises(InputError, match="query s1: doc_ids must be a list"):
        Dataset.load(bad)


def test_a_setting_varied_over_values_is_searched_with_each_and_plotted(tmp_path: Path, sample_index):
    report = tmp_path / "report"
    shown = cli(
        "eval", str(ROOT / "samples"), "--index", str(sample_index.root), "-m", "rrf/doc:0",
        "--vary", "alpha=0,0.5,1", "--report", str(report), "--json",
    )  # fmt: skip
    summary = json.loads(shown.stdout)
    names = [c["config"] for c in summary["configs"]]
    assert names == ["rrf/doc:0/alpha:0", "rrf/doc:0/alpha:0.5", "rrf/doc:0/alpha:1"]
    runs = {name: read_trec(report / "runs" / run_filename(name))[0] for name in names}
    assert runs[names[0]] != runs[names[2]]  # BM25 alone against dense alone
    assert Image.open(report / "alpha_sweep.png").size == (600, 400)
    for bad, message in (("alpha", "--vary: give NAME=VALUE"), ("colour=1", "unknown setting 'colour'")):
        refused = cli(
            "eval", str(ROOT / "samples"), "--index", str(sample_index.root), "--vary", bad, check=False
        )
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr


def test_alpha_sweep_is_plotted(tmp_path: Path, sample_index):
    report = tmp_path / "report"
    cli("eval", str(ROOT / "samples"), "--index", str(sample_index.root), "--sweep", "--report", str(report))
    summary = json.loads((report / "summary.json").read_text())
    assert [r["config"] for r in summary["results"]] == [f"rsf:{a / 10:g}" for a in range(11)]
    assert Image.open(report / "alpha_sweep.png").size == (600, 400)


def test_answers_are_scored_with_a_reader(tmp_path: Path, sample_index):
    report = tmp_path / "report"
    result = cli(
        "eval", str(ROOT / "samples"), "--index", str(sample_index.root), "-m", "hybrid",
        "--reader", "extractive", "--report", str(report), "--json",
    )  # fmt: skip
    answers = json.loads(result.stdout)["answers"]
    assert answers["reader"] == "extractive" and answers["n_answers"] == 13
    assert answers["contains"] >= 0.8 and answers["cites_relevant"] >= 0.8
    rows = [json.loads(line) for line in (report / "answers.jsonl").read_text().splitlines()]
    assert len(rows) == 13
    from pagesight.eval.answers import answer_scores, contains

    for row in rows:  # the summary is the mean of the rows, and each row's scores are recomputable
        assert row["scores"]["contains"] == contains(row["prediction"], row["reference"])
        assert row["scores"]["f1"] == answer_scores(row["prediction"], row["reference"])["f1"]
    assert answers["f1"] == pytest.approx(sum(r["scores"]["f1"] for r in rows) / 13, abs=1e-6)
    refused = cli("eval", str(ROOT / "samples"), "--judge-model", "m", check=False)
    assert refused.returncode == 2 and "--judge-model needs --reader" in refused.stderr


def test_lexical_index_refuses_dense_configurations(tmp_path: Path):
    index = str(tmp_path / "ix")
    cli("ingest", str(ROOT / "samples" / "corpus"), "--index", index, "--no-dense", "--ocr", "never")
    refused = cli("eval", str(ROOT / "samples"), "--index", index, "-m", "hybrid", check=False)
    assert refused.returncode == 2 and "no dense vectors" in refused.stderr
    lexical = json.loads(
        cli("eval", str(ROOT / "samples"), "--index", index, "-m", "lexical", "--json").stdout
    )
    assert lexical["config"] == "lexical" and lexical["n_queries"] == 13


def test_a_reranker_running_its_own_code_is_evaluated_with_the_leave(tmp_path: Path):
    """eval takes --trust-remote-code, as the refusal of a model with its own code asks."""
    pytest.importorskip("torch")
    from tests.remote_code import modeling_tiny_m0, save

    index = str(tmp_path / "ix")
    cli("ingest", str(ROOT / "samples" / "corpus"), "--index", index, "--no-dense", "--ocr", "never")
    folder = tmp_path / "tiny-m0"
    save(folder, modeling_tiny_m0)
    args = ("eval", str(ROOT / "samples"), "--index", index, "-m", "lexical", "--rerank", "jina-m0")
    args += ("--rerank-model", str(folder), "--rerank-candidates", "2", "--json")
    refused = cli(*args, check=False)
    assert refused.returncode == 2 and "runs code of its own" in refused.stderr
    assert "--trust-remote-code" in refused.stderr
    ran = json.loads(cli(*args, "--trust-remote-code").stdout)
    plain, reranked = ran["configs"]
    assert reranked["config"] == "lexical+jina-m0" and reranked["n_queries"] == plain["n_queries"] == 13
    assert reranked["latency_ms_p50"] > plain["latency_ms_p50"]  # the tiles' images were scored


def page_image(text: str) -> bytes:
    image = Image.new("RGB", (900, 260), "white")
    ImageDraw.Draw(image).text((40, 90), text, fill="black", font=ImageFont.load_default(size=44))
    buffer = __import__("io").BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def test_vidore_style_parquet_dataset_is_imported_and_evaluated(tmp_path: Path):
    source = tmp_path / "vidore"
    (source / "corpus").mkdir(parents=True)
    texts = {
        "101": "Lighthouse keeper logbook",
        "102": "Glacier melt measurements",
        "103": "Harbour crane inventory",
    }
    corpus = pa.table(
        {
            "corpus-id": [int(k) for k in texts],
            "image": [{"bytes": page_image(t), "path": None} for t in texts.values()],
        }
    )
    pq.write_table(corpus, source / "corpus" / "test-00000-of-00001.parquet")
    pq.write_table(
        pa.table({"query-id": [1, 2], "query": ["glacier melt", "crane inventory"]}),
        source / "queries.parquet",
    )
    pq.write_table(
        pa.table({"query-id": [1, 2], "corpus-id": [102, 103], "score": [1, 2]}), source / "qrels.parquet"
    )
    out = tmp_path / "dataset"
    cli("import-dataset", str(source), str(out))
    assert sorted(p.name for p in (out / "pages").iterdir()) == ["101.png", "102.png", "103.png"]
    assert Dataset.load(out).qrels == {"1": {"102": 1}, "2": {"103": 2}}

    result = json.loads(
        cli("eval", str(out), "--index", str(tmp_path / "ix"), "-m", "lexical", "--json").stdout
    )
    assert result["n_pages"] == 3 and result["recall@1"] == 1.0  # corpus ids name whole documents


def test_beir_text_folder_is_typeset_into_pages(tmp_path: Path):
    source = tmp_path / "beir"
    (source / "qrels").mkdir(parents=True)
    passages = {
        "d1": ("Tides", "Spring tides occur near the new and full moon."),
        "d2": ("Volcanoes", "Basaltic lava flows are fluid & hot <very hot>."),
        "d3": ("Bees", "Honey bees communicate the direction of flowers with a waggle dance."),
    }
    (source / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in passages.items())
    )
    (source / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "waggle dance"})
        + "\n"
        + json.dumps({"_id": "q2", "text": "lava"})
        + "\n"
    )
    (source / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\nq2\td2\t1\n")
    out = tmp_path / "dataset"
    cli("import-dataset", str(source), str(out))
    result = json.loads(
        cli("eval", str(out), "--index", str(tmp_path / "ix"), "-m", "lexical", "--json").stdout
    )
    assert result["n_pages"] == 3 and result["recall@1"] == 1.0

    again = cli("import-dataset", str(source), str(out), check=False)
    assert again.returncode == 2 and "not empty" in again.stderr


def test_dataset_errors_name_the_file_and_line(tmp_path: Path):
    root = tmp_path / "ds"
    shutil.copytree(ROOT / "samples", root, ignore=shutil.ignore_patterns("corpus"))
    with pytest.raises(InputError, match="no documents folder"):
        Dataset.load(root)
    (root / "pdfs").mkdir()
    (root / "queries.jsonl").write_text('{"_id": "s1", "text": "a"}\n{"_id": "s2"\n')
    with pytest.raises(InputError, match=r"queries.jsonl:2: not JSON"):
        Dataset.load(root)
    (root / "queries.jsonl").write_text('{"_id": "s1", "text": "a"}\n')
    with pytest.raises(InputError, match=r"qrels.tsv: judgements for unknown queries s10"):
        Dataset.load(root)
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\ns1\tdoc_1\thigh\n")
    with pytest.raises(InputError, match=r"qrels.tsv:2: score 'high' is not a number"):
        Dataset.load(root)


@pytest.mark.timeout(300)
def test_a_ranker_is_fitted_on_judged_questions_and_measured_on_the_others(tmp_path: Path, sample_index):
    other = tmp_path / "samples-again"  # a second dataset: the same questions, another name
    other.mkdir()
    for name in ("queries.jsonl", "qrels.tsv"):
        shutil.copy(ROOT / "samples" / name, other / name)
    (other / "corpus").symlink_to(ROOT / "samples" / "corpus")
    index = str(sample_index.root)
    fitted = tmp_path / "ranker.json"
    report = json.loads(
        cli(
            "fit-ranker", str(ROOT / "samples"), str(other), "-i", index, "-i", index,
            "--out", str(fitted), "--json",
        ).stdout
    )  # fmt: skip
    assert report["about"]["fitted on"] == {"samples": 13, "samples-again": 13}
    assert set(report["left_out"]) == {"samples", "samples-again"}
    for measured in report["left_out"].values():
        for kind in ("unranked", "ranked"):
            assert set(measured[kind]) == {"whole", "within"}
            assert set(measured[kind]["whole"]) == {"recall@1", "recall@5", "recall@10", "ndcg@10"}
    # the same questions: unranked, both sets measure the same
    assert report["left_out"]["samples"]["unranked"] == report["left_out"]["samples-again"]["unranked"]
    searched = cli("search", "rank fusion constant", "--index", index, "--ranker-file", str(fitted), "--json")
    assert "ranker" in json.loads(searched.stdout)[0]["scores"]
    refused = cli("fit-ranker", str(ROOT / "samples"), str(other), "-i", index, check=False)
    assert refused.returncode == 2 and "1 --index for 2 datasets" in refused.stderr
