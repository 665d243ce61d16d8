"""``pagesight fit-reader`` (``eval/reader.py``): the extractive reader's question, row, column,
scorer and support models fitted on a TAT-QA-shaped dataset of invented statements, measured by
folds of documents, and the fitted reader answering a statement it never saw."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.answer.context import build_context
from pagesight.answer.extractive import ExtractiveReader
from pagesight.eval.importers import import_dataset
from pagesight.eval.reader import operand_values, operation_of
from pagesight.records import Hit
from tests.conftest import cli

ITEMS = ["Ferry tickets", "Mooring fees", "Cargo handling", "Pilot services", "Storage rent", "Crane hire"]
OWNERS = ["Brenvik", "Sollund", "Haravik", "Osterby", "Kalmvik", "Nordholm", "Tjelde", "Vasshamn"]


def _context(rng: random.Random, owner: str) -> dict:
    """An invented statement of two years with questions a reader answers from its cells: a
    lookup, a change, a percent change and an average, each with TAT-QA's fields."""
    items = rng.sample(ITEMS, 4)
    values = {item: (rng.randint(200, 900), rng.randint(200, 900)) for item in items}
    rows = [["", "2031", "2030"], *[[item, f"{a:,}", f"{b:,}"] for item, (a, b) in values.items()]]
    lookup, change, percent, average = items
    a, b = values[change]
    c, d = values[percent]
    e, f = values[average]
    uid = f"{owner.lower()}-statement"
    questions = [
        ("lookup", f"What was {lookup.lower()} in 2031?", [f"{values[lookup][0]:,}"], "span", ""),
        (
            "change",
            f"What was the change in {change.lower()} from 2030 to 2031?",
            a - b,
            "arithmetic",
            f"{a}-{b}",
        ),
        (
            "percent",
            f"What was the percentage change in {percent.lower()} between 2030 and 2031?",
            round(100 * (c - d) / d, 2),
            "arithmetic",
            f"({c}-{d})/{d}",
        ),
        (
            "average",
            f"What was the average {average.lower()} for 2030 and 2031?",
            (e + f) / 2,
            "arithmetic",
            f"({e}+{f})/2",
        ),
    ]
    return {
        "table": {"uid": uid, "table": rows},
        "paragraphs": [
            {
                "uid": f"{uid}-p",
                "order": 1,
                "text": f"Revenue of the {owner} Harbour Trust by source (in thousands):",
            }
        ],
        "questions": [
            {
                "uid": f"{uid}-{kind}",
                "question": text,
                "answer": answer,
                "answer_type": answer_type,
                "answer_from": "table",
                "scale": "percent" if kind == "percent" else "thousand",
                "derivation": derivation,
            }
            for kind, text, answer, answer_type, derivation in questions
        ],
    }


@pytest.fixture(scope="module")
def statements(tmp_path_factory) -> tuple[Path, Path]:
    rng = random.Random(61)
    folder = tmp_path_factory.mktemp("fit")
    source = folder / "statements.json"
    source.write_text(json.dumps([_context(rng, owner) for owner in OWNERS]))
    dataset = folder / "statements"
    import_dataset(source, dataset)
    index = folder / "index"
    with Index.open(index, settings={"dense_model": None}) as opened:
        assert opened.add(dataset / "pdfs").ok
    return dataset, index


def test_derivations_name_operations_and_operands():
    fields = {"answer_type": "arithmetic", "derivation": "(1,496.5-1,202.9)/1,202.9", "scale": "percent"}
    assert operation_of(fields, "24.41") == "percent_change"
    assert operand_values(fields, "24.41") == [1496.5, 1202.9, 1202.9]
    assert operation_of({"answer_type": "arithmetic", "derivation": "(3+4+5)/3"}, "4") == "average"
    assert operation_of({"answer_type": "multi-span"}, ["2031", "2030"]) == "years"
    assert operation_of({"answer_type": "span", "derivation": "7>5>2"}, ["2031"]) == "largest"
    assert operation_of({"answer_type": "arithmetic", "derivation": "2**8"}, "256") is None


@pytest.mark.timeout(240)
def test_fit_reader_fits_on_data_and_answers_a_statement_it_never_saw(statements, tmp_path):
    dataset, index = statements
    out = tmp_path / "reader.json"
    shown = cli(
        "fit-reader", str(dataset), "--index", str(index), "--out", str(out), "--context", "oracle",
        "--folds", "4", "--json",
    )  # fmt: skip
    held_out = json.loads(shown.stdout)["held_out"]["statements/oracle"]
    assert held_out["questions"] == 4 * len(OWNERS)
    assert held_out["right"] >= 0.75 * held_out["questions"]  # by folds of documents
    model = json.loads(out.read_text())
    assert {"question", "row", "column", "scorer", "about"} <= set(model)
    assert set(model["question"]["operation"]["classes"]) == {"span", "change", "percent_change", "average"}

    # a statement of a harbour none of the fit's documents is about
    rng = random.Random(7)
    unseen = _context(rng, "Ytterholm")
    folder = tmp_path / "unseen"
    unseen["questions"] = unseen["questions"][1:2]
    source = tmp_path / "unseen.json"
    source.write_text(json.dumps([unseen]))
    import_dataset(source, folder)
    with Index.open(tmp_path / "unseen-index", settings={"dense_model": None}) as opened:
        assert opened.add(folder / "pdfs").ok
        rows = opened.catalog.page_tiles(unseen["table"]["uid"], 1)
        hits = [Hit(row.doc_id, 1, row.idx, 1.0, {}, "", [], row.page_size, row.box) for row in rows]
        context = build_context(opened, hits)
    (asked,) = unseen["questions"]
    reading = ExtractiveReader(fitted=model).read(asked["question"], context)  # as fit-reader read
    assert reading.text.replace(",", "").split()[0] == f"{asked['answer']:.2f}"
    assert reading.cited and len(next(iter(reading.cited.values()))) == 1  # the row of the two cells
    assert next(iter(reading.quotes.values())).count(";") == 1  # each cell quoted


@pytest.mark.timeout(60)
def test_the_synthetic_register_asks_its_questions_of_companies_no_page_names(tmp_path):
    """The register as a dataset: each question again about a company none of its documents
    names, asked of the same document (the support model's negatives with the answerable ones'
    wording); the answerable ones stay answerable."""
    import pypdfium2 as pdfium

    from pagesight.eval.dataset import Dataset
    from pagesight.eval.synthetic import STEMS, SUFFIXES, register

    data = Dataset.load(register(tmp_path / "register", n_documents=2))
    text = " ".join(
        page.get_textpage().get_text_range().replace("\n", " ").replace("\r", " ")
        for pdf in (tmp_path / "register" / "pdfs").glob("*.pdf")
        for page in pdfium.PdfDocument(str(pdf))
    )
    text = " ".join(text.split())
    assert len(data.unanswerable) == len(data.queries) == 60
    names = [f"{stem} {suffix}" for stem in STEMS for suffix in SUFFIXES]
    for (qid, question), row in zip(data.queries.items(), data.unanswerable.values()):
        (name,) = [name for name in names if name in question]
        (other,) = [name for name in names if name in row["text"]]
        assert row["text"] == question.replace(name, other) and name in text
        assert other not in text  # a company no page names
        assert row["doc_ids"] == [data.qrels[qid].popitem()[0].rsplit("_", 1)[0]]  # of its document


@pytest.mark.timeout(30)
def test_the_scorer_learns_to_prefer_an_answer_that_states_the_reference_whole(tmp_path):
    """A figure right by relaxed accuracy ("1,536" for "1,536 bytes") is no answer the scorer is
    taught to prefer where a candidate states the reference whole; alone, it is."""
    import numpy as np

    from pagesight.eval.dataset import Dataset
    from pagesight.eval.derivations import right_answers, whole

    (tmp_path / "pdfs").mkdir()
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "How many bytes does it take?"}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tvectors_1\t1\n")
    (tmp_path / "answers.jsonl").write_text('{"_id": "q1", "answer": "1,536 bytes"}\n')
    data = Dataset.load(tmp_path)
    texts = ["1,536", "1,536 bytes", "384 floats", "It takes 1,536 bytes."]
    right = right_answers(data, "q1", texts)
    assert right.tolist() == [True, True, False, True]
    assert whole(data, "q1", texts, right).tolist() == [False, True, False, True]
    assert whole(data, "q1", texts[:1], right[:1]).tolist() == [True]
    assert not whole(data, "q1", texts[2:3], np.zeros(1, dtype=bool)).any()


@pytest.mark.timeout(60)
def test_a_set_too_small_for_a_quantile_does_not_set_the_support_threshold_alone():
    """The threshold keeps at least 1 - LOSE of each large set's right answers; a set of five,
    whose least supported answer would stand for its 3.5 % quantile, counts pooled with the other
    small sets, so its one odd answer does not lower the threshold for all."""
    import random

    from pagesight.answer.extractive.confidence import SUPPORT, probability
    from pagesight.eval.reader import LOSE, fit_support

    rng = random.Random(5)

    def row(score: float, right: bool, answerable: bool, name: str):
        found = {feature: rng.random() for feature in SUPPORT} | {"score": score + rng.gauss(0, 0.3)}
        return found, right, answerable, name

    rows = [row(2.0, True, True, "large") for _ in range(200)]
    rows += [row(0.0, False, False, "large") for _ in range(100)]
    rows += [row(2.0, True, True, "small") for _ in range(4)] + [row(-3.0, True, True, "small")]
    model = fit_support(rows, LOSE)
    large = sorted(probability(found, model) for found, right, _, name in rows if right and name == "large")
    odd = probability(rows[-1][0], model)
    assert odd < model["threshold"] <= large[int(LOSE * len(large))]
    declined = sum(probability(found, model) < model["threshold"] for found, *_ in rows[200:300])
    assert declined > 50  # the unanswerable ones still declined
