"""Lines of the PDF text layer with their pixel boxes, read through PDFium.

PDFium's text page gives the page text in reading order with generated line breaks. Each line's
box is the union of its first and last characters' loose boxes (the font's ascent to descent, as
a viewer highlights a selection, so letters that hang below the line are inside even when the
line's ends have none), mapped to pixels by PDFium itself (``FPDF_PageToDevice``), so page
rotation and crop boxes are handled as in rendering. Two box look-ups per line keep extraction at
several hundred pages per second per core.

PDFium runs the pieces of text a page sets apart on one baseline into one line: a table row's
label and its figures, headings side by side. Such a line is cut where its characters stand
apart by more than ``GAP`` of their height, so each piece is a span with its own box, as OCR
gives them, and the table finder (``text/tables.py``) sees where each figure and heading stands.
Only a line wider than its characters could fill is looked at character by character
(``_spread``), so prose costs no more look-ups.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as raw

from pagesight.records import Span

_BREAKS = (10, 13)
# PDFium's mark for a hyphen that splits a word at the end of a line (not the text's own "-"). It
# becomes the Unicode soft hyphen, so the word is joined again wherever lines are (``Tile.text``).
_PDFIUM_SOFT_HYPHEN = 0xFFFE
SOFT_HYPHEN = "\u00ad"
_SPACE = 32
GAP = 1.0  # a blank wider than this many character heights sets two pieces of a line apart
# a line is looked at character by character when short, or wider than this many heights a
# character and ``GAP`` more: text set in capitals takes about half its loose box's height a letter
_WIDEST = 0.5
_SHORT = 40  # characters


def text_layer_spans(page: pdfium.PdfPage, size_px: tuple[int, int]) -> list[Span]:
    textpage_obj = page.get_textpage()
    textpage = textpage_obj.raw
    try:
        n_chars = raw.FPDFText_CountChars(textpage)
        if n_chars <= 0:
            return []
        buffer = ctypes.create_string_buffer((n_chars + 1) * 2)
        raw.FPDFText_GetText(textpage, 0, n_chars, ctypes.cast(buffer, ctypes.POINTER(ctypes.c_ushort)))
        units = np.frombuffer(buffer.raw[: n_chars * 2], dtype=np.uint16)
        # Runs between line breaks, as [start, end) in UTF-16 units (PDFium's character indexes).
        in_line = np.concatenate(([0], ~np.isin(units, _BREAKS), [0])).astype(np.int8)
        steps = np.diff(in_line)
        starts, ends = np.flatnonzero(steps == 1), np.flatnonzero(steps == -1)
        # PDFium runs a line that ends in a word-splitting hyphen on into the next line without a
        # break: cut it after the hyphen, so each visual line is a span with its own box.
        hyphens = np.flatnonzero(units[:-1] == _PDFIUM_SOFT_HYPHEN) + 1
        hyphens = hyphens[~np.isin(units[hyphens], _BREAKS)]  # mid-run only; else the line ends there
        cuts = sorted(set(starts.tolist()) | set(hyphens.tolist()))
        ends = np.sort(np.concatenate((ends, hyphens)))
        spans = []
        rect = raw.FS_RECTF()
        for start, end in _runs(cuts, ends.tolist()):
            for lo, hi in _pieces(textpage, units, start, end, rect):
                span = _span(page, size_px, textpage, units, lo, hi, rect)
                if span is not None:
                    spans.append(span)
        return spans
    finally:
        textpage_obj.close()


def _span(page, size_px, textpage, units: np.ndarray, start: int, end: int, rect) -> Span | None:
    """Characters ``start`` to ``end`` as a span: their text, spaces made single, and the box from
    the first character's loose box to the last's, blanks at either end aside (the hyphen PDFium
    marks may have none)."""
    text = units[start:end].tobytes().decode("utf-16-le", errors="replace")
    text = " ".join(text.replace("\x00", " ").replace("\ufffe", SOFT_HYPHEN).split())
    if not text:
        return None
    while units[start] == _SPACE:  # the box from the first character to the last, blanks aside
        start += 1
    while end - 1 > start and units[end - 1] == _SPACE:
        end -= 1
    xs, ys = [], []
    for candidates in ((start,), (end - 1, end - 2)):
        for index in candidates:
            if index >= start and raw.FPDFText_GetLooseCharBox(textpage, index, rect):
                xs += [rect.left, rect.right]
                ys += [rect.bottom, rect.top]
                break
    if not xs:
        return None
    box = to_pixels(page, size_px, min(xs), min(ys), max(xs), max(ys))
    return None if box is None else Span(text=text, box=box, source="pdf")


def _pieces(textpage, units: np.ndarray, start: int, end: int, rect) -> list[tuple[int, int]]:
    """The line of characters ``start`` to ``end`` cut where a blank wider than ``GAP`` of its
    characters' height sets its pieces apart, as [start, end) pairs; a long line whole when it
    is not wider than its characters could fill (``_WIDEST``)."""
    if end - start < 3 or not raw.FPDFText_GetLooseCharBox(textpage, start, rect):
        return [(start, end)]
    left, height = rect.left, rect.top - rect.bottom
    if not raw.FPDFText_GetLooseCharBox(textpage, end - 1, rect):
        return [(start, end)]
    height = max(height, rect.top - rect.bottom)
    if height <= 0 or end - start > _SHORT and rect.right - left <= (_WIDEST * (end - start) + GAP) * height:
        return [(start, end)]
    pieces, first, last, right = [], start, start, None
    for i in range(start, end):
        if units[i] == _SPACE or not raw.FPDFText_GetLooseCharBox(textpage, i, rect):
            continue
        if right is not None and rect.left - right > GAP * height:
            pieces.append((first, last + 1))  # without the blanks between (PDFium's own spaces span the gap)
            first = i
        right, last = rect.right, i
    pieces.append((first, last + 1 if right is not None else end))
    return pieces


def _runs(starts: list[int], ends: list[int]):
    """[start, end) pairs: each start with the first end after it (a line, or its part up to a
    hyphen that PDFium did not break the line at)."""
    position = 0
    for start in starts:
        while position < len(ends) and ends[position] <= start:
            position += 1
        if position < len(ends):
            yield start, ends[position]


def to_pixels(page, size_px, x0, y0, x1, y1):
    width, height = size_px
    px, py = ctypes.c_int(), ctypes.c_int()
    corners = []
    for x, y in ((x0, y0), (x1, y1)):
        raw.FPDF_PageToDevice(page.raw, 0, 0, width, height, 0, x, y, px, py)
        corners.append((px.value, py.value))
    (ax, ay), (bx, by) = corners
    box = (
        float(max(0, min(ax, bx))),
        float(max(0, min(ay, by))),
        float(min(width, max(ax, bx))),
        float(min(height, max(ay, by))),
    )
    if box[2] <= box[0] or box[3] <= box[1]:
        return None
    return box


def usable_text(spans: list[Span], min_chars: int = 20) -> bool:
    """Whether a text layer is worth trusting over OCR.

    A page whose text layer has fewer than ``min_chars`` letters or digits is treated as a scan,
    and so is one where most characters are not letters, digits or punctuation (fonts without a
    Unicode map give such garbage).
    """
    text = "".join(s.text for s in spans).replace(" ", "")
    if not text:
        return False
    alnum = sum(ch.isalnum() for ch in text)
    readable = sum(ch.isprintable() and ch != "\ufffd" and not 0xE000 <= ord(ch) <= 0xF8FF for ch in text)
    return alnum >= min_chars and readable / len(text) > 0.9 and alnum / len(text) > 0.5
