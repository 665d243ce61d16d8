"""ColSmol (vidore/colSmol-256M, -500M): Idefics3 / SmolVLM with a 128-dim projection per token,
through colpali-engine.

Images keep their aspect ratio: the longest edge is resized to the processor's ``size`` (a multiple
of its ``max_image_size`` tile), the page is cut into tiles of that size, and a downscaled copy of
the whole page follows; each tile becomes ``image_seq_len`` vectors. ``max_pixels`` bounds the
longest edge (to ``sqrt(max_pixels)``, rounded down to whole tiles, at least one).

The language model is causal, with rotary positions: a padded query or page attends only to its
own real tokens, so its vectors do not depend on its batch.

Its similarity maps (``search.explain``) put each tile's tokens back in their place on the page.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from pagesight.encode.visual.late_interaction import LateInteractionEncoder
from pagesight.errors import PagesightError


def set_longest_edge(image_processor: Any, max_pixels: int | None) -> int:
    """Bound the longest edge an Idefics3-style image processor resizes a page to, in whole tiles
    (``max_image_size``); returns the pixels of the largest image it then keeps (a square)."""
    tile = int(image_processor.max_image_size["longest_edge"])
    edge = int(image_processor.size["longest_edge"])
    if max_pixels is not None:
        edge = max(tile, math.isqrt(max_pixels) // tile * tile)
        image_processor.size = {**dict(image_processor.size), "longest_edge": edge}
    return edge * edge


class ColSmolEncoder(LateInteractionEncoder):
    name: ClassVar[str] = "colsmol"
    default_model: ClassVar[str | None] = "vidore/colSmol-256M"
    model_class: ClassVar[str] = "ColIdefics3"
    processor_class: ClassVar[str] = "ColIdefics3Processor"

    def _configure_images(self, max_pixels: int | None) -> int:
        return set_longest_edge(self.processor.image_processor, max_pixels)

    def _patch_layout(self, image: Image.Image, tokens: int) -> tuple[int, int, np.ndarray]:
        """The page's tiles side by side, each a square of ``image_seq_len`` tokens in raster order
        (the connector's pixel shuffle), tiles in raster order; the downscaled global view, whose
        tokens follow the tiles', is left out of the map (a page not cut into tiles is its global
        view alone)."""
        found = self.processor.image_processor(images=[image], return_row_col_info=True)
        tile_rows, tile_columns = int(found["rows"][0][0]), int(found["cols"][0][0])
        per_view = int(self.processor.image_seq_len)
        side = math.isqrt(per_view)
        tiles = tile_rows * tile_columns
        if side * side != per_view or tokens != (tiles + 1 if tiles else 1) * per_view:
            raise PagesightError(
                f"visual encoder '{self.name}': {tokens} image tokens for {tile_rows}x{tile_columns} "
                f"tiles of {per_view} and a global view"
            )
        if not tiles:
            return side, side, np.arange(per_view)
        rows, columns = np.divmod(np.arange(tile_rows * side * tile_columns * side), tile_columns * side)
        tile = (rows // side) * tile_columns + columns // side
        return tile_rows * side, tile_columns * side, tile * per_view + (rows % side) * side + columns % side
