"""Similarity maps: which patches of a tile matched a query, for visual hits.

A late-interaction encoder (ColPali, ColQwen, ColSmol, ColModernVBert) gives a page one vector per
image patch and a query one per token; MaxSim adds, for each query token, its best patch. Seen from
the page's side, each patch's best similarity to any of the query's tokens shows where the page
answered: the map colpali-engine's interpretability module draws per token, taken at its maximum
over the tokens. CLIP, a single-vector encoder, projects its patches into its vectors' space as it
does its class token: each patch's similarity to the query's vector. ``Index.explain`` computes it
for a tile (``search --explain DIR``, ``GET /api/tile?explain=``, the web page's hit view), drawn
over the part of the tile the patches cover as a heat map with its strongest patch outlined. Text
hits keep their evidence boxes instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from pagesight.errors import PagesightError
from pagesight.records import Box

HEAT = (220, 30, 30)  # the colour of a strong match
OPACITY = 0.6  # of the strongest patch's colour over the tile


@dataclass
class SimilarityMap:
    """A tile's patch grid of similarities to a query (``vectors.maxsim.best_similarity``), the tile, and the part
    of it the grid covers (None: all of it; CLIP covers the square it crops from the centre)."""

    grid: np.ndarray  # (rows, columns): row 0 is the top of the covered part
    image: Image.Image  # the tile, as the encoder read it
    covers: Box | None = None

    @property
    def strongest(self) -> tuple[int, int]:
        """(row, column) of the best-matching patch."""
        row, column = np.unravel_index(int(np.argmax(self.grid)), self.grid.shape)
        return int(row), int(column)

    @property
    def box(self) -> Box:
        """The part of the tile image the grid covers, in its pixels."""
        return self.covers or (0.0, 0.0, float(self.image.width), float(self.image.height))

    def cell_box(self, row: int, column: int) -> Box:
        """A patch's box in the tile image's pixels."""
        rows, columns = self.grid.shape
        left, top, right, bottom = self.box
        width, height = right - left, bottom - top
        return (
            left + column * width / columns,
            top + row * height / rows,
            left + (column + 1) * width / columns,
            top + (row + 1) * height / rows,
        )

    def draw(self) -> Image.Image:
        """The tile with the map over the part it covers: each patch tinted by its similarity (the
        weakest not at all, the strongest at ``OPACITY``), the strongest outlined."""
        low, high = float(self.grid.min()), float(self.grid.max())
        scaled = (self.grid - low) / (high - low) if high > low else np.zeros_like(self.grid)
        left, top, right, bottom = (round(v) for v in self.box)
        cells = Image.fromarray(np.uint8(255 * OPACITY * scaled)).resize(
            (right - left, bottom - top), Image.NEAREST
        )
        alpha = Image.new("L", self.image.size, 0)
        alpha.paste(cells, (left, top))
        tile = self.image.convert("RGB")
        drawn = Image.composite(Image.new("RGB", tile.size, HEAT), tile, alpha)
        outline = ImageDraw.Draw(drawn)
        outline.rectangle(self.cell_box(*self.strongest), outline=HEAT, width=max(2, round(tile.width / 300)))
        return drawn


def explain(encoder, image: Image.Image, query: str, location: str) -> SimilarityMap:
    """The similarity map of ``query`` over the tile ``image`` by ``encoder`` (the visual encoder
    of the index at ``location``; None: it has none), refused in one line by one that draws none."""
    if encoder is None or not hasattr(encoder, "patch_similarity"):
        named = f"visual encoder '{encoder.name}'" if encoder else "no visual encoder"
        raise PagesightError(
            f"{location}: {named}; similarity maps need a late-interaction one "
            "(ingest --encoder colqwen2, colpali, colsmol) or clip"
        )
    covers = encoder.patch_box(image) if hasattr(encoder, "patch_box") else None
    return SimilarityMap(encoder.patch_similarity(image, query), image, covers)


def draws_maps(name: str | None) -> bool:
    """Whether the visual encoder ``name`` (None: none) draws similarity maps, without loading it."""
    from pagesight.encode.visual import ENCODERS

    return name is not None and hasattr(ENCODERS.load(name), "patch_similarity")


def query_image(name: str | None) -> str | None:
    """How the visual encoder ``name`` searches a question's picture, without loading it: "joint
    with text" (one query of both), "image alone", or None with no visual encoder."""
    from pagesight.encode.visual import ENCODERS, joint_queries

    if name is None:
        return None
    return "joint with text" if joint_queries(ENCODERS.load(name)) else "image alone"
