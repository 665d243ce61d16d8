"""Visual vectors at ingest: each tile's image, as the reader will see it, through the index's
visual encoder.

Runs in the main process, next to the dense text encoder, so a GPU serves every worker's pages.
Tiles of PDFs and images are cut from their page rendered again at the index DPI, as the readers'
tiles are (``render/pages.py``); web tiles come with the screenshot the browser took.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from pagesight.encode.visual import VisualEncoder
from pagesight.errors import InputError
from pagesight.records import Document
from pagesight.render.pages import document_tiles
from pagesight.settings import Settings


def tile_images(
    document: Document, settings: Settings, read_from: str | None = None
) -> dict[tuple[int, int], Image.Image]:
    """Every tile of ``document`` as an RGB image, keyed by (page number, tile index), its pages
    rendered from ``read_from`` (None: its source)."""
    try:
        return document_tiles(document, settings.dpi, read_from)
    except InputError:
        raise
    except Exception as exc:  # a renderer failing on a page it rendered before: the file changed
        raise InputError(f"cannot render the pages again for the visual encoder ({exc})") from None


def encode_tiles(
    document: Document, encoder: VisualEncoder | None, settings: Settings, read_from: str | None = None
) -> dict[tuple[int, int], np.ndarray]:
    """The visual vectors of every tile of ``document``: ``(dim,)`` or ``(n_tokens, dim)`` each, its
    pages rendered from ``read_from`` (where the file is now, when its source is a path it is moved
    to only once committed: a server's staged upload; None: its source)."""
    if encoder is None:
        return {}
    images = tile_images(document, settings, read_from)
    keys = list(images)
    vectors = encoder.encode_images([images[key] for key in keys])
    return dict(zip(keys, vectors))
