"""Pages and tiles as pixels again: no page image is stored, so a tile is cut from its page
rendered again from its source, the one way, for the readers (``PageRenderer``, behind
``Index.page_image`` and ``Index.tile_image``) and for the visual encoder at ingestion
(``document_tiles``).

PDF and image pages are rendered again at the index DPI (pypdfium2 renders a page in about 15 ms).
Web tiles are screenshots: the ones the index kept, or the page rendered again in Chromium
(``render.web.OnDemand``, started on the first such tile), pixel-identical to the first render;
a web page is put together from its tiles.
"""

from __future__ import annotations

import io
import math
import os
from collections import OrderedDict
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PIL import Image

from pagesight.errors import PagesightError
from pagesight.records import Box, Document
from pagesight.render.sources import open_source
from pagesight.render.tiles import downscale
from pagesight.render.web.sites import WEB_SOURCES

if TYPE_CHECKING:
    from pagesight.settings import Settings
    from pagesight.store.rows import DocumentRow, TileRow

PAGE_CACHE_BYTES = 48 << 20  # pages kept rendered, in pixels' bytes; the least recently used goes first
LARGE_PAGE = 16_000_000  # pixels: a larger page's tiles are rendered alone, not cut from the whole
# A page a server shows (HTTP, MCP) is drawn at most this large (5,000 x 5,000): a 100-inch page is
# drawn smaller, never held whole in memory at the index DPI.
MAX_SERVED_PIXELS = 25_000_000


def crop_tile(page: Image.Image, box: Box) -> Image.Image:
    """The tile ``box`` (page pixels, rounded to whole ones) cut from its rendered ``page``."""
    x0, y0, x1, y1 = (round(v) for v in box)
    return page.crop((x0, y0, x1, y1))


def screenshot(png: bytes) -> Image.Image:
    """A tile screenshot (PNG bytes) as an RGB image."""
    return Image.open(io.BytesIO(png)).convert("RGB")


def stitch(size: tuple[int, int], pieces: list[tuple[Box, Image.Image]]) -> Image.Image:
    """A web page put together from its band screenshots, each pasted at its box."""
    image = Image.new("RGB", size, "white")
    for box, piece in pieces:
        image.paste(piece, (round(box[0]), round(box[1])))
    return image


def document_tiles(
    document: Document, dpi: float, read_from: str | None = None
) -> dict[tuple[int, int], Image.Image]:
    """Every tile of a freshly read ``document`` as an RGB image, keyed by (page number, tile
    index): web tiles from the screenshots the browser took (a region's unit cut from the bands
    put together), the others cut from their page rendered again at ``dpi`` from ``read_from``
    (None: the document's source)."""
    images: dict[tuple[int, int], Image.Image] = {}
    pending = []
    for page in document.pages:
        shots = [tile for tile in page.tiles if tile.image is not None]
        units = [tile for tile in page.tiles if tile.image is None]
        if not shots or any(tile.region is None for tile in units):
            pending.append(page)
            continue
        for tile in shots:
            images[(page.number, tile.index)] = screenshot(tile.image)
        if units:
            whole = stitch(
                (page.width, page.height), [(t.box, images[(page.number, t.index)]) for t in shots]
            )
            for tile in units:
                images[(page.number, tile.index)] = crop_tile(whole, tile.box)
    if not pending:
        return images
    path = Path(read_from or document.source)
    with closing(open_source(path, document.type, document.sha256)) as source:
        for page in pending:
            rendered = source.render(page.number, dpi).convert("RGB")
            for tile in page.tiles:
                images[(page.number, tile.index)] = crop_tile(rendered, tile.box)
    return images


def _bytes(image: Image.Image) -> int:
    return image.width * image.height * len(image.getbands())


def _within(image: Image.Image, max_pixels: int | None) -> Image.Image:
    """``image``, shrunk to about ``max_pixels`` when it holds more."""
    if max_pixels is None or image.width * image.height <= max_pixels:
        return image
    factor = math.sqrt(max_pixels / (image.width * image.height))
    return image.resize((max(1, int(image.width * factor)), max(1, int(image.height * factor))))


class TileLookup(Protocol):
    """What rendering again reads of an index (its catalog has it): a document's row (its source,
    type, hash and pages), a tile's row (its box and page size), a page's tiles, and a web tile's
    kept image."""

    def document(self, doc_id: str) -> DocumentRow | None: ...

    def tile_at(self, doc_id: str, page: int, idx: int) -> TileRow | None: ...

    def page_tiles(self, doc_id: str, page: int) -> list[TileRow]: ...

    def tile_image(self, tile_id: int) -> bytes | None:
        """The PNG kept for a web tile, or None when it must be rendered again."""
        ...


class PageRenderer:
    """Pages and tiles of an index rendered again: pages are cached up to ``PAGE_CACHE_BYTES``
    (a larger one is not kept), a tile of a page over ``LARGE_PAGE`` pixels is rendered alone,
    and one browser is started for web tiles the index did not keep (``close`` stops it); so what
    a render holds is bounded by the tile asked for, or by the ``max_pixels`` a page is asked at."""

    def __init__(self, catalog: TileLookup, settings: Settings, location: str | os.PathLike = "index"):
        self.catalog = catalog
        self.settings = settings
        self.location = location  # names the index in errors
        self._pages: OrderedDict[tuple[str, int], Image.Image] = OrderedDict()
        self._web = None  # render.web.OnDemand, started when a web tile must be rendered again

    def page_image(self, doc_id: str, page: int, max_pixels: int | None = None) -> Image.Image:
        """The page rendered again from its source at the index DPI (cached), or, when that is
        more than ``max_pixels``, at the DPI that gives about ``max_pixels``."""
        document = self._document(doc_id, page)
        key = (doc_id, document.sha256, page, max_pixels)
        if key in self._pages:
            self._pages.move_to_end(key)
            return self._pages[key]
        if document.type in WEB_SOURCES:
            image = _within(self._web_page(document, page), max_pixels)
        else:
            with closing(open_source(document.source, document.type, document.sha256)) as source:
                dpi = self.settings.dpi
                width, height = source.page_size(page, dpi)
                if max_pixels is not None and width * height > max_pixels:
                    dpi *= math.sqrt(max_pixels / (width * height))
                image = _within(source.render(page, dpi), max_pixels)  # an image's pixels are its own
        self._keep(key, image)
        return image

    def tile_image(
        self, doc_id: str, page: int, tile: int = 0, compression: float = 1.0, *, rerender: bool = False
    ) -> Image.Image:
        """A tile cut from its re-rendered page (or rendered alone, on a large page), each side
        divided by sqrt(``compression``).

        Web page tiles come from the image kept in the index, or are rendered again from their
        source (always, with ``rerender``), pixel-identical to the first render.
        """
        row = self.catalog.tile_at(doc_id, page, tile)
        if row is None:
            raise PagesightError(f"{doc_id}: no tile {tile} on page {page}")
        document = self._document(doc_id, page)
        if document.type in WEB_SOURCES and row.region is None:
            return downscale(self._web_tiles(document, [row], rerender)[0], compression)
        width, height = row.page_size
        if document.type not in WEB_SOURCES and width * height > LARGE_PAGE:
            with closing(open_source(document.source, document.type, document.sha256)) as source:
                return downscale(source.render(page, self.settings.dpi, row.box), compression)
        return downscale(crop_tile(self.page_image(doc_id, page), row.box), compression)

    def _document(self, doc_id: str, page: int) -> DocumentRow:
        document = self.catalog.document(doc_id)
        if document is None:
            raise PagesightError(f"{self.location}: no document '{doc_id}'")
        if not 1 <= page <= document.n_pages:
            raise PagesightError(f"{doc_id}: page {page} out of range 1..{document.n_pages}")
        return document

    def _keep(self, key: tuple, image: Image.Image) -> None:
        """``image`` cached under ``key`` when it takes at most half the budget; the least recently
        used go until the rest fits."""
        size = _bytes(image)
        if size > PAGE_CACHE_BYTES // 2:
            return
        self._pages[key] = image
        while sum(_bytes(kept) for kept in self._pages.values()) > PAGE_CACHE_BYTES:
            self._pages.popitem(last=False)

    def _web_tiles(
        self, document: DocumentRow, rows: list[TileRow], rerender: bool = False
    ) -> list[Image.Image]:
        """Tile images of a web page: kept ones from the catalog, the others rendered again at once."""
        data = [None if rerender else self.catalog.tile_image(row.id) for row in rows]
        missing = [i for i, found in enumerate(data) if found is None]
        if missing:
            from pagesight.render.web import OnDemand

            self._web = self._web or OnDemand()
            try:
                again = self._web.tiles(
                    document.type, document.source, document.meta, [rows[i].box for i in missing]
                )
            except PagesightError as exc:
                raise PagesightError(f"{document.id}: cannot render the page again ({exc})") from None
            for i, png in zip(missing, again):
                data[i] = png
        return [screenshot(png) for png in data]

    def _web_page(self, document: DocumentRow, page: int) -> Image.Image:
        """A web page put together from its tiles (kept or rendered again)."""
        rows = self.catalog.page_tiles(document.id, page)
        return stitch(
            rows[0].page_size, [(row.box, tile) for row, tile in zip(rows, self._web_tiles(document, rows))]
        )

    def close(self) -> None:
        """Stop the browser, if one was started; the renderer can still be used (it starts another)."""
        if self._web is not None:
            self._web.close()
            self._web = None
