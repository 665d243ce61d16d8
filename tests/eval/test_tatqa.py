"""TAT-QA's metric on invented answers, and a TAT-QA-shaped file imported, ingested and scored."""

from __future__ import annotations

import json
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from pagesight.answer.base import Reading
from pagesight.errors import InputError
from pagesight.eval import tatqa
from pagesight.eval.dataset import Dataset
from pagesight.eval.grid import AnswerGrid
from pagesight.eval.importers import import_dataset
from pagesight.eval.runner import SearchGrid, evaluate_dataset
from tests.conftest import cli


@pytest.mark.parametrize(
    ("prediction", "answer", "scale", "kind", "expected"),
    [
        # numbers are compared as numbers once the scale is applied, the prediction's own words
        # giving its scale
        ("4.5 million", "4.5", "million", "arithmetic", (1.0, 1.0)),
        ("$4,500 thousand", "4.5", "million", "arithmetic", (1.0, 1.0)),
        ("4.5", "4.5", "million", "arithmetic", (0.0, 0.0)),
        ("4.6 million", "4.5", "million", "arithmetic", (0.0, 0.0)),  # F1 is EM for figures
        ("12.5%", "12.5", "percent", "arithmetic", (1.0, 1.0)),
        ("12.5", "12.5", "percent", "arithmetic", (0.0, 0.0)),
        ("0.125", "12.5", "percent", "arithmetic", (1.0, 1.0)),  # a bare number read as it stands
        ("(3.2)", "-3.2", "", "arithmetic", (1.0, 1.0)),  # brackets: negative
        ("-3.20", "-3.2", "", "arithmetic", (1.0, 1.0)),
        ("3", "3", "", "count", (1.0, 1.0)),
        ("three", "3", "", "count", (0.0, 0.0)),
        ("$17,204", "$17,204", "thousand", "span", (0.0, 0.0)),  # the scale left out
        ("$17,204 thousand", "$17,204", "thousand", "span", (1.0, 1.0)),
        # words: punctuation, case and articles aside; F1 on the sets of words
        ("The harbour expansion.", "harbour expansion", "", "span", (1.0, 1.0)),
        ("costs of the new harbour", "new harbour costs", "", "span", (0.0, 0.86)),
        ("two thousand", "two", "thousand", "span", (1.0, 1.0)),  # a word's scale is a word
        # multi-span: a set of spans (lines or semicolons), scored as one bag of words
        ("Oslo\nBergen", ["Bergen", "Oslo"], "", "multi-span", (1.0, 1.0)),
        ("Bergen; Oslo", ["Bergen", "Oslo"], "", "multi-span", (1.0, 1.0)),
        ("Oslo and Bergen", ["Bergen", "Oslo"], "", "multi-span", (0.0, 0.8)),
        ("Oslo", ["Bergen", "Oslo"], "", "multi-span", (0.0, 0.67)),
        ("1,200 thousand\n900 thousand", ["900", "1,200"], "thousand", "multi-span", (1.0, 1.0)),
        ("1,200\n900", ["900", "1,200"], "thousand", "multi-span", (0.0, 0.0)),
        ("1,200\n900", ["900", "1,200"], "", "multi-span", (1.0, 1.0)),
        ("1,200 900", ["900", "1,200"], "", "multi-span", (0.0, 0.0)),  # one span: not a number
        ("", "4.5", "million", "arithmetic", (0.0, 0.0)),
    ],
)
def test_tatqa_exact_match_and_f1(prediction, answer, scale, kind, expected):
    assert tatqa.em_f1(prediction, answer, scale, kind) == expected


def test_declined_answers_score_nothing():
    row = {"answer": "4.5", "scale": "million", "answer_type": "arithmetic"}
    assert tatqa.scores("4.5 million", row) == {"tatqa_em": 1.0, "tatqa_f1": 1.0}
    assert tatqa.scores("4.5 million", row, answered=False) == {"tatqa_em": 0.0, "tatqa_f1": 0.0}


def test_numbers_read_as_the_authors_read_them():
    assert tatqa.to_number("$1,234.5") == 1234.5
    assert tatqa.to_number("2.5 billion") == 2_500_000_000
    assert tatqa.to_number("(12)") == -12
    assert tatqa.to_number("(1,200)") == 1200  # a bracket with a comma is not read as negative
    assert tatqa.to_number("7.5%") == 0.075
    assert tatqa.to_number(".5") is None and tatqa.to_number("none") is None
    assert tatqa.is_number("1,234 million") and not tatqa.is_number("1,234 units")
    assert tatqa.normalize("The Net  Sales, 1,234") == "net sales 1234"


def question(uid, text, answer, kind, source, scale="", derivation=""):
    return {
        "uid": uid,
        "question": text,
        "answer": answer,
        "answer_type": kind,
        "answer_from": source,
        "scale": scale,
        "derivation": derivation,
    }


# two contexts shaped as TAT-QA's, with invented names and figures
CONTEXTS = [
    {
        "table": {
            "uid": "harbour-2023",
            "table": [
                ["", "2023", "2022"],
                ["", "", "(in thousands)"],
                ["Dock fees", "$1,250", "$1,100"],
                ["Pilotage", "310", "(45)"],
                ["Total revenue", "$1,560", "$1,055"],
            ],
        },
        "paragraphs": [
            {"uid": "p1", "order": 1, "text": "Harbour operations"},
            {"uid": "p2", "order": 3, "text": "Dock fees rose as the new quay at Brenvik opened in March."},
            {"uid": "p3", "order": 2, "text": "Revenue of the Nordvik Harbour Authority by source:"},
        ],
        "questions": [
            question("h1", "What was the total revenue in 2023?", ["$1,560"], "span", "table", "thousand"),
            question(
                "h2", "How much did dock fees grow?", 150, "arithmetic", "table", "thousand", "1,250-1,100"
            ),
            question("h3", "Which sources are listed?", ["Dock fees", "Pilotage"], "multi-span", "table"),
        ],
    },
    {
        "table": {
            "uid": "orchard-2024",
            "table": [
                ["", "Year ended June 30,", ""],
                ["", "2024", "2023"],
                ["Apples sold (tonnes)", "820", "760"],
                ["Pears sold (tonnes)", "140", "150"],
            ],
        },
        "paragraphs": [
            {
                "uid": "p4",
                "order": 1,
                "text": "The Lindholm orchards harvested early in 2024 because of a warm spring.",
            }
        ],
        "questions": [
            question("o1", "Why was the harvest early?", ["because of a warm spring"], "span", "text"),
            question(
                "o2", "How did pear sales change?", -6.67, "arithmetic", "table", "percent", "(140-150)/150"
            ),
            question("o3", "How many fruits does the table list?", "2", "count", "table"),
        ],
    },
]
# each question's answer, given only when its evidence is among the lines the reader is shown
SCRIPT = {
    "h1": ("$1,560", "$1,560 thousand"),  # right
    "h2": ("$1,100", "150"),  # the scale left out: wrong
    "h3": ("Pilotage", "Dock fees and pilotage"),  # one span: F1 0.86
    "o1": ("warm spring", "Because of a warm spring."),  # right
    "o2": ("Pears sold", "-6.67%"),  # right
    "o3": ("Apples sold", "2"),  # right
}


class ScriptedReader:
    """Answers each question as ``SCRIPT`` says when its evidence is on the pages given, else
    nothing: a reader whose every answer is known, so that the scores are."""

    name, inputs, max_images = "scripted", "text", None

    def __init__(self):
        self.documents = {}

    def read(self, question, context) -> Reading:
        qid = next(qid for qid, q in QUESTIONS.items() if q["question"] == question)
        self.documents[qid] = {item.hit.doc_id for item in context}
        evidence, answer = SCRIPT[qid]
        shown = " ".join(span.text for item in context for span in item.spans)
        return Reading(answer if evidence in shown else "")


QUESTIONS = {q["uid"]: q for context in CONTEXTS for q in context["questions"]}


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "tatqa_dataset_dev.json"
    path.write_text(json.dumps(CONTEXTS))
    return path


def test_tatqa_imports_as_pages_and_scores_with_its_own_metric(source, tmp_path):
    out = tmp_path / "tatqa"
    cli("import-dataset", str(source), str(out))
    data = Dataset.load(out)
    assert data.answer_metric == "tatqa" and data.report_by == ("answer_type", "answer_from")
    assert data.qrels["h1"] == {"harbour-2023_1": 1} and data.qrels["o3"] == {"orchard-2024_1": 1}
    assert data.answers["h3"]["answer"] == ["Dock fees", "Pilotage"]
    assert data.answers["o3"]["answer"] == "2" and data.answers["h2"]["answer"] == "150"
    assert data.fields["h2"] == {
        "answer_type": "arithmetic", "answer_from": "table", "scale": "thousand", "derivation": "1,250-1,100"
    }  # fmt: skip
    assert data.fields["h3"]["scale"] == "none"
    with pdfium.PdfDocument(out / "pdfs" / "harbour-2023.pdf") as pdf:
        text = pdf[0].get_textpage().get_text_range()
    # the unit on a line of its own, the headings over the figures, the table after the paragraph
    # that introduces it
    assert "(in thousands)" in text and "$1,560" in text
    assert (
        text.index("Harbour operations")
        < text.index("by source:")
        < text.index("Dock fees")
        < text.index("Brenvik")
    )

    reader = ScriptedReader()
    evaluation = evaluate_dataset(
        out,
        index=tmp_path / "index",
        searches=SearchGrid(modes=("lexical",)),
        reader=reader,
        grid=AnswerGrid(contexts=("oracle",), ks=(5,)),
        report=tmp_path / "report",
    )
    documents = {"h": "harbour-2023", "o": "orchard-2024"}  # oracle: each its own context's page
    assert reader.documents == {qid: {documents[qid[0]]} for qid in SCRIPT}
    summary = evaluation.answers.summary()
    assert summary["tatqa_em"] == pytest.approx(4 / 6) and summary["tatqa_f1"] == pytest.approx(4.86 / 6)
    assert summary["decomposition"]["gold_right"] == 4  # right: TAT-QA's exact match
    saved = json.loads((tmp_path / "report" / "summary.json").read_text())
    by_type = {
        value: entry["answers"]["oracle k=5"] for value, entry in saved["breakdowns"]["answer_type"].items()
    }
    assert {value: (means["tatqa_em"], means["tatqa_f1"]) for value, means in by_type.items()} == {
        "arithmetic": (0.5, 0.5), "count": (1.0, 1.0), "multi-span": (0.0, 0.86), "span": (1.0, 1.0)
    }  # fmt: skip
    by_source = saved["breakdowns"]["answer_from"]
    assert by_source["text"]["answers"]["oracle k=5"]["tatqa_em"] == 1.0
    assert by_source["table"]["answers"]["oracle k=5"]["tatqa_em"] == pytest.approx(3 / 5)
    assert "tatqa_em" in (tmp_path / "report" / "report.md").read_text()


def test_tatqa_pages_are_the_seeds(source, tmp_path):
    """The same seed sets the same PDFs; another sets other looks."""
    for name, seed in (("a", 0), ("b", 0), ("c", 7)):
        import_dataset(source, tmp_path / name, seed=seed)
    read = {name: (tmp_path / name / "pdfs" / "orchard-2024.pdf").read_bytes() for name in "abc"}
    assert read["a"] == read["b"] != read["c"]


def test_a_file_that_is_not_tatqa_is_refused_by_name(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"data": []}))
    with pytest.raises(InputError, match="other.json: expected TAT-QA's list of contexts"):
        import_dataset(path, tmp_path / "out")
    path.write_text(
        json.dumps([{"table": {"uid": "t", "table": [[1, 2]]}, "paragraphs": [], "questions": []}])
    )
    with pytest.raises(InputError, match="context 0 is not TAT-QA's"):
        import_dataset(path, tmp_path / "out")
    counted = {**CONTEXTS[1], "questions": [question("c1", "How many?", "two", "count", "table")]}
    path.write_text(json.dumps([counted]))
    with pytest.raises(InputError, match=r"other.json: question c1: .* \(a count a whole number\)"):
        import_dataset(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_dataset_declares_only_metrics_and_fields_eval_knows(source, tmp_path):
    import_dataset(source, tmp_path / "tatqa")
    declaration = tmp_path / "tatqa" / "dataset.json"
    declaration.write_text(json.dumps({"answer_metric": "bleu"}))
    with pytest.raises(
        InputError, match="dataset.json: expected an object whose answer_metric is one of tatqa"
    ):
        Dataset.load(tmp_path / "tatqa")
    declaration.write_text(json.dumps({"answer_metric": "tatqa", "by": ["answer_kind"]}))
    with pytest.raises(InputError, match="no field 'answer_kind'"):
        Dataset.load(tmp_path / "tatqa")
