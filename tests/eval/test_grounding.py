"""Grounding scores (``eval/grounding.py``): cited boxes against annotators' zones, in pixels."""

from __future__ import annotations

import numpy as np
import pytest

from pagesight.eval.grounding import areas, score, to_gold


def _mask_areas(cited, gold, size=40):
    """The same areas counted pixel by pixel (integer boxes on a small page)."""

    def mask(boxes):
        found = np.zeros((size, size), dtype=bool)
        for x0, y0, x1, y1 in boxes:
            found[y0:y1, x0:x1] = True
        return found

    mine, theirs = mask(cited), mask(gold)
    return float(mine.sum()), float(theirs.sum()), float((mine & theirs).sum())


@pytest.mark.timeout(30)
def test_union_areas_equal_counting_pixels():
    rng = np.random.default_rng(7)
    for _ in range(200):
        boxes = []
        for _ in range(rng.integers(0, 5) + rng.integers(0, 5)):
            x0, y0 = rng.integers(0, 35, size=2)
            boxes.append((int(x0), int(y0), int(x0 + rng.integers(1, 6)), int(y0 + rng.integers(1, 6))))
        split = int(rng.integers(0, len(boxes) + 1))
        assert areas(boxes[:split], boxes[split:]) == _mask_areas(boxes[:split], boxes[split:])


@pytest.mark.timeout(30)
def test_scores_overlap_by_pixels_and_keep_the_best_annotator():
    page = {"report_1": {0: [(5, 0, 15, 10)]}}
    half = score({"report_1": [(0, 0, 10, 10)]}, page)
    assert half["grounding_precision"] == half["grounding_recall"] == half["grounding_f1"] == 0.5
    assert half["grounding_iou"] == pytest.approx(1 / 3) and half["grounding_page_f1"] == 1.0
    # a region cited twice counts once
    again = score({"report_1": [(5, 0, 15, 10), (5, 0, 15, 10), (8, 2, 12, 8)]}, page)
    assert again["grounding_f1"] == again["grounding_iou"] == 1.0
    # two annotators: the question keeps the one it matches
    two = {"report_1": {0: [(100, 100, 120, 120)], 1: [(0, 0, 10, 10)]}}
    assert score({"report_1": [(0, 0, 10, 10)]}, two)["grounding_f1"] == 1.0
    # pages are summed: the right page and a wrong one
    pages = score({"report_1": [(5, 0, 15, 10)], "report_2": [(0, 0, 10, 10)]}, page)
    assert pages["grounding_recall"] == 1.0 and pages["grounding_precision"] == 0.5
    assert pages["grounding_page_f1"] == pytest.approx(2 / 3)
    nothing = score({}, page)
    assert nothing["grounding_f1"] == nothing["grounding_iou"] == nothing["grounding_page_f1"] == 0.0
    assert score({"report_1": [(0, 0, 10, 10)]}, {}) is None  # no gold: not scored
    assert to_gold((150.0, 300.0, 300.0, 450.0), 72 / 150) == (72.0, 144.0, 144.0, 216.0)


@pytest.mark.timeout(180)
def test_eval_scores_the_extractive_readers_boxes_against_the_lines_the_generator_drew(tmp_path):
    """Gold boxes from where ``make_pdf`` draws each answer's line (PDF points); the extractive
    reader cites the line it answers from, so its zones meet them, and a gold box on another line
    scores lower."""
    import json

    from reportlab.lib.pagesizes import letter
    from reportlab.pdfbase.pdfmetrics import stringWidth

    from pagesight.eval.runner import SearchGrid, evaluate_dataset
    from tests.conftest import make_pdf

    pages = {
        "glaciers": [
            "Glacier field survey",
            "The Atlas glacier retreated 42 metres in 2021.",
            "Ice cores were kept.",
        ],
        "harbours": ["Harbour log", "Fog delayed ferries", "The north pier handled 310 ships last year."],
    }
    data = tmp_path / "data"
    (data / "pdfs").mkdir(parents=True)
    for name, lines in pages.items():
        make_pdf(data / "pdfs" / f"{name}.pdf", [lines])

    def drawn(row: int, text: str) -> list[float]:  # make_pdf: 12 pt Helvetica, baselines 14 pt apart
        baseline = letter[1] - (720 - 14 * row)
        return [72.0, baseline - 0.718 * 12, 72.0 + stringWidth(text, "Helvetica", 12), baseline + 0.207 * 12]

    questions = {
        "q1": ("How many metres did the Atlas glacier retreat in 2021?", "glaciers", 1, "42 metres"),
        "q2": ("How many ships did the north pier handle last year?", "harbours", 2, "310"),
    }

    def write(box_row: dict[str, int]) -> None:
        lines = {
            "queries.jsonl": [{"_id": q, "text": t} for q, (t, _, _, _) in questions.items()],
            "answers.jsonl": [{"_id": q, "answer": a} for q, (_, _, _, a) in questions.items()],
            "boxes.jsonl": [
                {
                    "_id": q,
                    "corpus_id": f"{doc}_1",
                    "annotator": 0,
                    "box": drawn(box_row[q], pages[doc][box_row[q]]),
                }
                for q, (_, doc, _, _) in questions.items()
            ],
        }
        for name, rows in lines.items():
            (data / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
        qrels = "".join(f"{q}\t{doc}_1\t1\n" for q, (_, doc, _, _) in questions.items())
        (data / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)

    def grounding(box_row: dict[str, int]) -> dict:
        write(box_row)
        found = evaluate_dataset(
            data, index=tmp_path / "ix", searches=SearchGrid(modes=("lexical",)), reader="extractive"
        )
        return found.answers.summary()

    right = grounding({q: row for q, (_, _, row, _) in questions.items()})
    assert right["n_grounded"] == 2 and right["grounding_page_f1"] == 1.0
    assert right["grounding_recall"] > 0.8 and right["grounding_f1"] > 0.6, right
    wrong = grounding({"q1": 2, "q2": 0})  # gold on a line the answer is not on
    assert wrong["grounding_page_f1"] == 1.0 and wrong["grounding_f1"] < right["grounding_f1"] / 2


@pytest.mark.timeout(180)
def test_the_samples_gold_boxes_hold_their_answers():
    """Each gold box the sample generator wrote holds its answer: the text layer inside a PDF
    page's box reads it; on an image (the scans drawn, rotated and noised) the box lies on the line
    OCR reads it in, where the answer's characters fall along the line."""
    import pypdfium2 as pdfium
    from PIL import Image

    from pagesight.eval.dataset import Dataset
    from pagesight.text.ocr import ocr_spans
    from tests.conftest import SAMPLES

    data = Dataset.load(SAMPLES.parent)
    assert set(data.boxes) == set(data.queries)
    for qid, pages in data.boxes.items():
        ((corpus_id, annotators),) = pages.items()
        stem, page = corpus_id.rsplit("_", 1)
        answer, boxes = data.answers[qid]["answer"], annotators[0]
        path = SAMPLES / f"{stem}.pdf"
        pdf_page = pdfium.PdfDocument(str(path))[int(page) - 1] if path.exists() else None
        if pdf_page is not None and pdf_page.get_textpage().get_text_range().strip():
            height, text = pdf_page.get_height(), pdf_page.get_textpage()
            # points from the top left; pdfium's from the bottom left
            held = [text.get_text_bounded(b[0], height - b[3], b[2], height - b[1]) for b in boxes]
            assert " ".join(" ".join(held).split()) == answer, (qid, held)
            continue
        scale = 1.0 if pdf_page is None else 150 / 72  # an image's own pixels, a PDF page's points
        image = (
            Image.open(SAMPLES / f"{stem}.png") if pdf_page is None else pdf_page.render(scale=scale).to_pil()
        )
        ((x0, y0, x1, y1),) = [[v * scale for v in box] for box in boxes]
        (line,) = [span for span in ocr_spans(image) if answer in span.text]
        lx0, ly0, lx1, ly1 = line.box
        assert ly0 - 6 <= y0 < y1 <= ly1 + 6, (qid, line.box)
        start = lx0 + (lx1 - lx0) * line.text.index(answer) / len(line.text)
        end = lx0 + (lx1 - lx0) * (line.text.index(answer) + len(answer)) / len(line.text)
        assert abs(x0 - start) < 0.06 * (lx1 - lx0) and abs(x1 - end) < 0.06 * (lx1 - lx0), (qid, line)
