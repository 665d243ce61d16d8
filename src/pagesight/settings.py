"""Index settings: fixed when an index is created, stored in its catalog."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

OCR_MODES = ("auto", "always", "never")


@dataclass(frozen=True)
class Settings:
    dpi: float = 100.0  # rendering resolution of PDF pages; boxes are in pixels at this DPI
    tile_height: int = 1024  # PixelRAG's viewport-shaped tile
    viewport_width: int = 875  # web pages render at this CSS width, device scale 1 (PixelRAG's default)
    min_tail: float = 0.25  # a last sliver shorter than this fraction of a tile joins the tile above
    ocr_dpi: float = 150.0  # pages without a usable text layer are OCRed at this resolution
    dense_model: str | None = "minilm-l6-v2"  # or a fine-tuned MiniLM's folder; None: lexical only
    chunk_words: int = 120  # dense passages: words per chunk, so long pages are not truncated
    chunk_overlap: int = 20
    context_weight: int = 3  # BM25: each tile also holds its document's title and name this many times
    visual_encoder: str | None = None  # a visual encoder by registry name (pagesight.encode.visual)
    visual_model: str | None = None  # its hub id or local folder; None: the family's default checkpoint
    visual_adapter: str | None = None  # a PEFT LoRA adapter applied on top of it
    visual_index: str = (
        "ivf"  # ANN structure of the visual vectors (flat, ivf, hnsw, ivfpq); exact while small
    )
    layout: bool = False  # detect tables and figures (read/layout.py), index them as their own units

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Settings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def cache_dir() -> Path:
    """Where pagesight keeps derived files (model exports, converted office files): $PAGESIGHT_CACHE,
    else the XDG cache."""
    if os.environ.get("PAGESIGHT_CACHE"):
        return Path(os.environ["PAGESIGHT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pagesight"
