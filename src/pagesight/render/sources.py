"""Page sources: a PDF (pypdfium2), an image file (Pillow, multi-page TIFF included), or an office
file through the PDF LibreOffice makes of it (``office.py``).

A source is opened from its path and re-rendered on demand; no page image is stored.

A PDF that PDFium cannot open, or one whose page will not load, is rebuilt in memory by qpdf
(through pikepdf), which recovers broken cross-reference tables, trailers and streams far more
often than PDFium does, and is opened again from the rebuilt bytes. The repair is deterministic, so
re-rendering later repeats it and gives the same pixels.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import math
import re
from pathlib import Path

import pikepdf
import pypdfium2 as pdfium
from PIL import Image, ImageSequence, UnidentifiedImageError

from pagesight.errors import InputError
from pagesight.records import Box, Span
from pagesight.render.office import OFFICE_SUFFIXES
from pagesight.render.pdfium import PDFIUM_LOCK
from pagesight.text.textlayer import text_layer_spans

PDF_SUFFIXES = {".pdf"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp", ".gif"}
SUFFIXES = PDF_SUFFIXES | IMAGE_SUFFIXES | OFFICE_SUFFIXES

# qpdf logs every repair it makes (some on its error channel); a failure is reported as the file's one error line.
logging.getLogger("pikepdf._core").setLevel(logging.CRITICAL)

# Pillow raises DecompressionBombError past twice this; 180 Mpx is a 13,000 x 13,000 scan.
Image.MAX_IMAGE_PIXELS = 90_000_000


def source_type(path: Path) -> str | None:
    suffix = path.suffix.lower()
    if suffix in PDF_SUFFIXES:
        return "pdf"
    if suffix in IMAGE_SUFFIXES:
        return "image"
    if suffix in OFFICE_SUFFIXES:
        return "office"
    return None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_METADATA = {"Author": "author", "Subject": "subject", "Keywords": "keywords"}  # PDF info -> field


def _pdfium(method):
    @functools.wraps(method)
    def locked(*args, **kwargs):
        with PDFIUM_LOCK:
            return method(*args, **kwargs)

    return locked


class PdfSource:
    """A PDF through pypdfium2 (qpdf repairs it when PDFium cannot open it); its methods hold
    ``PDFIUM_LOCK``. The page last loaded is kept: a page's size, text layer and renders are read
    one after another, and loading a page (PDFium parsing its content) was half of a text-layer
    ingestion's reading when each of them loaded it again."""

    type = "pdf"

    @_pdfium
    def __init__(self, path: Path, password: str | None = None):
        self.path = path
        self.password = password
        self.repaired = False
        try:
            self._pdf = pdfium.PdfDocument(str(path), password=password)
        except pdfium.PdfiumError as exc:
            self._pdf = self._repair(_pdfium_reason(exc))
        self.n_pages = len(self._pdf)
        self._loaded: tuple[int, pdfium.PdfPage] | None = None

    def _repair(self, reason: str) -> pdfium.PdfDocument:
        """The document rebuilt by qpdf; raises InputError naming both failures when that fails too."""
        try:
            with pikepdf.open(self.path, password=self.password or "") as broken:
                if len(broken.pages) == 0:
                    raise InputError("PDF has no pages")
                buffer = io.BytesIO()
                broken.save(buffer)
        except pikepdf.PasswordError:
            raise InputError("PDF is encrypted and needs a password") from None
        except (pikepdf.PdfError, OSError, RecursionError, ValueError) as exc:
            raise InputError(f"{reason}; qpdf cannot repair it ({_qpdf_reason(exc, self.path)})") from None
        try:
            pdf = pdfium.PdfDocument(buffer.getvalue())
        except pdfium.PdfiumError:
            raise InputError(f"{reason}, even after repair by qpdf") from None
        self.repaired = True
        return pdf

    def _page(self, number: int) -> pdfium.PdfPage:
        if self._loaded is not None and self._loaded[0] == number:
            return self._loaded[1]
        self._let_go()
        try:
            page = self._pdf[number - 1]
        except pdfium.PdfiumError as exc:
            reason = f"page {number} cannot be loaded ({exc})"
            if self.repaired:
                raise InputError(reason) from None
        else:
            self._loaded = (number, page)
            return page
        self._pdf.close()
        self._pdf = self._repair(reason)
        if len(self._pdf) != self.n_pages:
            raise InputError(f"{reason}; qpdf repair gives {len(self._pdf)} pages, not {self.n_pages}")
        return self._page(number)

    @_pdfium
    def page_size(self, number: int, dpi: float) -> tuple[int, int]:
        width, height = self._page(number).get_size()
        if not (width > 0 and height > 0):
            raise InputError(f"page {number} has an invalid size {width}x{height} pt")
        scale = dpi / 72
        # The size pypdfium2's render() gives, so boxes and rendered pixels agree exactly.
        return max(1, math.ceil(width * scale)), max(1, math.ceil(height * scale))

    @_pdfium
    def render(self, number: int, dpi: float, box: Box | None = None) -> Image.Image:
        """Page ``number`` at ``dpi``; with ``box`` (whole pixels of that rendering) only that
        part, drawn alone (the memory of the part, not of the page), pixel for pixel the same."""
        page = self._page(number)
        scale = dpi / 72
        if box is None or page.get_rotation():
            bitmap = page.render(scale=scale, may_draw_forms=True)
            image = bitmap.to_pil().convert("RGB")
            return image if box is None else image.crop(tuple(round(v) for v in box))
        width, height = (value * scale for value in page.get_size())
        x0, y0, x1, y1 = (round(v) for v in box)
        crop = (
            x0 / scale,
            (height - y1) / scale,
            (width - x1) / scale,
            y0 / scale,
        )  # left, bottom, right, top
        bitmap = page.render(scale=scale, crop=crop, may_draw_forms=True)
        image = bitmap.to_pil().convert("RGB")
        return image if image.size == (x1 - x0, y1 - y0) else image.resize((x1 - x0, y1 - y0))

    @_pdfium
    def text_layer(self, number: int, dpi: float) -> list[Span]:
        page = self._page(number)
        return text_layer_spans(page, self.page_size(number, dpi))

    @_pdfium
    def metadata(self) -> dict[str, str]:
        """The PDF's author, subject, keywords and creation date (``YYYY-MM-DD``), those it has."""
        try:
            info = self._pdf.get_metadata_dict(skip_empty=True)
        except pdfium.PdfiumError:
            return {}
        found = {name: str(info[key]).strip() for key, name in _METADATA.items() if key in info}
        created = re.match(r"D:(\d{4})(\d{2})?(\d{2})?", info.get("CreationDate", ""))
        if created:
            found["created"] = "-".join(part for part in created.groups() if part)
        return {name: value for name, value in found.items() if value}

    def _let_go(self) -> None:
        """The page kept, closed."""
        if self._loaded is not None:
            self._loaded[1].close()
            self._loaded = None

    @_pdfium
    def close(self) -> None:
        self._let_go()
        self._pdf.close()


class OfficeSource(PdfSource):
    """A Word, PowerPoint, Excel or OpenDocument file: the PDF LibreOffice prints of it
    (``render/office.py``), one page per page, slide or sheet page."""

    type = "office"

    def __init__(self, path: Path, sha256: str | None = None):
        """``sha256``: the content the caller expects (an indexed document's), whose cached PDF is
        used as is; without the cache, the file must still have that content to be converted."""
        from pagesight.render.office import cached_pdf, office_pdf

        pdf = cached_pdf(sha256) if sha256 else None
        if pdf is None:
            actual = file_sha256(path)
            if sha256 and actual != sha256:
                raise InputError(f"{path.name} changed since it was indexed: ingest it again")
            pdf = office_pdf(path, actual)
        super().__init__(pdf)


class ImageSource:
    """An image file; every frame of a multi-page TIFF (or animated image) is a page."""

    type = "image"

    def __init__(self, path: Path):
        self.path = path
        try:
            self._image = Image.open(path)
            self._image.load()
        except (UnidentifiedImageError, Image.DecompressionBombError, OSError, SyntaxError) as exc:
            raise InputError(f"not a readable image ({exc})") from None
        self.n_pages = getattr(self._image, "n_frames", 1)

    def _frame(self, number: int) -> Image.Image:
        if not 1 <= number <= self.n_pages:
            raise InputError(f"page {number} out of range 1..{self.n_pages}")
        frame = ImageSequence.Iterator(self._image)[number - 1]
        return frame

    def page_size(self, number: int, dpi: float) -> tuple[int, int]:
        return self._frame(number).size

    def render(self, number: int, dpi: float, box: Box | None = None) -> Image.Image:
        frame = self._frame(number)
        if box is not None:
            frame = frame.crop(tuple(round(v) for v in box))
        if frame.mode in ("RGBA", "LA", "PA") or (frame.mode == "P" and "transparency" in frame.info):
            background = Image.new("RGB", frame.size, "white")
            background.paste(frame.convert("RGBA"), mask=frame.convert("RGBA").getchannel("A"))
            return background
        return frame.convert("RGB")

    def text_layer(self, number: int, dpi: float) -> list[Span]:
        return []

    def close(self) -> None:
        self._image.close()


Source = PdfSource | ImageSource


def open_source(path: Path, type: str | None = None, sha256: str | None = None) -> Source:
    """Open ``path`` as a page source; raises InputError with a one-line reason. ``sha256`` (the
    file's, when known) finds an office file's converted PDF without hashing the file again."""
    kind = type or source_type(path)
    if kind == "pdf":
        return PdfSource(path)
    if kind == "image":
        return ImageSource(path)
    if kind == "office":
        return OfficeSource(Path(path), sha256)
    raise InputError(f"unsupported file type '{path.suffix or path.name}'")


def _qpdf_reason(exc: Exception, path: Path) -> str:
    """qpdf's message without the file name it starts with."""
    lines = str(exc).strip().splitlines()
    if not lines:
        return type(exc).__name__
    return lines[0].removeprefix(f"{path}").lstrip(": ")


def _pdfium_reason(exc: Exception) -> str:
    message = str(exc).removeprefix("Failed to load document ").strip("().")
    if "password" in message.lower():
        return "PDF is encrypted and needs a password"
    if "format" in message.lower() or "not found" in message.lower():
        return f"not a readable PDF ({message})"
    return f"PDF cannot be opened ({message})"
