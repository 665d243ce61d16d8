"""Turn one input file into a Document record with pages, tiles and text spans.

Runs inside a worker process: everything here must be picklable in and out, and a crash, a hang or
a memory blow-up here costs only this file.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from pagesight.errors import InputError
from pagesight.ingest.options import TextOptions
from pagesight.ingest.outcome import Rendered
from pagesight.records import Document, Page, Span, Tile
from pagesight.render import cut_tiles, open_source
from pagesight.render.sources import PdfSource, file_sha256
from pagesight.settings import Settings
from pagesight.text.layout import LAYOUT_DPI, detect_regions, region_units
from pagesight.text.ocr import LanguageOcr, ink_box
from pagesight.text.textlayer import usable_text
from pagesight.text.titles import heading
from pagesight.text.transcripts import TRANSCRIPT, page_transcript, read_transcripts, transcript_spans

UNCHANGED = "unchanged"
BLANK_CHECK_DPI = 36.0  # enough to see whether anything is drawn on a page


def extract(
    path: str,
    doc_id: str,
    known_sha256: str | None,
    settings: Settings,
    text_options: TextOptions,
    on_page: Callable[[int], None] | None = None,
) -> Document | Rendered | str:
    """Read ``path`` into a Document, or return UNCHANGED when its hash equals ``known_sha256``;
    ``on_page(n)`` is told each time another page has been read. With ``text_options.transcripts``, the
    pages' text is their transcription (``text.transcripts``), and the document says so in its
    meta (``text_from``). With ``text_options.pages``, the document comes with its pages rendered
    at the index DPI for the visual encoder (``Rendered``)."""
    file = Path(path)
    try:
        stat = file.stat()
        sha = file_sha256(file)
    except OSError as exc:
        raise InputError(f"cannot read file ({exc.strerror or exc})") from None
    if sha == known_sha256:
        return UNCHANGED
    if stat.st_size == 0:
        raise InputError("file is empty")
    source = open_source(file, sha256=sha)
    try:
        if source.n_pages == 0:
            raise InputError(f"{source.type.upper()} has no pages")
        document = Document(
            id=doc_id,
            source=str(file),
            sha256=sha,
            type=source.type,
            size=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
        )
        blank, rendered = [], {}
        scans = LanguageOcr(settings.ocr_engine, text_options.language)
        texts = read_transcripts(text_options.transcripts) if text_options.transcripts else None
        for number in range(1, source.n_pages + 1):
            given = None if texts is None else page_transcript(texts, doc_id, number, source.n_pages)
            page, is_blank = _read_page(source, number, settings, text_options.ocr, scans, given)
            document.pages.append(page)
            if is_blank:
                blank.append(number)
            if text_options.pages:
                rendered[number] = png(source.render(number, settings.dpi).convert("RGB"))
            if on_page:
                on_page(number)
        _describe(document, source, file, blank)
        if texts is not None:
            document.meta["text_from"] = TRANSCRIPT
        return Rendered(document, rendered) if text_options.pages else document
    finally:
        source.close()


def _describe(document: Document, source, file: Path, blank: list[int]) -> None:
    """The document's meta from its pages read: its title, a note on blank pages, the PDF's own
    metadata, the fields beside the file."""
    first = document.pages[0] if document.pages else None
    title = (
        heading([s for t in first.tiles if t.region is None for s in t.spans], first.height) if first else ""
    )
    if title:
        document.meta["title"] = title
    note = blank_pages_note(blank, source.n_pages)
    if note:
        document.meta["notes"] = [note]
    if isinstance(source, PdfSource) and (pdf := source.metadata()):
        document.meta["pdf"] = pdf
    if fields := sidecar_fields(file):
        document.meta["fields"] = fields


def png(image) -> bytes:
    """``image`` as PNG at zlib's fastest level: lossless, and a tenth of its pixels' bytes for a
    rendered page (290 KB against 2.7 MB at 100 dpi), so the documents read ahead of the encoder
    hold little memory; it costs the worker about as much as the render (49 ms against 61 ms)."""
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=1)
    return out.getvalue()


def sidecar_fields(file: Path) -> dict:
    """The fields a file carries for ``where`` filters from beside it: its row in the nearest
    ``pagesight.meta.csv`` of its folder or a folder above (``folder_fields``), under those of
    ``<file>.meta.json`` (a JSON object of names to numbers or strings); none when neither is."""
    fields = folder_fields(file)
    sidecar = file.with_name(file.name + ".meta.json")
    if not sidecar.is_file():
        return fields
    try:
        own = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{sidecar.name}: cannot read it as JSON ({exc})") from None
    if not isinstance(own, dict) or not all(
        isinstance(value, (str, int, float)) and not isinstance(value, bool) for value in own.values()
    ):
        raise InputError(f"{sidecar.name}: must be a JSON object of field names to numbers or strings")
    return {**fields, **own}


FOLDER_FIELDS = "pagesight.meta.csv"


def folder_fields(file: Path) -> dict:
    """``file``'s row in the nearest ``pagesight.meta.csv`` that lists it, in its folder or one
    above: a CSV whose ``path`` column names files relative to the CSV's folder and whose other
    columns are fields (numbers read as numbers; an empty cell is no field)."""
    file = file.resolve()
    for folder in file.parents:
        table = folder / FOLDER_FIELDS
        if table.is_file():
            row = _folder_table(table, table.stat().st_mtime_ns).get(file.relative_to(folder).as_posix())
            if row is not None:
                return row
    return {}


@lru_cache(maxsize=64)
def _folder_table(table: Path, mtime_ns: int) -> dict[str, dict]:
    """A ``pagesight.meta.csv`` read once (again when it changes): relative path -> fields."""
    try:
        with table.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            if not reader.fieldnames or "path" not in reader.fieldnames:
                raise InputError(
                    f"{table}: needs a 'path' column naming the files (it has {reader.fieldnames})"
                )
            rows = {}
            for row in reader:
                name = Path((row.pop("path") or "").strip()).as_posix()
                rows[name] = {
                    key: _cell(value) for key, value in row.items() if key and (value or "").strip()
                }
            return rows
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{table}: cannot read it as CSV ({exc})") from None


def _cell(value: str) -> str | float:
    """A CSV cell as a field: a number when it reads as one ("2021", "3.5"), else its text."""
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):  # "nan", "inf": words here
        return text
    return int(number) if number.is_integer() and "." not in text else number


def _read_page(
    source, number: int, settings: Settings, ocr: str, scans: LanguageOcr, transcript: str | None
) -> tuple[Page, bool]:
    """The page with its tiles and text, and whether it is blank (no text, nothing drawn); OCR
    (mode ``ocr``) by ``scans``, the document's OCR; the lines of ``transcript`` instead of the
    text layer and OCR when it is given."""
    width, height = source.page_size(number, settings.dpi)
    image = None
    if transcript is not None:
        spans = transcript_spans(transcript, width, height)
        text_source = TRANSCRIPT if spans else "none"
    else:
        spans = source.text_layer(number, settings.dpi) if ocr != "always" else []
        text_source = "pdf" if spans else "none"
        if ocr == "always" or (ocr == "auto" and not usable_text(spans)):
            # Images are OCRed at their own resolution; PDF pages are rendered at the OCR DPI.
            ocr_dpi = settings.ocr_dpi if isinstance(source, PdfSource) else settings.dpi
            image = source.render(number, ocr_dpi)
            found = scans.spans(image, scale=width / image.width)
            if found or ocr == "always":
                spans, text_source = found, "ocr" if found else "none"
    page = Page(number=number, width=width, height=height, text_source=text_source)
    for index, box in enumerate(cut_tiles(width, height, settings.tile_height, settings.min_tail)):
        page.tiles.append(Tile(index=index, box=box, spans=_spans_in(spans, box)))
    if settings.layout:
        if image is None:  # the text layer's page: rendered for the detector alone, at its scale
            layout_dpi = min(settings.dpi, LAYOUT_DPI) if isinstance(source, PdfSource) else settings.dpi
            image = source.render(number, layout_dpi)
        page.regions = detect_regions(image, scale=width / image.width, page_size=(width, height))
        page.tiles += region_units(page.regions, spans, len(page.tiles), height)
    if spans:
        return page, False
    if image is None:  # no OCR asked for: a small render tells whether anything is drawn
        image = source.render(number, min(settings.dpi, BLANK_CHECK_DPI))
    return page, ink_box(image) is None


def blank_pages_note(blank: list[int], n_pages: int) -> str | None:
    """A note on a document whose pages are mostly blank (a PDF cut short and repaired, a scan of
    empty sheets); None for a few blank pages among written ones (separators, backs of sheets)."""
    if not blank or len(blank) * 2 <= n_pages:
        return None
    if len(blank) == n_pages:
        return "every page is blank (no text, nothing drawn): the file may be damaged or cut short"
    runs, start = [], blank[0]
    for previous, number in zip(blank, blank[1:] + [None]):
        if number != previous + 1:
            runs.append(str(start) if start == previous else f"{start}-{previous}")
            start = number
    return (
        f"{len(blank)} of {n_pages} pages are blank (no text, nothing drawn: pages {', '.join(runs)}): "
        "the file may be damaged or cut short"
    )


def _spans_in(spans: list[Span], box) -> list[Span]:
    """Spans whose vertical centre lies in the tile band (each span belongs to one tile)."""
    top, bottom = box[1], box[3]
    return [s for s in spans if top <= (s.box[1] + s.box[3]) / 2 < bottom]


def limit_memory(max_bytes: int | None) -> None:
    """Pool initializer: cap the worker's address space so a hostile file fails alone.

    A cap above the hard limit the worker inherited (``ulimit -v``) cannot be set; that limit holds.
    """
    if max_bytes and os.name == "posix":
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            max_bytes = min(max_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))
