"""The choices and defaults that the requests (``request.py``) and the stages share: a leaf module,
importing nothing of pagesight, so that the request model and the stages it names both import it
and every import points down.
"""

from __future__ import annotations

from pathlib import Path

# read: the languages a page or a question is analysed in, code -> the name of its Snowball
# stemmer and bm25s stop-word list
LANGUAGES = {
    "en": "english",
    "fr": "french",
    "de": "german",
    "es": "spanish",
    "it": "italian",
    "pt": "portuguese",
}

# search: fusion and document scores
# Weight of the dense side in relative score fusion. Swept on IRPAPERS, financebench-dev and
# mmlongbench-dev (BENCHMARKS.md, "Text vectors"): with MiniLM or its static distillation the best
# hybrid keeps BM25 dominant and lets dense break its ties.
DEFAULT_ALPHA = 0.15
# ... and for a dense model whose own sweep put it elsewhere: the multilingual models rank well
# enough alone that they take half (BENCHMARKS.md, "Across languages": alpha .5 beats .15 in every
# cross-language cell and within each language) ...
MODEL_ALPHA = {"multilingual": 0.5, "multilingual-use": 0.5, "multilingual-e5-use": 0.5}
# ... and more across languages: a question whose dense run's head (its first ``LANGUAGE_HEAD``
# tiles) is mostly in other languages than its own is matched by BM25 only through the words
# languages share, so the dense side weighs this (``search.fusion.language_alpha``; BENCHMARKS.md,
# "Within and across languages": at .7 every cross-language cell of the pair reaches .75, while
# within a language .5 ranks as the default does or better).
ACROSS_ALPHA = {"multilingual": 0.7, "multilingual-use": 0.7, "multilingual-e5-use": 0.7}
LANGUAGE_HEAD = 10


def default_alpha(dense_model: str | None, across: bool = False) -> float:
    """Relative score fusion's dense weight for an index whose dense model is ``dense_model``, for a
    question matched within its language or, ``across``, in others (``ACROSS_ALPHA``)."""
    if across and dense_model in ACROSS_ALPHA:
        return ACROSS_ALPHA[dense_model]
    return MODEL_ALPHA.get(dense_model or "", DEFAULT_ALPHA)


# Weight of the visual side in relative score fusion when the index has visual vectors; the text
# side (BM25 and dense, split by alpha) has the rest. IRPAPERS' multimodal hybrid weighs its text
# and image runs evenly; no visual model can be measured here to tune it.
DEFAULT_VISUAL_WEIGHT = 0.5
DEFAULT_DOCUMENT_WEIGHT = 1.0  # a hit's document score (its best pages) beside its own

# answer: what a model reader looks at (auto: each tile's text where its text layer covers it, its
# image otherwise: ``answer/inputs.py``), how image tokens are counted, VisRAG's ways to read tiles
INPUTS = ("images", "text", "images+text", "auto")
TOKEN_MODELS = ("qwen2-vl", "openai-high")
STRATEGIES = ("auto", "all", "concat", "weighted")

# eval: where a dataset's index takes its pages' text: their text layer or OCR, or the dataset's
# own transcriptions (texts.jsonl, indexed through ``IngestOptions.transcripts``)
TEXT_FROM = ("documents", "dataset")

# the scale of the boxes a model reader cites: pixels of the image as the model saw it, 0..1000 or
# 0..1 across each side of the image
COORDINATES = ("pixels", "norm1000", "norm1")


# search: the thesauri that ship with pagesight (``search/thesauri/<name>.txt``, ``Settings.thesaurus``)
THESAURI = Path(__file__).parent / "search" / "thesauri"


def thesauri() -> list[str]:
    """The names of the thesauri that ship with pagesight."""
    return sorted(path.stem for path in THESAURI.glob("*.txt"))
