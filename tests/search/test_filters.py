"""``where`` filters (``search/filters.py``): documents' fields from the file, its PDF metadata, a
sidecar and the run's ``meta``; parsed with errors naming the token; applied before ranking in both
stores, so a filtered search is the unfiltered ranking with the other documents taken out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pikepdf
import pytest

from pagesight import Index
from pagesight.errors import PagesightError
from pagesight.request import SearchRequest
from pagesight.where import parse
from tests.conftest import cli, make_pdf

TEAMS = {"red": ["atlas", "basin", "cirque"], "blue": ["delta", "esker"]}


def corpus(folder: Path) -> Path:
    """Five reports on glaciers, each page naming it; the red team's in sidecars, one PDF with an
    author and a creation date in its metadata."""
    folder.mkdir()
    for team, names in TEAMS.items():
        for n, name in enumerate(names):
            made = make_pdf(
                folder / f"{name}.pdf",
                [
                    [f"{name} glacier moraine survey page {page}", "ice flow and meltwater"]
                    for page in range(1 + n)
                ],
            )
            made.with_name(made.name + ".meta.json").write_text(json.dumps({"team": team, "rank": n}))
    with pikepdf.open(folder / "esker.pdf", allow_overwriting_input=True) as pdf:
        pdf.docinfo["/Author"] = "Ada Lovelace"
        pdf.docinfo["/CreationDate"] = "D:20190305120000Z"
        pdf.save(folder / "esker.pdf")
    return folder


@pytest.mark.parametrize("store", ["local", "qdrant"])
@pytest.mark.timeout(180)
def test_a_filtered_search_is_the_ranking_with_the_other_documents_taken_out(tmp_path: Path, store: str):
    if store == "qdrant":
        pytest.importorskip("qdrant_client")
    location = str(tmp_path / "ix") if store == "local" else f"qdrant:{tmp_path / 'q'}"
    with Index.open(location, settings={"dense_model": None}) as index:
        assert index.add([corpus(tmp_path / "docs")], jobs=1, meta={"project": "glaciers"}).ok
        plain = {"mode": "lexical", "document_weight": 0}  # BM25 alone: scores that do not depend on the pool
        everything = index.search("glacier moraine meltwater", k=100, **plain)
        for where in (
            "team = red",
            "team = blue and rank >= 1",
            "author ^= Ada",
            "year = 2019",
            "id in (atlas, delta)",
        ):
            kept = {row["id"] for row in index.document_list(where)}
            expected = [(h.page_id, h.tile) for h in everything if h.doc_id in kept][:3]
            found = index.search("glacier moraine meltwater", k=3, where=where, **plain)
            assert [(h.page_id, h.tile) for h in found] == expected, where
        assert {row["id"] for row in index.document_list("team = blue")} == {"delta", "esker"}
        assert [row["id"] for row in index.document_list("author = 'Ada Lovelace'")] == ["esker"]
        assert len(index.document_list("project = glaciers")) == 5  # the run's own field
        assert index.search("glacier", where="team = green") == []
        only_esker = index.search("glacier", k=2, where="year = 2019 and pages = 2")
        assert sorted(h.page_id for h in only_esker) == ["esker_1", "esker_2"]  # k hits, one document passing


def test_a_malformed_filter_is_refused_naming_where_it_goes_wrong():
    for text, message in (
        ("type =", "ends where a value after '=' should follow"),
        ("type ~ pdf", "expected an operator after 'type', got '~'"),
        ('type = "pdf', "cannot read '\"pdf'"),
        ("type = pdf or year = 2020", "expected 'and' between clauses, got 'or'"),
        ("type in (pdf, image", "ends where ',' or ')' should follow"),
        ("= pdf", "expected a field name, got '='"),
        ("", "the expression is empty"),
    ):
        with pytest.raises(PagesightError, match=re.escape(message)):
            parse(text)
    with pytest.raises(PagesightError, match="expected 'and'"):
        SearchRequest("glacier", where="type = pdf year = 2020")  # refused with the request
    assert parse("pages>=2 and path^=/data/").passes({"pages": 3, "path": "/data/a.pdf"})
    assert not parse("year >= 2020").passes({"year": "unknown"})  # no number to compare


@pytest.mark.timeout(120)
def test_the_command_line_takes_fields_and_filters(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    make_pdf(docs / "owls.pdf", [["barn owls hunt voles"]])
    index = str(tmp_path / "ix")
    cli("ingest", str(docs), "--index", index, "--no-dense", "--meta", "shelf=B2", "--meta", "year=1999")
    listed = json.loads(cli("documents", "--index", index, "--where", "shelf = B2", "--json").stdout)
    assert [row["id"] for row in listed] == ["owls"] and listed[0]["fields"]["shelf"] == "B2"
    hits = json.loads(cli("search", "owls", "--index", index, "--where", "year < 2000", "--json").stdout)
    assert [hit["doc_id"] for hit in hits] == ["owls"]
    assert json.loads(cli("search", "owls", "--index", index, "--where", "shelf = C1", "--json").stdout) == []
    bad = cli("search", "owls", "--index", index, "--where", "shelf", check=False)
    assert bad.returncode == 2 and "where:" in bad.stderr
    wrong = cli("ingest", str(docs), "--index", index, "--meta", "shelf", check=False)
    assert wrong.returncode == 2 and "--meta must be KEY=VALUE, got 'shelf'" in wrong.stderr


@pytest.mark.timeout(120)
def test_eval_searches_every_configuration_within_the_filter(lexical_samples):
    from pagesight.eval.runner import SearchGrid, evaluate_dataset
    from tests.conftest import SAMPLES

    def recall(where):
        result = evaluate_dataset(
            SAMPLES.parent, index=lexical_samples.root, searches=SearchGrid(modes=("lexical",), where=where)
        )
        return result.summaries()[0]["recall@5"]

    whole, none = recall(None), recall("id = nothing-at-all")
    assert whole > 0 and none == 0


@pytest.mark.timeout(120)
def test_a_folders_csv_gives_its_files_fields_under_their_own_sidecars(tmp_path: Path):
    docs = tmp_path / "docs"
    (docs / "2021").mkdir(parents=True)
    for name in ("2021/atlas", "2021/basin", "cirque"):
        make_pdf(docs / f"{name}.pdf", [[f"{name.split('/')[-1]} glacier moraine survey"]])
    (docs / "pagesight.meta.csv").write_text(
        "path,year,team,budget\n2021/atlas.pdf,2021,red,\n2021/basin.pdf,2021,blue,3.5\ncirque.pdf,2019,red,12\n"
    )
    (docs / "2021" / "basin.pdf.meta.json").write_text(json.dumps({"team": "green"}))  # its own wins
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        assert index.add([docs], jobs=1).ok
        fields = {row["id"]: row["fields"] for row in index.document_list()}
        assert fields["atlas"]["year"] == 2021 and fields["atlas"]["team"] == "red"
        assert "budget" not in fields["atlas"]  # an empty cell is no field
        assert fields["basin"]["team"] == "green" and fields["basin"]["budget"] == 3.5
        assert {row["id"] for row in index.document_list("year >= 2020")} == {"atlas", "basin"}
        assert [h.doc_id for h in index.search("glacier", where="budget > 10")] == ["cirque"]
    (docs / "pagesight.meta.csv").write_text("file,year\ncirque.pdf,2019\n")
    with Index.open(tmp_path / "ix2", settings={"dense_model": None}) as index:
        report = index.add([docs / "cirque.pdf"], jobs=1)
        assert not report.ok and "pagesight.meta.csv: needs a 'path' column" in report.failed[0][1]
