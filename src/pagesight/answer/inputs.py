"""``inputs="auto"``: a model reader is given each tile's text where its text layer covers it, and
its image otherwise.

A tile goes as its text (numbered lines, cited by line, as with ``inputs="text"``) when all of
these hold, and as its image (cited by boxes) when one fails:

- **no table or figure on it**: the tile is no table or figure unit itself, and no layout region
  of ``IMAGE_KINDS`` lies on it (``MIN_REGION_SHARE`` of the region's area, or of the tile's, at
  least), on an index made with layout regions (``ingest --layout``);
- **enough words**: its text holds ``MIN_WORDS`` words at least (a title slide, a scan without
  text, a page of drawings has fewer: its image says more);
- **its ink is text**, on an index made without layout regions, which cannot tell a figure from
  text: at most ``MAX_UNCOVERED_INK`` of its image's ``INK_CELL``-pixel cells hold ink outside its
  text lines (a chart's strokes, a photograph, a drawn table's rules lie outside them). This
  check renders the tile; the two above read the catalog alone. On IRPAPERS' retrieved tiles it
  agrees with the layout detector on 78% of them: it sends 8% of those the detector found no
  table or figure on as images, and 73% of the others (BENCHMARKS.md).

A text tile costs the tokens of its words instead of its image's (about 1,100 image tokens for a
1,024-pixel tile at 100 DPI in the ``qwen2-vl`` accounting), and the model reads its text as the
text layer has it, not as its vision encoder makes it out. BENCHMARKS.md ("Readers: text where it
covers the tile") counts what it saves on IRPAPERS and a development set.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pagesight.answer.base import ContextItem
from pagesight.records import Box

IMAGE_KINDS = ("figure", "table")  # layout regions whose tile goes as its image
MIN_REGION_SHARE = 0.2  # of the region's area (or the tile's) on the tile, for it to count
MIN_WORDS = 40  # words a tile's text needs to stand for it
MAX_UNCOVERED_INK = 0.02  # share of a text tile's cells that may hold ink outside its lines (no layout)
INK_CELL = 16  # image pixels a side of the cells ink is counted in
INK_PIXELS = 4  # dark pixels outside the lines that make a cell one with ink (not a speck)
INK_LEVEL = 160  # a pixel darker than this (0..255 grey) is ink
LINE_PAD = 3.0  # image pixels around a text line that count as its own (anti-aliasing, accents)


def as_text(item: ContextItem) -> bool:
    """Whether ``inputs="auto"`` gives ``item`` as its text (else as its image); decided once."""
    if item._as_text is None:
        item._as_text = why_image(item) is None
    return item._as_text


def why_image(item: ContextItem) -> str | None:
    """Why ``item`` goes as its image: ``"region"`` (a table or figure lies on it), ``"words"``
    (too few words), ``"ink"`` (ink outside its text lines, an index without layout regions);
    None when it goes as its text. Tiles pasted together (the concat strategy) are an image."""
    if hasattr(item, "parts"):
        return "concatenated"
    if (item.hit.region is not None and item.hit.region.kind in IMAGE_KINDS) or any(
        _lies_on(region.box, item.hit.tile_box) for region in item.regions if region.kind in IMAGE_KINDS
    ):
        return "region"
    if sum(len(span.text.split()) for span in item.spans) < MIN_WORDS:
        return "words"
    if not item.layout and uncovered_ink(item) > MAX_UNCOVERED_INK:
        return "ink"
    return None


def text_items(inputs: str, context: Sequence[ContextItem]) -> set[int]:
    """The indexes of the items of ``context`` a reader of ``inputs`` reads as text: all for
    ``"text"``, those ``as_text`` chooses for ``"auto"``, none otherwise."""
    if inputs == "text":
        return set(range(len(context)))
    if inputs == "auto":
        return {i for i, item in enumerate(context) if as_text(item)}
    return set()


def image_items(inputs: str, context: Sequence[ContextItem]) -> list[ContextItem]:
    """The items of ``context`` a reader of ``inputs`` is shown as images, in order."""
    texts = text_items(inputs, context)
    return [item for i, item in enumerate(context) if i not in texts]


def uncovered_ink(item: ContextItem) -> float:
    """The share of the ``INK_CELL``-pixel cells of ``item``'s image that hold ink (``INK_PIXELS``
    dark pixels or more) outside its text lines."""
    grey = np.asarray(item.image.convert("L"))
    ink = grey < INK_LEVEL
    height, width = ink.shape
    for span in item.spans:
        x0, y0, x1, y1 = _on_image(item, span.box)
        ink[max(0, int(y0)) : min(height, int(y1) + 1), max(0, int(x0)) : min(width, int(x1) + 1)] = False
    rows, columns = height // INK_CELL, width // INK_CELL
    if not rows or not columns:
        return 0.0
    cells = ink[: rows * INK_CELL, : columns * INK_CELL].reshape(rows, INK_CELL, columns, INK_CELL)
    return float((cells.sum(axis=(1, 3)) >= INK_PIXELS).mean())


def _on_image(item: ContextItem, box: Box) -> Box:
    """A page-pixel box on ``item``'s image, ``LINE_PAD`` pixels wider each way."""
    x0, y0, _, _ = item.hit.tile_box
    s = item.scale
    return (
        (box[0] - x0) * s - LINE_PAD,
        (box[1] - y0) * s - LINE_PAD,
        (box[2] - x0) * s + LINE_PAD,
        (box[3] - y0) * s + LINE_PAD,
    )


def _lies_on(region: Box, tile: Box) -> bool:
    """Whether ``MIN_REGION_SHARE`` of the region's area, or of the tile's, lies on the tile."""
    width = min(region[2], tile[2]) - max(region[0], tile[0])
    height = min(region[3], tile[3]) - max(region[1], tile[1])
    if width <= 0 or height <= 0:
        return False
    shared = width * height
    area = (region[2] - region[0]) * (region[3] - region[1])
    tile_area = (tile[2] - tile[0]) * (tile[3] - tile[1])
    return shared >= MIN_REGION_SHARE * min(area, tile_area)
