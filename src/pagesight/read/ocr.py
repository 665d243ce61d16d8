"""OCR with RapidOCR (PP-OCR models shipped inside the wheel, run by onnxruntime).

The engine is built once per process on first use. Boxes come back as quadrilaterals and are
stored as their axis-aligned bounds, in the pixels of the page at the index DPI.
"""

from __future__ import annotations

import logging
from functools import cache

import numpy as np
from PIL import Image

from pagesight.errors import PagesightError
from pagesight.records import Span


@cache
def _engine():
    try:
        from rapidocr import RapidOCR
    except ImportError:
        raise PagesightError(
            "OCR needs the 'ocr' extra: pip install 'pagesight[ocr]' (rapidocr, onnxruntime)"
        ) from None
    logging.getLogger("RapidOCR").setLevel(logging.ERROR)  # it warns on every empty page
    # The angle classifier is only needed for upside-down text and doubles the time per line.
    return RapidOCR(params={"Global.use_cls": False, "Global.log_level": "error"})


def ocr_spans(image: Image.Image, scale: float = 1.0, min_score: float = 0.5) -> list[Span]:
    """Text lines found in ``image``; boxes are multiplied by ``scale`` to reach page pixels."""
    result = _engine()(np.asarray(image.convert("RGB")))
    if result.boxes is None or result.txts is None:
        return []
    spans = []
    for quad, text, score in zip(result.boxes, result.txts, result.scores):
        text = " ".join(str(text).split())
        if not text or score < min_score:
            continue
        xs, ys = quad[:, 0] * scale, quad[:, 1] * scale
        box = (float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max()))
        spans.append(Span(text=text, box=box, source="ocr", conf=round(float(score), 4)))
    # Reading order: top to bottom by line, then left to right.
    spans.sort(key=lambda s: (round(s.box[1] / 10), s.box[0]))
    return spans
