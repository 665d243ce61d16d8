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
