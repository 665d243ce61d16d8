"""The extractive reader on questions with known answers and known answer regions."""

from pathlib import Path

import pytest

from pagesight import Index
from pagesight.answer.context import build_context
from pagesight.answer.extractive import ExtractiveReader
from pagesight.eval.answers import contains, relaxed_accuracy
from pagesight.eval.synthetic import generate, iou, union
from tests.conftest import make_pdf


@pytest.fixture(scope="module")
def register(tmp_path_factory):
    """Three typeset documents (6 pages, 90 questions) and their index."""
    root = tmp_path_factory.mktemp("register")
    questions = generate(root / "docs", n_documents=3)
    index = Index.open(root / "index")
    assert index.add([root / "docs"]).ok
    return index, questions


def test_answers_and_boxes_on_typeset_pages(register):
    index, questions = register
    reader = ExtractiveReader()
    contained = grounded = snippet = 0
    for q in questions:
        answer = index.ask(q.question, reader, k=5)
        contained += right(answer.text, q.answer)
        snippet += right(answer.hits[0].snippet, q.answer)
        boxes = [box for c in answer.citations if c.page_id == q.page_id for box in c.boxes]
        grounded += bool(boxes) and iou(union(boxes), q.region) > 0.5
    n = len(questions)
    assert n == 90
    assert contained / n >= 0.8
    assert grounded / n >= 0.8
    assert contained > snippet + n // 4  # much better than returning the top hit's snippet


def right(said: str, answer: str) -> bool:
    """eval's right answer: the reference contained, or a figure within 5 % of it."""
    return max(contains(said, [answer]), relaxed_accuracy(said, [answer])) == 1


def test_answers_on_the_sample_corpus(sample_index: Index, questions: list[dict]):
    found = 0
    for q in questions:
        answer = sample_index.ask(q["question"], k=5)
        found += right(answer.text, q["answer"])
        assert answer.citations and all(c.boxes for c in answer.citations)
    assert found / len(questions) >= 0.8


def test_table_cell_under_the_column_asked_about(sample_index: Index):
    answer = sample_index.ask("What was the West region's revenue in Q3?", k=3)
    assert answer.text == "4,870 thousand"  # the cell as printed, in its table's unit
    (citation,) = answer.citations
    assert citation.page_id == "quarterly-report_1"
    assert "West" in citation.text and "Q3" in citation.text  # the row, read with its header


def test_sentence_boxes_lie_on_the_lines_they_quote(sample_index: Index):
    question = "How large are the tiles that tall pages are cut into?"
    answer = sample_index.ask(question, k=3)
    assert right(answer.text, "1024 pixels")
    context = build_context(sample_index, sample_index.search(question, k=3))
    (sentence,) = [
        c
        for c in ExtractiveReader().offer(question, context).candidates
        if c.kind == "sentence" and "1024 pixels" in c.text
    ]
    ((item, boxes),) = sentence.cited.items()
    hit = context[item].hit
    page = sample_index.catalog.tile_at(hit.doc_id, hit.page, hit.tile)
    lines = [tuple(span[1]) for span in page.spans]
    assert len(boxes) == 2  # the sentence runs over two lines
    for box in boxes:
        line = next(line for line in lines if line[1] == box[1] and line[3] == box[3])
        assert line[0] <= box[0] < box[2] <= line[2] + 1e-6
    # the first part starts mid-line, after the previous sentence
    first = next(line for line in lines if line[1] == boxes[0][1])
    assert boxes[0][0] > first[0] + 0.3 * (first[2] - first[0])


def test_no_text_no_answer(tmp_path: Path):
    from PIL import Image

    blank = tmp_path / "blank.png"
    Image.new("RGB", (400, 300), "white").save(blank)
    index = Index.open(tmp_path / "ix")
    index.add([blank], ocr="never")
    answer = index.ask("What is on this page?", k=3)
    assert answer.text == "" and answer.citations == []


@pytest.mark.timeout(120)
def test_a_passage_that_starts_inside_a_sentence_opens_with_an_ellipsis(tmp_path: Path):
    """A page that begins inside a sentence (the one before it ends on the previous page): the
    reader offers it with an ellipsis in front, and the answer read from it cites where the
    quoted words stand."""
    continued = "documents, reaching up to 71.1% overlap at a pool depth of 100."
    make_pdf(
        tmp_path / "pooling.pdf",
        [["Pooling depth", "The runs overlap on many"], [continued, "Assessors judged every pool."]],
    )
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add([tmp_path / "pooling.pdf"]).ok
    question = "What percentage overlap was reached at a pool depth of 100?"
    context = build_context(index, index.search(question, k=5), 1.0)
    offered = [c.text for c in ExtractiveReader().offer(question, context).candidates if c.kind == "sentence"]
    assert f"… {continued}" in offered and continued not in offered
    answer = index.ask(question, min_support=0.0)
    assert "71.1%" in answer.text
    (citation,) = answer.citations
    assert citation.page == 2 and citation.text == continued
    row = next(span for span in index.catalog.tile_at(citation.doc_id, 2, 0).spans if span[0] == continued)
    assert [tuple(box) for box in citation.boxes] == [tuple(row[1])]
    whole = index.ask("What do assessors judge?", min_support=0.0)
    assert whole.text == "Assessors judged every pool."  # a sentence read whole has none
