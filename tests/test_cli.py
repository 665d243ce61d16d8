"""The command-line contract, run as a user runs it: a subprocess of the installed entry point."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import SAMPLES, make_pdf


def pagesight(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pagesight", *args]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"}
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{command} exited {result.returncode}: {result.stderr}")
    return result


def test_ingest_search_info_delete(tmp_path: Path):
    index = str(tmp_path / "ix")
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("quarterly-report.pdf", "retrieval-primer.pdf", "long-infographic.png"):
        (docs / name).write_bytes((SAMPLES / name).read_bytes())
    ingested = pagesight("ingest", str(docs), "--index", index, "--no-dense", "--json")
    assert json.loads(ingested.stdout)["added"] == 3

    hits = json.loads(
        pagesight("search", "West region revenue", "--index", index, "-k", "2", "--json").stdout
    )
    assert len(hits) == 2
    assert {"doc_id", "page", "tile", "score", "snippet", "boxes", "page_id"} <= hits[0].keys()
    assert (hits[0]["doc_id"], hits[0]["page"], hits[0]["tile"]) == ("quarterly-report", 1, 0)
    assert all(len(box) == 4 for box in hits[0]["boxes"])

    table = pagesight("search", "Warehouse Delta", "--index", index, "--mode", "lexical").stdout
    assert "long-infographic_1" in table

    info = json.loads(pagesight("info", "--index", index, "--json").stdout)
    assert (info["documents"], info["pages"], info["tiles"]) == (3, 6, 8)
    assert info["generation"] == info["retrievers_generation"]

    pagesight("delete", "quarterly-report", "--index", index)
    assert json.loads(pagesight("info", "--index", index, "--json").stdout)["documents"] == 2
    missing = pagesight("delete", "quarterly-report", "--index", index, check=False)
    assert missing.returncode == 1 and "no document 'quarterly-report'" in missing.stderr


def test_failures_exit_1_with_one_line_per_input(tmp_path: Path):
    index = str(tmp_path / "ix")
    good = make_pdf(tmp_path / "good.pdf", [["a perfectly good page of text about owls"]])
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.7\n garbage")
    result = pagesight("ingest", str(good), str(bad), "--index", index, "--no-dense", check=False)
    assert result.returncode == 1
    failure_lines = [line for line in result.stderr.splitlines() if line.startswith(str(bad))]
    assert len(failure_lines) == 1 and failure_lines[0].startswith(f"{bad}: not a readable PDF")
    assert "Traceback" not in result.stderr
    hits = json.loads(pagesight("search", "owls", "--index", index, "--json").stdout)
    assert hits[0]["doc_id"] == "good"
    assert pagesight("ingest", str(good), "--index", index).returncode == 0


def test_errors_are_one_line_not_tracebacks(tmp_path: Path):
    result = pagesight("search", "anything", "--index", str(tmp_path / "nowhere"), check=False)
    assert result.returncode == 2
    assert "no pagesight index" in result.stderr and "Traceback" not in result.stderr
    index = str(tmp_path / "ix")
    pagesight("ingest", str(make_pdf(tmp_path / "a.pdf", [["words"]])), "--index", index, "--no-dense")
    dense = pagesight("search", "words", "--index", index, "--mode", "dense", check=False)
    assert dense.returncode == 2 and "no dense vectors" in dense.stderr


def test_version_and_license_match_the_package():
    import tomllib

    from pagesight import __version__

    project = tomllib.loads((SAMPLES.parents[1] / "pyproject.toml").read_text())["project"]
    assert (
        pagesight("--version").stdout.strip()
        == f"pagesight {__version__}"
        == f"pagesight {project['version']}"
    )
    assert project["license"] == "Apache-2.0"
    assert (SAMPLES.parents[1] / "LICENSE").read_text().split()[:4] == [
        "Apache",
        "License",
        "Version",
        "2.0,",
    ]


def test_bad_search_and_ask_requests_exit_2_with_the_reason(sample_index):
    from tests.conftest import cli

    index = str(sample_index.root)
    for args, message in (
        (["search", "", "--index", index], "the query is empty"),
        (["search", "revenue", "--index", index, "-k", "0"], "k must be from 1 to 1000, got 0"),
        (["search", "revenue", "--index", index, "--alpha", "2"], "alpha must be from 0 to 1, got 2"),
        (["search", "revenue", "--index", index, "--doc", "nope"], "no document 'nope' in the index"),
        (["ask", " ", "--index", index], "the question is empty"),
        (["ask", "revenue?", "--index", index, "-k", "-1"], "k must be from 1 to 1000, got -1"),
    ):
        result = cli(*args, check=False)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
        assert result.stdout == ""


def test_help_and_argument_errors_import_no_retriever_or_model():
    # What `pagesight --help` or a mistyped option pays for at start-up: no FAISS, bm25s, SciPy,
    # torch or sentence-transformers (imported by the commands that need them).
    probe = (
        "import sys, pagesight.cli\n"
        "heavy = ('faiss', 'bm25s', 'scipy', 'torch', 'sentence_transformers', 'rapidocr', 'pebble')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr
    wrong = pagesight("search", "x", "--index", "nowhere", "--mode", "pixels", check=False)
    assert wrong.returncode == 2 and "pixels" in wrong.stderr


def test_help_reads_at_80_columns():
    for args in ([], ["ingest"], ["search"], ["ask"], ["eval"], ["documents"]):
        shown = subprocess.run(
            [sys.executable, "-m", "pagesight", *args, "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "80"},
        )
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, (args, lines)
        cut_short = [line for line in lines if line.endswith("...") and not line.startswith("Usage:")]
        assert not cut_short, (args, cut_short)
        assert "╭" not in shown.stdout  # plain text, no box drawing


def test_ingest_prints_progress_lines_when_not_on_a_terminal(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(3):
        make_pdf(docs / f"d{n}.pdf", [[f"page about topic {n}"]])
    result = pagesight("ingest", str(docs), "--index", str(tmp_path / "ix"), "--no-dense")
    progress = [line for line in result.stderr.splitlines() if line.startswith("ingest: ")]
    assert progress and progress[-1].startswith("ingest: 3/3 files, 3 pages ("), result.stderr


def test_info_and_documents_read_as_tables(tmp_path: Path):
    from tests.conftest import cli

    index = str(tmp_path / "ix")
    cli("ingest", str(SAMPLES / "quarterly-report.pdf"), str(SAMPLES / "scanned-memo.pdf"), "--index", index)
    info = cli("info", "--index", index).stdout
    rows = dict(line.split(None, 1) for line in info.splitlines())
    assert rows["documents"].startswith("2: 3 pages in 3 tiles, 1 pages read by OCR")
    assert rows["dense"].startswith("minilm-static: ") and rows["visual"].strip() == "none"
    assert rows["retrievers"].startswith("up to date") and rows["languages"].strip() == "en 3 pages"

    listing = cli("documents", "--index", index).stdout.splitlines()
    assert listing[0].split() == ["id", "type", "pages", "language", "source"]
    assert [line.split()[:4] for line in listing[1:]] == [
        ["quarterly-report", "pdf", "2", "en"],
        ["scanned-memo", "pdf", "1", "en"],
    ]
    records = json.loads(cli("documents", "--index", index, "--json").stdout)
    assert records[0]["source"] == str(SAMPLES / "quarterly-report.pdf") and records[0]["notes"] == []
    # the ids listed are the ids delete takes
    cli("delete", records[1]["id"], "--index", index)
    assert [r["id"] for r in json.loads(cli("documents", "--index", index, "--json").stdout)] == [
        "quarterly-report"
    ]


def test_a_failed_encoder_leaves_no_index_behind(tmp_path: Path):
    from tests.conftest import cli

    pdf = str(SAMPLES / "scanned-memo.pdf")
    unknown = cli("ingest", pdf, "--index", str(tmp_path / "a"), "--encoder", "nonsense", check=False)
    assert unknown.returncode == 2 and "unknown visual encoder 'nonsense'; choose one of" in unknown.stderr
    assert not (tmp_path / "a").exists()

    # A hub model that is not on this machine (and no hub to fetch it from: offline mode) is one
    # line saying how to get it, at once, and the index it would have made is not left behind.
    empty = tmp_path / "b"
    empty.mkdir()
    missing = subprocess.run(
        [sys.executable, "-m", "pagesight", "ingest", pdf, "--index", str(empty), "--encoder", "clip"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")},
    )
    assert missing.returncode == 2, missing.stderr
    (line,) = missing.stderr.strip().splitlines()
    assert "model 'openai/clip-vit-base-patch32' is not on this machine" in line
    assert "--encoder-model FOLDER" in line
    assert list(empty.iterdir()) == []
    # the same folder makes a working index afterwards
    cli("ingest", pdf, "--index", str(empty), "--no-dense")
    assert json.loads(cli("info", "--index", str(empty), "--json").stdout)["documents"] == 1


def test_ingest_options_that_make_an_index_are_checked_against_an_existing_one(tmp_path: Path):
    from tests.conftest import cli

    pdf = str(make_pdf(tmp_path / "a.pdf", [["settings are fixed"]]))
    index = str(tmp_path / "ix")
    cli("ingest", pdf, "--index", index, "--no-dense", "--dpi", "120")
    # the same options, or none of them, add to it
    cli("ingest", pdf, "--index", index, "--no-dense", "--dpi=120")
    cli("ingest", pdf, "--index", index)
    for option, made in ((["--dpi", "150"], "dpi=120.0"), (["--dense"], "dense_model=None")):
        refused = cli("ingest", pdf, "--index", index, *option, check=False)
        assert refused.returncode == 2, refused.stderr
        assert f"{option[0]} is chosen when an index is made (it was made with {made})" in refused.stderr
    both = cli("ingest", pdf, "--index", index, "--dpi", "150", "--layout", check=False)
    assert (
        "--dpi and --layout are chosen when an index is made (it was made with dpi=120.0, layout=False)"
        in (both.stderr)
    )
    bad = cli("ingest", pdf, "--index", str(tmp_path / "new"), "--encoder-model", "x", check=False)
    assert bad.returncode == 2 and "visual_model and visual_adapter need a visual_encoder" in bad.stderr
    assert not (tmp_path / "new").exists()


def test_openmp_threads_wait_passively_unless_the_user_says_otherwise():
    """Spinning OpenMP threads made CPU training ten times slower beside other busy processes."""
    code = "import os, pagesight; print(os.environ['OMP_WAIT_POLICY'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert found.stdout.strip() == "PASSIVE", found.stderr
    own = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "OMP_WAIT_POLICY": "ACTIVE"},
    )
    assert own.stdout.strip() == "ACTIVE", own.stderr


def test_an_unreachable_qdrant_server_and_judge_are_one_line_saying_what_to_do(tmp_path: Path):
    from tests.conftest import cli

    unreachable = cli("info", "--index", "qdrant://127.0.0.1:9/papers", check=False)
    assert unreachable.returncode == 2
    (line,) = unreachable.stderr.strip().splitlines()
    assert "no Qdrant server answers at http://127.0.0.1:9" in line and "qdrant://HOST:PORT/NAME" in line
    judged = cli(
        "eval", str(SAMPLES.parent), "--index", str(tmp_path / "ix"), "--answers", "--judge-model", "judge",
        "--judge-base-url", "http://127.0.0.1:9/v1", check=False,
    )  # fmt: skip
    assert judged.returncode == 2 and not (tmp_path / "ix").exists()  # refused before any search
    (line,) = judged.stderr.strip().splitlines()
    assert (
        "the judge's endpoint http://127.0.0.1:9/v1 cannot be reached" in line and "--judge-base-url" in line
    )
