"""Visual vectors at ingest: each tile's image, as the reader will see it, through the index's
visual encoder.

Tiles of PDFs, images and office files are cut from their pages as the worker that read the file
rendered them at the index DPI (``TextOptions.pages``), or, when it did not (Ray's readers, another
extractor), from their page rendered again at the index DPI, as the readers' tiles are
(``render/pages.py``); web tiles come with the screenshot the browser took.

The tiles of several documents are encoded together, longest first, so a batch holds tiles of about
one size and pads little (``plan_batches``): here for a Ray actor's documents (``encode_documents``),
and in the local loop through ``feeding.VisualFeed``, which keeps the accelerator fed.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from pagesight.encode.visual import VisualEncoder
from pagesight.errors import InputError
from pagesight.ingest.outcome import Extracted
from pagesight.records import Document
from pagesight.render.pages import crop_tile, document_tiles
from pagesight.settings import Settings

Key = tuple[int, int]  # (page number, tile index)


def tile_images(
    document: Document, settings: Settings, read_from: str | None = None
) -> dict[Key, Image.Image]:
    """Every tile of ``document`` as an RGB image, keyed by (page number, tile index), its pages
    rendered from ``read_from`` (None: its source)."""
    try:
        return document_tiles(document, settings.dpi, read_from)
    except InputError:
        raise
    except Exception as exc:  # a renderer failing on a page it rendered before: the file changed
        raise InputError(f"cannot render the pages again for the visual encoder ({exc})") from None


def extracted_tiles(extracted: Extracted, settings: Settings) -> dict[Key, Image.Image]:
    """The tiles of ``extracted``'s document, cut from the pages its worker rendered when it did,
    else rendered again from where the file is read (``Extracted.read_from``: a server's staged
    upload; None: its source)."""
    document = extracted.outcome
    if extracted.pages is None:
        return tile_images(document, settings, extracted.read_from)
    images = {}
    for page in document.pages:
        try:
            rendered = Image.open(io.BytesIO(extracted.pages[page.number])).convert("RGB")
        except (KeyError, OSError) as exc:
            raise InputError(f"page {page.number} was not rendered for the visual encoder ({exc})") from None
        for tile in page.tiles:
            images[(page.number, tile.index)] = crop_tile(rendered, tile.box)
    return images


def plan_batches(sizes: list[int], batch: int) -> list[list[int]]:
    """The tiles of ``sizes`` (pixels, or tokens) in batches of at most ``batch``, by size from the
    largest, so each batch holds tiles of about one size (those of equal size in their order)."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    return [order[start : start + batch] for start in range(0, len(order), batch)]


def image_size(image: Image.Image) -> int:
    """What a tile's place in the batches is by: its pixels (a model's tokens grow with them, or
    are the same for every image when the model resizes them to one size)."""
    return image.width * image.height


def encode_documents(
    documents: list[Document], encoder: VisualEncoder, settings: Settings, batch: int
) -> list[dict[Key, np.ndarray] | InputError]:
    """Each document's tile vectors, or the ``InputError`` its pages failed to render with, the
    tiles of all of them encoded together in batches of ``batch`` (``plan_batches``)."""
    found: list[dict | InputError] = []
    tiles: list[tuple[int, Key, Image.Image]] = []
    for number, document in enumerate(documents):
        try:
            images = tile_images(document, settings)
        except InputError as exc:
            found.append(exc)
            continue
        found.append({})
        tiles += [(number, key, image) for key, image in images.items()]
    for chosen in plan_batches([image_size(image) for _, _, image in tiles], batch):
        vectors = encoder.encode_images([tiles[i][2] for i in chosen])
        for i, vector in zip(chosen, vectors):
            number, key, _ = tiles[i]
            found[number][key] = vector
    return found
