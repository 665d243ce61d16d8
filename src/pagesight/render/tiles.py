"""Cutting tall pages into viewport-shaped tiles, as PixelRAG cuts long screenshots, and shrinking
tiles for readers (PixelRAG's compression factor, its knob on image-token cost)."""

from __future__ import annotations

import math

from PIL import Image

from pagesight.records import Box


def cut_tiles(width: int, height: int, tile_height: int = 1024, min_tail: float = 0.25) -> list[Box]:
    """Pixel boxes of the horizontal tiles that cover a ``width`` x ``height`` page.

    A page no taller than ``tile_height * (1 + min_tail)`` stays one tile, and a last sliver
    shorter than ``min_tail * tile_height`` joins the tile above it rather than standing alone
    (a Letter page at 100 dpi is 1,100 px tall and is one tile, not 1,024 + 76).
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"page size must be positive, got {width}x{height}")
    if tile_height <= 0:
        raise ValueError(f"tile height must be positive, got {tile_height}")
    tops = list(range(0, height, tile_height))
    if len(tops) > 1 and height - tops[-1] < min_tail * tile_height:
        tops.pop()
    bottoms = tops[1:] + [height]
    return [(0.0, float(top), float(width), float(bottom)) for top, bottom in zip(tops, bottoms)]


def scaled_size(width: int, height: int, compression: float) -> tuple[int, int]:
    """The size of a ``width`` x ``height`` image after compression: each side over sqrt(c)."""
    if compression < 1:
        raise ValueError(f"compression must be at least 1, got {compression}")
    factor = math.sqrt(compression)
    return max(1, round(width / factor)), max(1, round(height / factor))


def downscale(image: Image.Image, compression: float) -> Image.Image:
    """``image`` with each side divided by sqrt(``compression``), Lanczos-resampled (c = 1: as is)."""
    size = scaled_size(image.width, image.height, compression)
    return image if size == image.size else image.resize(size, Image.Resampling.LANCZOS)
