"""Grounding: the boxes an answer cites against the zones annotators drew (ViDoRe V3's grounding).

A question's gold zones are each annotator's boxes on the question's pages (``Dataset.boxes``); an
answer's are the boxes its citations draw. On each page both are unions of rectangles, compared in
pixels, and the pages of the question are summed:

- precision = |cited ∩ gold| / |cited|, recall = |cited ∩ gold| / |gold|, F1 their harmonic mean,
  IoU = |cited ∩ gold| / |cited ∪ gold|;
- page agreement: the F1 of the pages cited against the pages the annotator boxed.

Annotators disagree (ViDoRe reports their own agreement at an F1 of about .6), so a question is
scored against each annotator and keeps the best (by F1, then IoU). An answer citing no box scores
0; a question without gold zones is not scored. The union's area is exact: the boxes' edges cut the
page into cells, and a cell is in or out.

Units: gold boxes are in pixels of the page as the dataset holds it (an image page's own pixels, a
PDF page's points); citations are in page pixels at the index's DPI, where an image page is its
own pixels. ``to_gold`` converts one to the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from pagesight.records import Box

PDF_DPI = 72.0  # a PDF page's gold boxes are in points


def to_gold(box: Box, scale: float) -> Box:
    """A cited box (index pixels) in the gold's units, ``scale`` being gold units per index pixel."""
    return (box[0] * scale, box[1] * scale, box[2] * scale, box[3] * scale)


def areas(cited: Sequence[Box], gold: Sequence[Box]) -> tuple[float, float, float]:
    """(|cited|, |gold|, |cited ∩ gold|) of two unions of boxes on one page."""
    boxes = [*cited, *gold]
    if not boxes:
        return 0.0, 0.0, 0.0
    xs = np.unique([v for b in boxes for v in (b[0], b[2])])
    ys = np.unique([v for b in boxes for v in (b[1], b[3])])
    cells = np.outer(np.diff(ys), np.diff(xs))  # rows: y, columns: x

    def covered(union: Sequence[Box]) -> np.ndarray:
        mask = np.zeros(cells.shape, dtype=bool)
        for x0, y0, x1, y1 in union:
            columns = slice(np.searchsorted(xs, x0), np.searchsorted(xs, x1))
            mask[slice(np.searchsorted(ys, y0), np.searchsorted(ys, y1)), columns] = True
        return mask

    mine, theirs = covered(cited), covered(gold)
    return float(cells[mine].sum()), float(cells[theirs].sum()), float(cells[mine & theirs].sum())


def score(cited: Mapping[str, Sequence[Box]], gold: Mapping[str, Mapping[int, Sequence[Box]]]) -> dict | None:
    """Grounding scores of an answer's ``cited`` boxes by page against the ``gold`` boxes by page and
    annotator, all in the gold's units; None when there are no gold boxes."""
    annotators = sorted({a for by_annotator in gold.values() for a in by_annotator})
    if not annotators:
        return None
    best = None
    for annotator in annotators:
        theirs = {page: by[annotator] for page, by in gold.items() if by.get(annotator)}
        totals = np.zeros(3)
        for page in set(theirs) | {page for page, boxes in cited.items() if boxes}:
            totals += areas(cited.get(page, ()), theirs.get(page, ()))
        mine, gold_area, overlap = totals
        precision = overlap / mine if mine else 0.0
        recall = overlap / gold_area if gold_area else 0.0
        union = mine + gold_area - overlap
        pages_cited = {page for page, boxes in cited.items() if boxes}
        shared = len(pages_cited & set(theirs))
        page_f1 = 2 * shared / (len(pages_cited) + len(theirs)) if pages_cited or theirs else 0.0
        found = {
            "grounding_f1": _f1(precision, recall),
            "grounding_iou": overlap / union if union else 0.0,
            "grounding_precision": precision,
            "grounding_recall": recall,
            "grounding_page_f1": page_f1,
        }
        if best is None or (found["grounding_f1"], found["grounding_iou"]) > (
            best["grounding_f1"],
            best["grounding_iou"],
        ):
            best = found
    return best


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0
