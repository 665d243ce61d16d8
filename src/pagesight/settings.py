"""Index settings: fixed when an index is created, stored in its catalog; each declared once with
its default, limits and help (``spec.Spec``), from which ``pagesight ingest``'s options are made."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from pagesight.choices import thesauri
from pagesight.errors import PagesightError, SettingsConflict
from pagesight.spec import check_fields, model_reference, option

OCR_MODES = ("auto", "always", "never")
VISUAL_INDEXES = ("flat", "ivf", "hnsw", "ivfpq")  # vectors.ann.KINDS, without importing FAISS
OCR_ENGINES = ("rapidocr", "tesseract")  # text.ocr
MULTI_VECTOR_STORAGES = ("float16", "int8", "binary")  # vectors.quantize.STORAGES, without numpy
MAX_MUVERA_DIM = 1 << 16  # a page's MUVERA encoding: 256 KB in float32 (the default's is 5,120)


def _model_reference(model: str, name: str) -> str:
    """A model named on a command line or in a form: a local folder as its absolute path."""
    return model_reference(model)


@dataclass(frozen=True)
class Settings:
    """An index's settings, each field with its one default, its limits and its help (``spec.Spec``):
    ``Index.open``, ``pagesight ingest`` (the fields its ``Spec`` offers, as options that set a new
    index) and eval's indexes take them."""

    dpi: float = option(100.0, "Rendering resolution of PDF pages; boxes are in pixels at this DPI.")
    tile_height: int = option(1024, "Tile height in pixels (PixelRAG's viewport-shaped tile).", ge=16)
    viewport_width: int = option(
        875, "Web pages: browser viewport width in CSS pixels, at device scale 1 (PixelRAG's).", ge=16
    )
    min_tail: float = option(
        0.25, "A last sliver shorter than this share of a tile joins the tile above.", ge=0, le=1, cli=False
    )
    ocr_dpi: float = option(
        150.0, "Pages without a usable text layer are OCRed at this resolution.", cli=False
    )
    ocr_engine: str = option(
        "tesseract",
        "OCR engine: tesseract, or rapidocr (3-4x slower, a little better at rank 1; text.ocr).",
        choices=OCR_ENGINES,
    )
    dense_model: str | None = option(
        "minilm-static",
        "The text model: minilm-static (MiniLM distilled, fast), minilm-l6-v2 (slower, a little "
        "better), multilingual, multilingual-use or multilingual-e5-use (the 'multilingual' extra: "
        "questions in another language than the pages; e5-small, the universal sentence encoder, or both), "
        "a MiniLM fine-tuned by pagesight train "
        "(its dense/ folder), or any sentence-transformers model's folder or hub id; None: lexical only (--no-dense).",
        read=_model_reference,
        toggle=("--dense/--no-dense", "Also embed text (minilm-static) for dense and hybrid search."),
    )
    chunk_words: int = option(
        120, "Dense passages: words per chunk, so long pages are not truncated.", ge=1, cli=False
    )
    chunk_overlap: int = option(20, "Dense passages: words each chunk shares with the last.", ge=0, cli=False)
    context_weight: int = option(
        3, "BM25: each tile also holds its document's title and name this many times.", ge=0, cli=False
    )
    heading_weight: int = option(
        4,
        "BM25: how many times each page's heading (text.titles.page_headings) counts beside its text.",
        ge=0,
    )
    table_weight: int = option(
        0,
        "BM25: each table cell's column heading and row label are indexed together this many times "
        "(text.tables.cell_text), so a question naming a row and a year meets that cell; 0: off "
        "(on financebench-dev it helped within documents and cost a little across them).",
        ge=0,
    )
    period_years: bool = option(True, "BM25: read FY2018, 2023Q2 and the like as their years too.")
    phrases: bool = option(
        True, "BM25: pairs of neighbouring words are terms too, so phrases outrank scattered words."
    )
    term_weights: bool = option(
        True,
        "BM25: weigh a question's words by how they cluster on the collection's pages, so its subject "
        "counts over its instructions.",
    )
    thesaurus: str | None = option(
        "finance", "BM25: expand questions from this thesaurus (finance), or none.", none="none"
    )
    dense_context: bool = option(
        True, "Dense chunks are encoded after the line naming their document.", cli=False
    )
    visual_encoder: str | None = option(
        None,
        "Visual encoder embedding every tile image: colqwen2, dse, clip, ...; visrag-ret, jina-v4 and "
        "nemotron-colembed run their model's own code (--trust-remote-code).",
        flags=("--encoder",),
    )
    visual_model: str | None = option(
        None,
        "The visual encoder's hub id or local folder (default: its family's checkpoint).",
        flags=("--encoder-model",),
        read=_model_reference,
    )
    visual_adapter: str | None = option(
        None, "A LoRA adapter on the visual encoder.", flags=("--encoder-adapter",), read=_model_reference
    )
    visual_index: str | None = option(
        None,
        "ANN structure of the visual vectors, exact while small; default: hnsw for late interaction's "
        "MUVERA encodings (IVF keeps .39 of exact MaxSim's top 10 at 20,000 pages, HNSW .95), ivf for "
        "one vector a page.",
        choices=VISUAL_INDEXES,
    )
    layout: bool = option(
        False,
        "Index tables and figures, with their captions, as units (text/layout.py).",
        flags=("--layout",),
    )
    multi_vector_storage: str = option(
        "float16",
        "Late-interaction token vectors searched as float16, or as int8 or 1-bit codes rescored with "
        "the float16 kept on disk (vectors.quantize).",
        choices=MULTI_VECTOR_STORAGES,
    )
    # Qdrant compares token vectors by its own MAX_SIM and reads none of the MUVERA encoding.
    muvera_reps: int = option(
        20,
        "Late-interaction token vectors: repetitions of their MUVERA encoding (vectors.muvera), which "
        "finds the candidates MaxSim ranks; fewer: smaller and faster, lower recall (IRPAPERS: 10).",
    )
    muvera_k_sim: int = option(4, "MUVERA's encoding: 2**k_sim buckets a repetition (1 to 16).", cli=False)
    muvera_d_proj: int = option(
        16,
        "MUVERA's encoding: each bucket projected to this many dimensions (the encoder's own when "
        "it has fewer).",
        cli=False,
    )

    def __post_init__(self):
        check_fields(self, "settings: ")
        if self.dpi <= 0 or self.ocr_dpi <= 0:
            raise PagesightError(
                f"settings: dpi and ocr_dpi must be positive, got {self.dpi:g} and {self.ocr_dpi:g}"
            )
        if self.visual_encoder is None and (self.visual_model or self.visual_adapter):
            raise PagesightError("settings: visual_model and visual_adapter need a visual_encoder")
        if self.thesaurus is not None and self.thesaurus not in thesauri():
            raise PagesightError(
                f"settings: unknown thesaurus '{self.thesaurus}' (known: {', '.join(thesauri())})"
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

    def visual_structure(self, multi_vector: bool) -> str:
        """The ANN structure of the visual vectors: ``visual_index``, or when unset the one measured
        for the encoder's kind, HNSW over late interaction's MUVERA encodings, IVF over one vector
        a page (BENCHMARKS.md, "Trade-off knobs")."""
        return self.visual_index or ("hnsw" if multi_vector else "ivf")

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
    "table_weight": 0,
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
