"""Ingest web pages: HTML files and folders, ZIM archives and URLs, rendered by one Chromium.

PDFs and images are read by a pool of worker processes, one file each; web pages instead go to a
single browser that renders several at once in its own tabs (a browser per worker would cost a
second or more to start and hundreds of megabytes each). ``plan`` says which pages changed,
``render`` feeds the browser and gives each rendered page as an ``Extracted``, which the
ingestion loop (``pipeline``) encodes and stores in its own transaction, as it does a file's
document: a run killed at any moment leaves whole pages and the next run renders the rest.

A web page is a document with one page (the full-length capture) cut into tiles; its text lines,
links and content kinds come from the DOM. In an index made with layout regions the DOM's tables,
figures and infoboxes are the page's regions and searchable units of their own, as detected ones
are on PDF pages (``text/layout.py``): no detector is run, the page says where they are. A page's
content hash covers its bytes and the render options that decide its pixels, so changing either
re-renders it and nothing else does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from pagesight.errors import InputError, PagesightError
from pagesight.ingest.outcome import Extracted, Unchanged
from pagesight.records import Box, Document, Link, Page, Region, Span, Tile
from pagesight.render.sources import PDF_SUFFIXES
from pagesight.render.web.browser import WebRenderer
from pagesight.render.web.jobs import Capture, RenderJob, RenderOptions
from pagesight.render.web.sites import (
    WEB_SOURCES,
    UrlSite,
    WebPage,
    is_url,
    page_again,
    web_type,
)
from pagesight.store.base import Catalog
from pagesight.text.layout import region_units
from pagesight.text.ocr import LanguageOcr

REGION_KINDS = ("table", "figure", "infobox", "list", "code")  # a web page's regions, from its DOM
DOM_UNIT_KINDS = ("table", "figure", "infobox")  # a web page's regions searched as their own units


@dataclass
class WebInput:
    type: str  # a web source name
    value: str | Path  # file, or URL
    root: Path | None = None  # the folder it was found under


def split_inputs(paths: Iterable[str | os.PathLike]) -> tuple[list[WebInput], list[str | os.PathLike]]:
    """Web inputs (URLs, web files, web files below folders) and what is left for the file pipeline.

    A folder holding HTML pages is a site: its PDFs go on to the file pipeline, but its images are
    the pages' own pictures, icons and backgrounds, not documents (the Python docs' ``_static`` and
    ``_images``). A folder without HTML pages goes on whole.
    """
    web: list[WebInput] = []
    rest: list[str | os.PathLike] = []
    for raw in paths:
        text = str(raw)
        if is_url(text):
            web.append(WebInput("url", text))
            continue
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            found = [p for p in files if web_type(p) is not None]
            web.extend(WebInput(web_type(p), p, path) for p in found)
            if any(item.type == "html" for item in web[len(web) - len(found) :]):
                rest.extend(p for p in files if p.suffix.lower() in PDF_SUFFIXES)
            else:
                rest.append(raw)
        elif path.is_file() and web_type(path) is not None:
            web.append(WebInput(web_type(path), path))
        else:
            rest.append(raw)
    return web, rest


def content_hash(page: WebPage, body_sha256: str, options: RenderOptions, text: str = "dom") -> str:
    """The document hash: the page's bytes, every option that decides its pixels, and where its
    text comes from (``dom``, or ``ocr`` of the tiles)."""
    recipe = json.dumps(options.pixel_dict() | ({} if text == "dom" else {"text": text}), sort_keys=True)
    return hashlib.sha256(f"{body_sha256}\n{recipe}".encode()).hexdigest()


def plan(
    catalog: Catalog,
    inputs: list[WebInput],
    options: RenderOptions,
    claimed: dict[str, str],
    text: str = "dom",
) -> tuple[list[WebPage], list[Extracted]]:
    """The pages to render (new or changed ones), and what the plan settles already: unchanged
    pages and inputs that fail. Articles that a changed ZIM archive no longer holds are deleted."""
    todo: list[WebPage] = []
    settled: list[Extracted] = []
    for web_input in inputs:
        label = str(web_input.value)
        try:
            if web_input.type == "url":
                pages = list(WEB_SOURCES["url"].pages(web_input.value, catalog.root))
            else:
                pages = list(WEB_SOURCES[web_input.type].pages(Path(web_input.value), web_input.root))
        except InputError as exc:
            settled.append(Extracted(label, "", exc))
            continue
        except Exception as exc:  # a source that breaks while listing fails alone
            settled.append(Extracted(label, "", InputError(f"{type(exc).__name__}: {exc}")))
            continue
        if web_input.type == "zim":
            present = {page.doc_id for page in pages}
            for gone in catalog.documents_from(label):
                if gone.id not in present:
                    catalog.delete_document(gone.id)
        for page in pages:
            if page.doc_id in claimed:
                reason = f"document id '{page.doc_id}' is also the id of {claimed[page.doc_id]}"
                settled.append(Extracted(page.label, page.doc_id, InputError(reason)))
                continue
            claimed[page.doc_id] = page.label
            known = catalog.document(page.doc_id)
            same_source = known is not None and known.source.resolve() == Path(page.source).resolve()
            if known is not None and not same_source and known.source.exists():
                reason = f"document id '{page.doc_id}' is already taken by {known.source}"
                settled.append(Extracted(page.label, page.doc_id, InputError(reason)))
                continue
            if known is not None and same_source and page.type == "url":
                # rendered from its cache: nothing can have changed
                settled.append(Extracted(page.label, page.doc_id, Unchanged(page.source)))
                continue
            if (
                known is not None
                and page.content_sha256 is not None
                and known.sha256 == content_hash(page, page.content_sha256, options, text)
            ):
                moved = (known.size, known.mtime_ns) != (page.size, page.mtime_ns) or not same_source
                settled.append(
                    Extracted(
                        page.label, page.doc_id, Unchanged(page.source, page.mtime_ns if moved else None)
                    )
                )
                continue
            todo.append(page)
    return todo, settled


def render(
    catalog: Catalog,
    pages: list[WebPage],
    options: RenderOptions,
    text: str = "dom",
    keep_images: bool = True,
    language: str | None = None,
) -> Iterator[Extracted]:
    """Render ``pages`` in one browser, each as a one-page document as it finishes (or its failure).

    ``text`` is where the tiles' text comes from: the DOM, or ``ocr`` of the screenshots (in the
    pages' ``language`` when given, else each tile's own, ``text.ocr.LanguageOcr``). The
    screenshots stay on the documents for the visual encoder; ``keep_images`` says whether the
    index keeps them after.
    """
    if not pages:
        return
    replacing = {page.doc_id for page in pages if catalog.document(page.doc_id) is not None}

    def extracted(page: WebPage, outcome: Document | Exception) -> Extracted:
        return Extracted(page.label, page.doc_id, outcome, page.doc_id in replacing, keep_images)

    try:
        renderer = WebRenderer(options)
    except PagesightError as exc:  # no browser: every page fails with the one reason
        for page in pages:
            yield extracted(page, InputError(str(exc)))
        return
    sites: dict[tuple[str, str], object] = {}
    jobs = []
    for page in pages:
        try:
            url, site = _site(page, sites)
        except InputError as exc:
            yield extracted(page, exc)
            continue
        jobs.append(RenderJob(page, url, site))

    with renderer:
        for job, result in renderer.render(jobs):
            if job is None:  # the job source itself broke; the pages not yet given are lost
                raise result
            page: WebPage = job.key
            if isinstance(result, Exception):
                fetch_errors = job.site.errors if isinstance(job.site, UrlSite) else []
                reason = (
                    f"cannot fetch {fetch_errors[0]}"
                    if fetch_errors
                    else str(result) or type(result).__name__
                )
                yield extracted(page, InputError(reason))
                continue
            body_sha = page.content_sha256
            if isinstance(job.site, UrlSite):
                job.site.save()
                body = job.site.body(page.url)
                if body is None:
                    yield extracted(
                        page, InputError("; ".join(job.site.errors[:1]) or "page could not be fetched")
                    )
                    continue
                body_sha = hashlib.sha256(body).hexdigest()
                page.size = len(body)
            document = to_document(page, result, content_hash(page, body_sha, options, text), options)
            if text == "ocr":
                read_tiles_by_ocr(document, catalog.settings.ocr_engine, language)
            if catalog.settings.layout:
                add_regions(document, result.blocks)
            yield extracted(page, document)


def _site(page: WebPage, sites: dict) -> tuple[str, object]:
    """The browser URL and the site of ``page``; one site per folder, archive or cache."""
    if page.type == "url":
        return page.url, UrlSite(Path(page.source), fetch=True)
    url, site = page_again(page.type, Path(page.source), page.meta)
    key = (page.type, str(getattr(site, "root", page.source)))
    return url, sites.setdefault(key, site)


def to_document(page: WebPage, capture: Capture, sha256: str, options: RenderOptions) -> Document:
    """The rendered page as a one-page document: tiles with their lines, links, kind and image."""
    meta = {
        **page.meta,
        "render": options.pixel_dict(),
        "title": capture.title,
        "url": page.meta.get("url", page.url),
        "height": capture.full_height,
    }
    if capture.notes:
        meta["notes"] = capture.notes
    document = Document(
        id=page.doc_id,
        source=page.source,
        sha256=sha256,
        type=page.type,
        size=page.size,
        mtime_ns=page.mtime_ns,
        meta=meta,
    )
    result = Page(number=1, width=capture.width, height=capture.height, text_source="dom")
    for index, (box, image) in enumerate(capture.tiles):
        result.tiles.append(
            Tile(
                index=index,
                box=box,
                spans=_spans_in(capture.spans, box),
                kind=dominant_kind(capture.blocks, box),
                links=_links_in(capture.links, box),
                image=image,
            )
        )
    document.pages.append(result)
    return document


def dom_regions(blocks: list[tuple[str, Box]]) -> list[Region]:
    """The page's outermost tables, figures, infoboxes, lists and code blocks as regions, top to
    bottom; a block inside one already taken (an image in a figure or an infobox) is left out."""
    regions: list[Region] = []
    candidates = sorted(
        (b for b in blocks if b[0] in REGION_KINDS),
        key=lambda b: (-(b[1][2] - b[1][0]) * (b[1][3] - b[1][1]), b[1][1]),
    )
    for kind, box in candidates:  # largest first, so a block's container is seen before it
        if not any(_within(box, r.box) for r in regions):
            regions.append(Region(kind, tuple(float(v) for v in box)))
    return sorted(regions, key=lambda r: (r.box[1], r.box[0]))


def add_regions(document: Document, blocks: list[tuple[str, Box]]) -> None:
    """Give the rendered page its DOM regions, and its tables, figures and infoboxes searchable
    units of their own: their lines (the DOM's, or OCR's with ``--ocr always``), caption included
    since a caption is inside its table or figure element."""
    for page in document.pages:
        page.regions = dom_regions(blocks)
        spans = [span for tile in page.tiles for span in tile.spans]
        page.tiles += region_units(page.regions, spans, len(page.tiles), page.height, DOM_UNIT_KINDS)


def _within(inner: Box, outer: Box, slack: float = 1.0) -> bool:
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )


def read_tiles_by_ocr(document: Document, engine: str, language: str | None = None) -> None:
    """Replace the DOM text of every tile by what OCR reads in its pixels (``--ocr always``).

    For pages whose text is not in the DOM (text drawn in images or on a canvas), and to compare
    DOM text with text read from the screenshots, as PixelRAG does. Links and kinds stay the DOM's.
    """
    scans = LanguageOcr(engine, language)
    for page in document.pages:
        for tile in page.tiles:
            image = Image.open(io.BytesIO(tile.image))
            x0, y0 = tile.box[0], tile.box[1]
            tile.spans = [
                dataclasses.replace(
                    span, box=(span.box[0] + x0, span.box[1] + y0, span.box[2] + x0, span.box[3] + y0)
                )
                for span in scans.spans(image)
            ]
        page.text_source = "ocr" if any(tile.spans for tile in page.tiles) else "none"


def _spans_in(spans: list[Span], box: Box) -> list[Span]:
    top, bottom = box[1], box[3]
    return [s for s in spans if top <= (s.box[1] + s.box[3]) / 2 < bottom]


def _links_in(links: list[Link], box: Box) -> list[Link]:
    """Each link with the boxes whose centre lies in the band; a link split by a tile edge is in both."""
    top, bottom = box[1], box[3]
    found = []
    for link in links:
        boxes = [b for b in link.boxes if top <= (b[1] + b[3]) / 2 < bottom]
        if boxes:
            found.append(Link(link.text, link.url, boxes))
    return found


def dominant_kind(blocks: list[tuple[str, Box]], box: Box) -> str:
    """The kind of content covering most of the tile's area ("none" for an empty tile)."""
    area: dict[str, float] = {}
    for kind, (x0, y0, x1, y1) in blocks:
        overlap = max(0.0, min(y1, box[3]) - max(y0, box[1])) * max(0.0, min(x1, box[2]) - max(x0, box[0]))
        if overlap > 0:
            area[kind] = area.get(kind, 0.0) + overlap
    return max(area, key=area.get) if area else "none"
