"""GET /api/tile and /api/page: PNGs of a tile or a page, evidence boxes drawn, with ETags."""

from __future__ import annotations

import hashlib
import io
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from PIL import Image

from pagesight.answer.show import draw_boxes
from pagesight.errors import PagesightError
from pagesight.records import Box
from pagesight.render.pages import MAX_SERVED_PIXELS
from pagesight.render.tiles import downscale, scaled_size
from pagesight.request import MAX_PAGE, MAX_TILE
from pagesight.serve.routes.common import ApiError, Caller, Server, given_boxes, lookup

router = APIRouter(tags=["images"])
Compression = Annotated[float, Query(ge=1, le=64, description="Each side shrinks by sqrt(c).")]
Boxes = Annotated[str | None, Query(description="x0,y0,x1,y1;... in page pixels, drawn.")]
Doc = Annotated[str, Query(max_length=1000, description="The document id.")]
PNG = {200: {"content": {"image/png": {}}, "description": "PNG"}}


@router.get("/api/tile", response_class=Response, responses=PNG)
def tile_png(
    server: Server,
    tenant: Caller,
    request: Request,
    doc: Doc,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)],
    tile: Annotated[int, Query(ge=0, le=MAX_TILE)] = 0,
    c: Compression = 1.0,
    boxes: Boxes = None,
    explain: Annotated[
        str | None,
        Query(
            max_length=1000,
            description="A query: the tile with its similarity map drawn (which patches matched), "
            "for an index with a late-interaction visual encoder.",
        ),
    ] = None,
) -> Response:
    """A tile as the reader sees it at compression ``c``, evidence boxes drawn on request, or its
    similarity map to the query ``explain``."""
    drawn = given_boxes(boxes, "boxes") if boxes else []
    with server.pool.reading() as idx:
        document = lookup(idx, doc, tenant)
        row = idx.catalog.tile_at(doc, page, tile)
        if row is None:
            raise ApiError(404, f"{doc}: no tile {tile} on page {page}")
        tag = _etag(document.sha256, "tile", page, tile, c, drawn, explain)
        if _fresh(request, tag):
            return Response(status_code=304, headers={"ETag": tag})
        if explain is not None:
            try:
                similarity = idx.explain(explain, doc, page, tile)
            except PagesightError as exc:
                raise ApiError(400, str(exc)) from None
            image = downscale(similarity.draw(), c)
        else:
            image = idx.tile_image(doc, page, tile, c)
    x0, y0 = row.box[0], row.box[1]
    scale = image.width / max(1.0, row.box[2] - row.box[0])
    return _png(image, [_moved(box, x0, y0, scale) for box in drawn], tag)


@router.get("/api/page", response_class=Response, responses=PNG)
def page_png(
    server: Server,
    tenant: Caller,
    request: Request,
    doc: Doc,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)],
    c: Compression = 1.0,
    boxes: Boxes = None,
) -> Response:
    """A whole page rendered again at the index DPI (smaller when that is over 25 million
    pixels), evidence boxes drawn on request."""
    drawn = given_boxes(boxes, "boxes") if boxes else []
    with server.pool.reading() as idx:
        document = lookup(idx, doc, tenant)
        if page > document.n_pages:
            raise ApiError(404, f"{doc}: no page {page} (it has {document.n_pages})")
        tag = _etag(document.sha256, "page", page, c, drawn)
        if _fresh(request, tag):
            return Response(status_code=304, headers={"ETag": tag})
        rendered = idx.page_image(doc, page, max_pixels=MAX_SERVED_PIXELS)
        first = idx.catalog.tile_at(doc, page, 0)
    width, height = first.page_size if first is not None else rendered.size
    if rendered.width >= width:  # at the index DPI
        image = downscale(rendered, c)
    else:  # drawn smaller already: shrunk further only as far as c asks
        wanted = scaled_size(width, height, c)
        image = rendered.resize(wanted) if wanted[0] < rendered.width else rendered
    scale = image.width / width
    return _png(image, [_moved(box, 0, 0, scale) for box in drawn], tag)


def _moved(box: Box, x0: float, y0: float, scale: float) -> Box:
    """A page-pixel box in pixels of an image whose top left is page point (x0, y0), at ``scale``."""
    return ((box[0] - x0) * scale, (box[1] - y0) * scale, (box[2] - x0) * scale, (box[3] - y0) * scale)


def _within(boxes: list[Box], width: int, height: int) -> list[Box]:
    """``boxes`` cut to the image (a line drawn around a box a million pixels wide costs seconds),
    those wholly outside it left out."""
    kept = []
    for x0, y0, x1, y1 in boxes:
        x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, width - 1), min(y1, height - 1)
        if x0 < x1 and y0 < y1:
            kept.append((x0, y0, x1, y1))
    return kept


def _etag(*parts) -> str:
    return '"' + hashlib.sha256(repr(parts).encode()).hexdigest()[:32] + '"'


def _fresh(request: Request, tag: str) -> bool:
    return request.headers.get("if-none-match") == tag


def _png(image: Image.Image, boxes: list[Box], tag: str) -> Response:
    boxes = _within(boxes, image.width, image.height)
    if boxes:
        image = draw_boxes(image, boxes, width=max(2, round(3 * image.width / 1000)))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=3)
    headers = {"ETag": tag, "Cache-Control": "private, no-cache"}  # revalidated: a document can change
    return Response(buffer.getvalue(), media_type="image/png", headers=headers)
