"""Index settings: fixed when an index is created, stored in its catalog."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from pagesight.errors import PagesightError, SettingsConflict

OCR_MODES = ("auto", "always", "never")
VISUAL_INDEXES = ("flat", "ivf", "hnsw", "ivfpq")  # vectors.ann.KINDS, without importing FAISS
OCR_ENGINES = ("rapidocr", "tesseract")  # read.ocr
MULTI_VECTOR_STORAGES = ("float16", "int8", "binary")  # vectors.quantize.STORAGES, without numpy
MAX_MUVERA_DIM = 1 << 16  # a page's MUVERA encoding: 256 KB in float32 (the default's is 5,120)


@dataclass(frozen=True)
class Settings:
    dpi: float = 100.0  # rendering resolution of PDF pages; boxes are in pixels at this DPI
    tile_height: int = 1024  # PixelRAG's viewport-shaped tile
    viewport_width: int = 875  # web pages render at this CSS width, device scale 1 (PixelRAG's default)
    min_tail: float = 0.25  # a last sliver shorter than this fraction of a tile joins the tile above
    ocr_dpi: float = 150.0  # pages without a usable text layer are OCRed at this resolution
    ocr_engine: str = "tesseract"  # or "rapidocr": slower, a little better at rank 1 (read.ocr)
    # minilm-static (MiniLM distilled, fast), minilm-l6-v2, or a fine-tuned MiniLM's folder;
    # None: lexical only
    dense_model: str | None = "minilm-static"
    chunk_words: int = 120  # dense passages: words per chunk, so long pages are not truncated
    chunk_overlap: int = 20
    context_weight: int = 3  # BM25: each tile also holds its document's title and name this many times
    heading_weight: int = 4  # BM25: ... and its page's heading (read.titles.page_headings) this many
    period_years: bool = True  # BM25: "FY2018" and "2023Q2" also read as their years (encode.lexical)
    phrases: bool = True  # BM25: pairs of neighbouring terms are terms too (encode.lexical.with_phrases)
    term_weights: bool = True  # BM25: a question's words weigh by their burstiness (encode.lexical)
    thesaurus: str | None = "finance"  # BM25 queries expanded from it (search.expansion); None: as asked
    dense_context: bool = True  # dense chunks are encoded after the line naming their document
    visual_encoder: str | None = None  # a visual encoder by registry name (pagesight.encode.visual)
    visual_model: str | None = None  # its hub id or local folder; None: the family's default checkpoint
    visual_adapter: str | None = None  # a PEFT LoRA adapter applied on top of it
    visual_index: str = (
        "ivf"  # ANN structure of the visual vectors (flat, ivf, hnsw, ivfpq); exact while small
    )
    layout: bool = False  # detect tables and figures (read/layout.py), index them as their own units
    # late-interaction token vectors searched as float16, or as int8 or 1-bit codes rescored with the
    # float16 kept on disk (vectors.quantize)
    multi_vector_storage: str = "float16"
    # late-interaction token vectors in the local store: MUVERA's encoding (vectors.muvera), whose
    # inner products find the candidates exact MaxSim ranks: repetitions, 2**k_sim buckets each,
    # each bucket projected to d_proj dimensions (the encoder's own when it has fewer); IRPAPERS
    # uses 10 repetitions. Qdrant compares token vectors by its own MAX_SIM and reads none of them.
    muvera_reps: int = 20
    muvera_k_sim: int = 4
    muvera_d_proj: int = 16

    def __post_init__(self):
        if self.dpi <= 0 or self.ocr_dpi <= 0:
            raise PagesightError(
                f"settings: dpi and ocr_dpi must be positive, got {self.dpi:g} and {self.ocr_dpi:g}"
            )
        if self.tile_height < 16 or self.viewport_width < 16:
            raise PagesightError(
                f"settings: tile_height and viewport_width must be at least 16 pixels, got "
                f"{self.tile_height} and {self.viewport_width}"
            )
        if self.visual_encoder is None and (self.visual_model or self.visual_adapter):
            raise PagesightError("settings: visual_model and visual_adapter need a visual_encoder")
        if self.context_weight < 0 or self.heading_weight < 0:
            raise PagesightError(
                f"settings: context_weight and heading_weight must be 0 or more, got "
                f"{self.context_weight} and {self.heading_weight}"
            )
        if self.thesaurus is not None:
            from pagesight.search.expansion import thesauri

            if self.thesaurus not in thesauri():
                raise PagesightError(
                    f"settings: unknown thesaurus '{self.thesaurus}' (known: {', '.join(thesauri())})"
                )
        if self.ocr_engine not in OCR_ENGINES:
            raise PagesightError(
                f"settings: ocr_engine must be one of {', '.join(OCR_ENGINES)}, got '{self.ocr_engine}'"
            )
        if self.multi_vector_storage not in MULTI_VECTOR_STORAGES:
            raise PagesightError(
                f"settings: multi_vector_storage must be one of {', '.join(MULTI_VECTOR_STORAGES)}, "
                f"got '{self.multi_vector_storage}'"
            )
        if self.visual_index not in VISUAL_INDEXES:
            raise PagesightError(
                f"settings: visual_index must be one of {', '.join(VISUAL_INDEXES)}, got '{self.visual_index}'"
            )
        if min(self.muvera_reps, self.muvera_d_proj) < 1 or not 1 <= self.muvera_k_sim <= 16:
            raise PagesightError(
                f"settings: muvera_reps and muvera_d_proj must be 1 or more and muvera_k_sim from 1 to 16, "
                f"got {self.muvera_reps}, {self.muvera_d_proj} and {self.muvera_k_sim}"
            )
        encoding = self.muvera_reps * (1 << self.muvera_k_sim) * self.muvera_d_proj
        if encoding > MAX_MUVERA_DIM:
            raise PagesightError(
                f"settings: MUVERA encodings of muvera_reps x 2**muvera_k_sim x muvera_d_proj = {encoding:,} "
                f"dimensions; at most {MAX_MUVERA_DIM:,}"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Settings:
        """Stored settings; a setting an index was made before is what that index did then."""
        known = {f.name for f in fields(cls)}
        return cls(**{**_BEFORE, **{k: v for k, v in data.items() if k in known}})

    @classmethod
    def given(cls, chosen: Settings | Mapping[str, Any] | None) -> Settings:
        """The settings of a new index: ``chosen`` whole, or the named fields with defaults for the rest."""
        if chosen is None or isinstance(chosen, Settings):
            return chosen or cls()
        _check_names(chosen)
        return cls(**chosen)


def _check_names(chosen: Mapping[str, Any]) -> None:
    known = [f.name for f in fields(Settings)]
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise PagesightError(f"unknown index settings: {', '.join(unknown)} (known: {', '.join(known)})")


def check_settings(location: str, stored: Settings, chosen: Settings | Mapping[str, Any] | None) -> None:
    """Refuse to open an existing index with settings it was not made with: ``chosen`` whole (every
    field compared) or a mapping of the fields the caller cares about (only those compared)."""
    if chosen is None:
        return
    asked = chosen.to_dict() if isinstance(chosen, Settings) else dict(chosen)
    _check_names(asked)  # the fields given alone need not make whole settings: they are compared
    conflicts = {
        name: (getattr(stored, name), value)
        for name, value in asked.items()
        if getattr(stored, name) != value
    }
    if conflicts:
        raise SettingsConflict(location, conflicts)


# Settings added after indexes were made, with the value that describes those indexes.
_BEFORE = {
    "dense_context": False,
    "heading_weight": 0,
    "period_years": False,
    "phrases": False,
    "term_weights": False,
    "thesaurus": None,
    "ocr_engine": "rapidocr",
}


def cache_dir() -> Path:
    """Where pagesight keeps derived files (model exports, converted office files): $PAGESIGHT_CACHE,
    else the XDG cache."""
    if os.environ.get("PAGESIGHT_CACHE"):
        return Path(os.environ["PAGESIGHT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pagesight"
