"""Visual vectors at ingest: each tile's image, as the reader will see it, through the index's
visual encoder.

Runs in the main process, next to the dense text encoder, so a GPU serves every worker's pages.
Tiles of PDFs and images are cut from their page rendered again at the index DPI (pypdfium2 renders
a page in about 15 ms); web tiles come with the screenshot the browser took.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from pagesight.encode.visual import VisualEncoder
from pagesight.errors import InputError
from pagesight.records import Document
from pagesight.render import open_source
from pagesight.settings import Settings


def tile_images(document: Document, settings: Settings) -> dict[tuple[int, int], Image.Image]:
    """Every tile of ``document`` as an RGB image, keyed by (page number, tile index)."""
    images: dict[tuple[int, int], Image.Image] = {}
    pending = []
    for page in document.pages:
        for tile in page.tiles:
            if tile.image is not None:
                images[(page.number, tile.index)] = Image.open(io.BytesIO(tile.image)).convert("RGB")
            else:
                pending.append(page)
                break
    if not pending:
        return images
    source = open_source(Path(document.source), document.type)
    try:
        for page in pending:
            rendered = source.render(page.number, settings.dpi).convert("RGB")
            for tile in page.tiles:
                x0, y0, x1, y1 = (round(v) for v in tile.box)
                images[(page.number, tile.index)] = rendered.crop((x0, y0, x1, y1))
    except InputError:
        raise
    except Exception as exc:  # a renderer failing on a page it rendered before: the file changed
        raise InputError(f"cannot render the pages again for the visual encoder ({exc})") from None
    finally:
        source.close()
    return images


def encode_tiles(
    document: Document, encoder: VisualEncoder | None, settings: Settings
) -> dict[tuple[int, int], np.ndarray]:
    """The visual vectors of every tile of ``document``: ``(dim,)`` or ``(n_tokens, dim)`` each."""
    if encoder is None:
        return {}
    images = tile_images(document, settings)
    keys = list(images)
    vectors = encoder.encode_images([images[key] for key in keys])
    return dict(zip(keys, vectors))
