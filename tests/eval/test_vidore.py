"""ViDoRe V3's published layout (Parquet shards of corpus, queries, qrels and documents_metadata)
imported whole: the questions' fields, answers, gold boxes, transcriptions and documents' metadata;
evaluated with every breakdown (``eval --by``) and on the transcriptions (``--text-from dataset``)."""

import csv
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pagesight.errors import InputError
from pagesight.eval.dataset import Dataset
from pagesight.eval.harness import default_index_dir
from pagesight.index import Index
from tests.conftest import cli
from tests.eval.test_eval import page_image

# corpus id -> what its image shows, its markdown, its document and page in it (from 0)
PAGES = {
    0: ("Lighthouse keeper logbook", "Lighthouse keeper logbook\n\nthe zephyrine ledger", "docA", 0),
    1: ("Glacier melt measurements", "", "docA", 1),
    2: ("Harbour crane inventory", "| Harbour crane | inventory |\n|---|---|", "docB", 0),
    3: ("Tidal power output", "Tidal power output chart", "docB", 1),
}
# query id -> text, language, format, types, content type, answer, raw answers
QUERIES = {
    1: ("glacier melt", "english", "keyword", ["extractive"], ["Text"], "melt", ["melt", "Melt rate"]),
    2: (
        "crane inventory and tidal power",
        "english",
        "question",
        ["compare-contrast", "numerical"],
        ["Table", "Chart"],
        "",
        ["12 cranes"],
    ),  # fmt: skip
    3: ("zephyrine ledger", "english", "instruction", ["extractive"], ["Text"], "the ledger", []),
    4: ("fonte des glaciers", "french", "question", ["extractive"], ["Text"], "fonte", []),
    5: ("inventaire des grues", "french", "keyword", ["numerical"], ["Table"], "12", []),
}
BOX = {"annotator": 0, "x1": 40.0, "x2": 400.0, "y1": 80.0, "y2": 150.0}
# query id, corpus id, score, content types, boxes (one of no area)
QRELS = [
    (1, 1, 2, ["Text"], [BOX, {**BOX, "annotator": 1, "x1": 420.0, "x2": 60.0}]),
    (2, 2, 2, ["Table"], [{**BOX, "x2": 40.0}]),  # a line, no area: dropped
    (2, 3, 1, ["Chart"], []),
    (2, 0, 0, ["N/A (If relevance score=0)"], []),
    (3, 0, 2, ["Text"], [BOX]),
    (4, 1, 2, ["Text"], [BOX]),
    (5, 2, 2, ["Table"], [BOX]),
]


def write_vidore(source: Path, qrels=QRELS) -> Path:
    """A ViDoRe V3 config as the hub stores it: a folder of test shards per table, every column."""

    def shard(name: str, columns: dict) -> None:
        (source / name).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns), source / name / "test-00000-of-00001.parquet")

    shard(
        "corpus",
        {
            "corpus_id": list(PAGES),
            "image": [{"bytes": page_image(shown), "path": None} for shown, *_ in PAGES.values()],
            "doc_id": [doc for *_, doc, _ in PAGES.values()],
            "markdown": [markdown for _, markdown, *_ in PAGES.values()],
            "page_number_in_doc": [page for *_, page in PAGES.values()],
        },
    )
    rows = list(QUERIES.values())
    shard(
        "queries",
        {
            "query_id": list(QUERIES),
            "query": [row[0] for row in rows],
            "language": [row[1] for row in rows],
            "query_types": [row[3] for row in rows],
            "query_format": [row[2] for row in rows],
            "content_type": [row[4] for row in rows],
            "raw_answers": [row[6] for row in rows],
            "query_generator": ["human", "sdg", "human", "human", "sdg"],
            "query_generation_pipeline": ["manual", "v2", "manual", "manual", "v2"],
            "source_type": ["single-page", "multi-page", "single-page", "single-page", "single-page"],
            "query_type_for_generation": ["extractive"] * 5,
            "answer": [row[5] for row in rows],
        },
    )
    shard(
        "qrels",
        {
            "query_id": [row[0] for row in qrels],
            "corpus_id": [row[1] for row in qrels],
            "score": [row[2] for row in qrels],
            "content_type": [row[3] for row in qrels],
            "bounding_boxes": [row[4] for row in qrels],
        },
    )
    shard(
        "documents_metadata",
        {
            "file_name": ["a.pdf", "b.pptx"],
            "doc_id": ["docA", "docB"],
            "url": ["https://example.org/a.pdf", "https://example.org/b.pptx"],
            "doc_type": ["report", "slides"],
            "doc_language": ["english", "french"],
            "doc_year": [2021, 2019],
            "visual_types": [["table", "chart"], []],
            "page_number": [2, 2],
            "license": ["CC-BY", "CC-BY-SA"],
        },
    )
    return source


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.timeout(120)
def test_vidore_v3_is_imported_whole_and_evaluated_by_every_field(tmp_path: Path):
    source = write_vidore(tmp_path / "finance_en")
    every = tmp_path / "every"
    printed = cli("import-dataset", str(source), str(every)).stderr
    assert "queries 5" in printed and "boxes 5" in printed and "degenerate_boxes 1" in printed
    assert sorted(p.name for p in (every / "pages").glob("*.png")) == ["0.png", "1.png", "2.png", "3.png"]

    queries = {row["_id"]: row for row in lines(every / "queries.jsonl")}
    assert queries["2"] == {
        "_id": "2",
        "text": "crane inventory and tidal power",
        "fields": {
            "language": "english",
            "query_types": ["compare-contrast", "numerical"],
            "query_format": "question",
            "content_type": ["Table", "Chart"],
            "query_generator": "sdg",
            "query_generation_pipeline": "v2",
            "source_type": "multi-page",
            "query_type_for_generation": "extractive",
            "modality": ["Table", "Chart"],  # its relevant pages', the irrelevant one's N/A left out
        },
    }
    assert {row["_id"]: row for row in lines(every / "answers.jsonl")} == {
        "1": {"_id": "1", "answer": "melt", "aliases": ["Melt rate"]},
        "2": {"_id": "2", "answer": "12 cranes"},  # no answer: the first raw answer
        "3": {"_id": "3", "answer": "the ledger"},
        "4": {"_id": "4", "answer": "fonte"},
        "5": {"_id": "5", "answer": "12"},
    }
    assert lines(every / "boxes.jsonl")[:2] == [
        {"_id": "1", "corpus_id": "1", "annotator": 0, "box": [40.0, 80.0, 400.0, 150.0]},
        {"_id": "1", "corpus_id": "1", "annotator": 1, "box": [60.0, 80.0, 420.0, 150.0]},
    ]
    assert {row["corpus_id"]: row["text"] for row in lines(every / "texts.jsonl")} == {
        str(k): markdown for k, (_, markdown, *_) in PAGES.items()
    }
    with (every / "pages" / "pagesight.meta.csv").open() as handle:
        fields = {row.pop("path"): row for row in csv.DictReader(handle)}
    assert fields["3.png"] == {
        "file_name": "b.pptx",
        "doc_id": "docB",
        "url": "https://example.org/b.pptx",
        "doc_type": "slides",
        "doc_language": "french",
        "doc_year": "2019",
        "visual_types": "",
        "doc_pages": "2",
        "license": "CC-BY-SA",
        "page_number_in_doc": "1",
    }

    data = Dataset.load(every)
    assert data.boxes["1"] == {"1": {0: [(40.0, 80.0, 400.0, 150.0)], 1: [(60.0, 80.0, 420.0, 150.0)]}}
    assert "2" not in data.boxes and data.boxes["5"] == {"2": {0: [(40.0, 80.0, 400.0, 150.0)]}}
    assert data.texts["1"] == "" and data.references("1") == ["melt", "Melt rate"]
    assert data.groups("language") == {"english": ["1", "2", "3"], "french": ["4", "5"]}
    assert data.groups("query_types")["numerical"] == ["2", "5"]  # a list: under each of its values
    assert data.groups("pages") == {"1": ["1", "3", "4", "5"], "2": ["2"]}

    # one language: the others' questions go, with their judgements, boxes and answers
    english = tmp_path / "english"
    cli("import-dataset", str(source), str(english), "--language", "english")
    data = Dataset.load(english)
    assert sorted(data.queries) == ["1", "2", "3"] and sorted(data.qrels) == ["1", "2", "3"]
    assert sorted(data.boxes) == ["1", "3"] and sorted(data.answers) == ["1", "2", "3"]
    refused = cli("import-dataset", str(source), str(tmp_path / "de"), "--language", "german", check=False)
    assert (
        refused.returncode == 2 and "no question in german (the languages: english, french)" in refused.stderr
    )
    assert not (tmp_path / "de").exists() and not list(tmp_path.glob(".de.*"))  # nothing left behind

    index, report = tmp_path / "ix", tmp_path / "report"
    by = ["--by", "query_format,language,modality", "--by", "pages", "--by", "query_types"]
    printed = cli(
        "eval", str(english), "--index", str(index), "-m", "lexical", "--answers", *by, "--report", str(report)
    ).stdout  # fmt: skip
    assert "lexical by modality" in printed and "lexical by query_types" in printed
    summary = json.loads((report / "summary.json").read_text())
    found = summary["breakdowns"]
    assert list(found) == ["query_format", "language", "modality", "pages", "query_types"]
    assert sorted(found["query_format"]) == ["instruction", "keyword", "question"]
    assert sorted(found["modality"]) == ["Chart", "Table", "Text"] and list(found["pages"]) == ["1", "2"]
    text = found["modality"]["Text"]  # questions 1 and 3
    assert text["n_queries"] == 2 and text["n_answers"] == 2
    assert {"recall@1", "recall@5", "ndcg@10"} <= text["configs"]["lexical"].keys()
    assert "relaxed_accuracy" in next(iter(text["answers"].values()))
    # glacier melt (OCR finds it) at 1, zephyrine (in no pixel) nowhere
    assert text["configs"]["lexical"]["recall@1"] == 0.5
    assert found["language"]["english"]["configs"]["lexical"]["ndcg@10"] == summary["results"][0]["ndcg@10"]
    assert "## By modality" in (report / "report.md").read_text()
    assert "<h2>Answers by query_types</h2>" in (report / "report.html").read_text()

    refused = cli("eval", str(english), "--index", str(index), "-m", "lexical", "--by", "colour", check=False)
    assert refused.returncode == 2 and "no field 'colour'" in refused.stderr
    assert "content_type, language, modality, pages, query_format" in refused.stderr

    # the documents' metadata are the pages' fields for where filters
    with Index.open(index) as opened:
        slides = opened.search("crane inventory tidal", mode="lexical", where="doc_type = slides")
        assert {hit.doc_id for hit in slides} == {"2", "3"}
        later = opened.search(
            "glacier crane tidal", mode="lexical", where="doc_year >= 2020 and page_number_in_doc = 1"
        )
        assert {hit.doc_id for hit in later} == {"1"}


@pytest.mark.timeout(120)
def test_the_dataset_transcriptions_are_indexed_instead_of_the_pages_text(tmp_path: Path):
    source = write_vidore(tmp_path / "source")
    english = tmp_path / "english"
    cli("import-dataset", str(source), str(english), "--language", "english")
    data = Dataset.load(english)
    cached = default_index_dir(data, "dataset")
    assert cached != default_index_dir(data) and cached == default_index_dir(data, "dataset")
    pages, texts = tmp_path / "pages-ix", tmp_path / "texts-ix"
    read = json.loads(
        cli(
            "eval", str(english), "--index", str(pages), "-m", "lexical", "--by", "query_format", "--json"
        ).stdout
    )
    given = json.loads(
        cli(
            "eval", str(english), "--index", str(texts), "-m", "lexical", "--text-from", "dataset",
            "--by", "query_format", "--json",
        ).stdout
    )  # fmt: skip
    # "zephyrine ledger" (the instruction) is in page 0's transcription only; "glacier melt" (the
    # keyword) on page 1's pixels only, whose transcription is empty
    assert read["breakdowns"]["query_format"]["instruction"]["configs"]["lexical"]["recall@1"] == 0.0
    assert given["breakdowns"]["query_format"]["instruction"]["configs"]["lexical"]["recall@1"] == 1.0
    assert read["breakdowns"]["query_format"]["keyword"]["configs"]["lexical"]["recall@1"] == 1.0
    assert given["breakdowns"]["query_format"]["keyword"]["configs"]["lexical"]["recall@1"] == 0.0
    with Index.open(texts) as opened:
        (hit,) = opened.search("zephyrine", mode="lexical")
        assert hit.doc_id == "0" and hit.boxes[0][2] - hit.boxes[0][0] == hit.page_size[0]  # a band

    # an index read from the pages is not silently evaluated as one of transcriptions, nor the reverse
    for index, other in ((pages, "dataset"), (texts, "documents")):
        refused = cli(
            "eval", str(english), "--index", str(index), "-m", "lexical", "--text-from", other, check=False
        )
        assert refused.returncode == 2 and "took their text from" in refused.stderr
    with (english / "texts.jsonl").open("a") as texts:  # other transcriptions: another index
        texts.write('{"corpus_id": "9", "text": "more"}\n')
    assert default_index_dir(Dataset.load(english), "dataset") != cached
    (english / "texts.jsonl").unlink()
    refused = cli("eval", str(english), "-i", str(tmp_path / "new"), "--text-from", "dataset", check=False)
    assert refused.returncode == 2 and "no texts.jsonl" in refused.stderr


def test_bad_boxes_and_transcriptions_are_refused_by_file_and_line(tmp_path: Path):
    source = write_vidore(tmp_path / "source")
    root = tmp_path / "dataset"
    cli("import-dataset", str(source), str(root), "--language", "english")
    boxes = (root / "boxes.jsonl").read_text()
    good = '{"_id": "3", "corpus_id": "0", "annotator": 0, "box": [1, 2, 3, 4]}\n'
    for line, message in (
        ('{"_id": "3", "corpus_id": "0", "annotator": 0, "box": [5, 2, 3, 4]}', "x0 < x1"),
        ('{"_id": "3", "corpus_id": "0", "annotator": "a", "box": [1, 2, 3, 4]}', "a whole number"),
        ('{"_id": "3", "corpus_id": "0", "annotator": 0, "box": [1, 2, 3]}', r"\[x0, y0, x1, y1\]"),
        (
            '{"_id": "3", "corpus_id": "2", "annotator": 0, "box": [1, 2, 3, 4]}',
            "judges no corpus id 2 for query 3",
        ),
        ('{"_id": "3", "corpus_id": "0", "annotator": 0, "box": [1, 2, 3, 4]', "not JSON"),
    ):
        (root / "boxes.jsonl").write_text(boxes + good + line + "\n")
        with pytest.raises(InputError, match=rf"boxes.jsonl:{len(boxes.splitlines()) + 2}: .*{message}"):
            Dataset.load(root)
    (root / "boxes.jsonl").write_text(boxes)
    (root / "texts.jsonl").write_text('{"corpus_id": "0", "text": "a"}\n{"corpus_id": "1", "text": null}\n')
    with pytest.raises(InputError, match=r"texts.jsonl:2: needs"):
        Dataset.load(root)
    (root / "texts.jsonl").unlink()
    (root / "queries.jsonl").write_text('{"_id": "1", "text": "a", "fields": {"pages": "3"}}\n')
    with pytest.raises(InputError, match="query 1: the field 'pages' is the number of relevant pages"):
        Dataset.load(root)
    (root / "queries.jsonl").write_text('{"_id": "1", "text": "a", "fields": {"tags": [1]}}\n')
    with pytest.raises(InputError, match="query 1: fields must be an object of names to strings"):
        Dataset.load(root)

    # a malformed box in the source stops the import, naming its row, and leaves nothing behind
    shutil.rmtree(source)
    write_vidore(source, [*QRELS, (3, 0, 1, ["Text"], [{"annotator": 0, "x1": 1.0}])])
    refused = cli("import-dataset", str(source), str(tmp_path / "out"), check=False)
    assert refused.returncode == 2 and "qrels: query 3, corpus id 0: a bounding box needs" in refused.stderr
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))
