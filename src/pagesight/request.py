"""What a search and an answer are asked with: one frozen, self-validating request each.

``SearchRequest`` holds every option of a text search and ``AskRequest`` adds those of an answer,
each field with its one default, its limits and its help (``Spec``). The front-ends are adapters
over these fields: the CLI's flags (``cli/``), the HTTP API's query parameters and body
(``serve/``), the MCP tools' parameters (``serve/mcp.py``) are derived from them, and an eval
configuration is a name and a request (``eval/harness.py``). A new option is one field here.
``Index.search`` and ``Index.ask`` take a request, or a query and the fields as keywords.

A request checks itself when made: a value out of range or not among the choices raises
``PagesightError`` naming the field. What depends on the index (a mode it has no vectors for, a
document it does not hold) is checked by the search.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pagesight.choices import (
    ACROSS_ALPHA,
    COORDINATES,
    DEFAULT_ALPHA,
    DEFAULT_DOCUMENT_WEIGHT,
    DEFAULT_VISUAL_WEIGHT,
    INPUTS,
    LANGUAGES,
    MODEL_ALPHA,
    STRATEGIES,
    TOKEN_MODELS,
)
from pagesight.errors import PagesightError
from pagesight.spec import Spec, check, label, option, spec, value_type  # noqa: F401 (the requests' own)

MODES = ("lexical", "dense", "visual", "hybrid")
FUSIONS = ("rsf", "rrf")
MAX_K = 1000
MAX_QUERY = 4000  # characters
MAX_DOCUMENTS = 1000  # documents one request may name
MAX_PAGE = 1_000_000  # a page number a request may name (a larger one is no page of any document)
MAX_TILE = 100_000  # a tile number a request may name
# MUVERA candidates or an HNSW beam a request may ask for: as many tiles as a filter's exact MaxSim
# scores (store/local/visual.py), so no request costs more than that
MAX_EFFORT = 4096
MAX_NPROBE = 65_536  # IVF cells: 4 * sqrt(n) of n = 268 M vectors


_field = option  # a request field: its default, help and limits (``spec.Spec``)


@dataclass(frozen=True)
class SearchRequest:
    """A text search: the query and how its tiles are ranked; see ``Index.search``."""

    query: str = _field("", "The question or keywords.", max_length=MAX_QUERY, http="q")
    k: int = _field(10, "Number of hits.", ge=1, le=MAX_K, flags=("-k",))
    mode: str | None = _field(
        None,
        "Retrievers: lexical, dense, visual or hybrid (default: hybrid when the index has vectors).",
        choices=MODES,
    )
    fusion: str = _field(
        "rsf", "Hybrid fusion: relative score (rsf) or reciprocal rank (rrf).", choices=FUSIONS
    )
    alpha: float | None = _field(
        None,
        f"Fusion: weight of the dense side against BM25 (default: {DEFAULT_ALPHA:g} with rsf; with the "
        f"multilingual models {MODEL_ALPHA['multilingual']:g}, or {ACROSS_ALPHA['multilingual']:g} when most "
        "of the dense run's first pages are in another language than the question; with rrf every run "
        "weighs the same).",
        ge=0,
        le=1,
    )
    visual_weight: float | None = _field(
        None,
        "Fusion: weight of the visual run, when the index has one; the text runs share the rest "
        f"(default: {DEFAULT_VISUAL_WEIGHT:g} with rsf; with rrf every run weighs the same).",
        ge=0,
        le=1,
    )
    rrf_k: float = _field(60.0, "Reciprocal rank fusion: the constant added to each rank.", ge=1, le=1000)
    document_weight: float | None = _field(
        None,
        "Weight of a hit's document score (its best pages) beside its own; 0: pages alone (default: "
        f"{DEFAULT_DOCUMENT_WEIGHT:g}; with an image searched alone 0, its best match being the page it shows).",
        ge=0,
        le=100,
    )
    doc_ids: tuple[str, ...] | None = _field(
        None, "Only these documents.", flags=("--doc",), http="doc", max_length=MAX_DOCUMENTS
    )
    where: str | None = _field(
        None,
        "Only documents whose fields pass, e.g. 'type = pdf and year >= 2020 and path ^= reports/'.",
        max_length=MAX_QUERY,
    )
    language: str | None = _field(
        None,
        "The question's language: en, fr, de, es, it or pt, what BM25 reads it in and, with a multilingual "
        "model, what the fusion compares the dense run's first pages with (default: told from the "
        "question; BM25 reads it in a language of the index's pages, else English).",
        choices=tuple(LANGUAGES),
    )
    candidates: int = _field(100, "Tiles each retriever ranks before fusion.", ge=1, le=1000)
    ef: int | None = _field(
        None,
        "Late-interaction visual vectors (MUVERA): candidates found by their encodings and re-scored "
        "by exact MaxSim (default 512; on Qdrant, those prefetched by their mean vector).",
        ge=1,
        le=MAX_EFFORT,
    )
    nprobe: int | None = _field(
        None,
        "IVF indexes (dense parts of over 100,000 chunks, visual vectors of an ivf index): cells "
        "visited a query (default: the index's, 128 dense, 32 visual); not on Qdrant, which has none.",
        ge=1,
        le=MAX_NPROBE,
    )
    ef_search: int | None = _field(
        None,
        "HNSW indexes (visual vectors of an hnsw index, Qdrant's on a server): the search's beam width "
        "(default: the index's, 128 here).",
        ge=1,
        le=MAX_EFFORT,
    )
    ranker: bool = _field(
        True,
        "Hybrid text search: reorder the first hits by the learned ranker (headings, the question's "
        "lines, figures; search.ranking).",
        flags=("--ranker/--no-ranker",),
    )
    ranker_file: str | None = _field(
        None,
        "The learned ranker: a file fitted on your own judged questions (pagesight fit-ranker); "
        "default: the packaged one.",
        served=False,
    )
    rerank: str | None = _field(
        None, "Rerank the first-stage hits: cross-encoder, vlm, vlm-openai or a visual encoder's name."
    )
    rerank_model: str | None = _field(
        None,
        "The reranker's model: hub id or folder (cross-encoder: what pagesight train wrote).",
        served=False,
    )
    rerank_candidates: int = _field(50, "How many first-stage hits the reranker scores.", ge=1, le=1000)

    def __post_init__(self) -> None:
        if self.doc_ids is not None and not isinstance(self.doc_ids, tuple):
            object.__setattr__(self, "doc_ids", tuple(self.doc_ids) if self.doc_ids else None)
        for f in dataclasses.fields(self):
            check(f.name, getattr(self, f.name), spec(f))
        if self.rerank_model is not None and self.rerank is None:
            raise PagesightError("rerank_model needs rerank")
        if self.ranker_file is not None and not self.ranker:
            raise PagesightError("ranker_file needs the ranker on")
        if self.where is not None:
            from pagesight.where import parse

            parse(self.where)  # a malformed filter is refused with the request, naming its token

    def replace(self, **changes: Any) -> SearchRequest:
        """This request with ``changes``, checked again."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def given(cls, query: str | SearchRequest, **options: Any) -> SearchRequest:
        """A request of this kind: ``query`` itself (a request) or made from it, with ``options``
        (None values left out) over its fields; another kind's request gives the fields both have."""
        given = {name: value for name, value in options.items() if value is not None}
        if not isinstance(query, SearchRequest):
            return cls(query=query, **given)
        if not isinstance(query, cls):
            names = {f.name for f in dataclasses.fields(cls)}
            given = {
                **{f.name: getattr(query, f.name) for f in dataclasses.fields(query) if f.name in names},
                **given,
            }
            return cls(**given)
        return query.replace(**given) if given else query

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["doc_ids"] = list(self.doc_ids) if self.doc_ids is not None else None
        return data

    def search_request(self) -> SearchRequest:
        """The search part of this request (itself for a ``SearchRequest``)."""
        if type(self) is SearchRequest:
            return self
        names = {f.name for f in dataclasses.fields(SearchRequest)}
        return SearchRequest(**{name: getattr(self, name) for name in names})


@dataclass(frozen=True)
class AskRequest(SearchRequest):
    """A question answered from the best tiles with citations; see ``Index.ask``. The search
    fields choose the tiles the reader is given (or, with ``agent``, each search the reader makes)."""

    query: str = _field("", "The question.", max_length=MAX_QUERY, label="question")
    k: int = _field(
        5, "Tiles given to the reader (with agent: tiles a search).", ge=1, le=MAX_K, flags=("-k",)
    )
    reader: str = _field(
        "extractive", "Reader: extractive (offline default), openai, transformers, or a registered one."
    )
    model: str | None = _field(None, "Reader model: hub id, local folder, or the name an endpoint serves.")
    max_tokens: int | None = _field(
        None, "Model readers: the longest answer, in tokens (default 512).", ge=1, le=8192
    )
    inputs: str | None = _field(
        None,
        "Model readers: what they read: images (default), text (the tiles' text), images+text, or "
        "auto (each tile's text where its text layer covers it, with no table or figure on it, its "
        "image otherwise).",
        choices=INPUTS,
    )
    compression: float = _field(
        1.0, "Tile images shrink by sqrt(c) per side.", ge=1, le=64, flags=("-c", "--compression")
    )
    strategy: str = _field(
        "auto",
        "For one-image readers: concat (pages side by side) or weighted; all: every tile.",
        choices=STRATEGIES,
    )
    token_model: str = _field(
        "qwen2-vl", "Whose image tokens the context is counted in.", choices=TOKEN_MODELS
    )
    coordinates: str | None = _field(
        None,
        "Model readers: the scale of the boxes the model cites: pixels (of the image as it saw it), "
        "norm1000 (0..1000 across each side) or norm1 (0..1); default: the model family's (Qwen2.5-VL "
        "pixels; Qwen2-VL, Qwen3-VL and OpenAI-compatible endpoints norm1000).",
        choices=COORDINATES,
    )
    number_from: int | None = _field(
        None,
        "Model readers: the number of the first image (or passage) in the prompt and its citations: "
        "1 (default) or 0, as ViDoRe V3's prompt.",
        ge=0,
        le=1,
    )
    min_support: float | None = _field(
        None,
        "Extractive reader: decline when the probability that its answer is supported by the pages "
        "is under this (default: the fitted model's threshold, 0.77); 0: never decline.",
        ge=0,
        le=1,
    )
    agent: bool = _field(False, "Model readers: the reader searches itself, then answers.")
    max_searches: int = _field(
        3, "With agent: the most searches it may make (MoNaCo's agent makes up to 20).", ge=1, le=20
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.agent and self.number_from == 0:
            raise PagesightError(
                "number_from 0 is for readers given the tiles: an agent numbers the tiles it reads "
                "from 1, image 0 being the question's"
            )

    def reader_options(self) -> dict:
        """The options a reader named by ``reader`` is built with (``answer.make_reader``)."""
        options = {name: getattr(self, name) for name in READER_OPTIONS}
        return {key: value for key, value in options.items() if value is not None}


# the fields of an ``AskRequest`` a reader is built with
READER_OPTIONS = ("model", "max_tokens", "inputs", "coordinates", "number_from", "min_support")


# The search fields that rank by the question's text or fuse runs: an image searched alone has
# its visual run alone, so none of them applies (ImageSearchRequest refuses them, by name).
TEXT_ONLY = (
    "fusion",
    "alpha",
    "visual_weight",
    "rrf_k",
    "language",
    "ranker",
    "ranker_file",
    "rerank",
    "rerank_model",
    "rerank_candidates",
)


@dataclass(frozen=True)
class ImageSearchRequest(SearchRequest):
    """A search by a picture: ``image`` (a PIL image, or its ``region``, x0, y0, x1, y1 in its
    pixels) with every field of a ``SearchRequest``; see ``Index.search``. With a ``query``, a
    question about the picture: the visual run searches the picture (with the question when the
    encoder embeds both as one query), the text runs the question, fused as ever. Without one, the
    picture alone: the visual run ranks it (``mode`` visual), and a field that only ranks text or
    fuses runs (``TEXT_ONLY``) is refused, naming it, rather than ignored. Each front-end takes
    the picture its own way (a file, an upload, base64 text) and the rest as a search's fields."""

    image: Any = _field(None, "The picture searched by.", served=False)
    region: tuple[float, float, float, float] | None = _field(
        None, "The part of the picture searched by: x0, y0, x1, y1 in its pixels.", served=False
    )

    def __post_init__(self) -> None:
        if self.image is None:
            raise PagesightError(
                "a region is a part of a query image: give the image too"
                if self.region is not None
                else "an image search needs the image"
            )
        if self.region is not None:
            if len(self.region) != 4:
                raise PagesightError(f"region must be x0, y0, x1, y1, got {list(self.region)}")
            object.__setattr__(self, "region", tuple(float(v) for v in self.region))
        super().__post_init__()
        if self.query.strip():
            return
        if self.mode not in (None, "visual"):
            raise PagesightError(
                f"mode {self.mode}: an image alone is searched by its visual run (mode visual); "
                "give a query too to search by both"
            )
        default = SearchRequest()
        given = [name for name in TEXT_ONLY if getattr(self, name) != getattr(default, name)]
        if given:
            raise PagesightError(
                f"an image alone is searched by its visual run, without {', '.join(given)} (options of "
                "a text search); give a query too to search by both"
            )

    @classmethod
    def of(
        cls, request: SearchRequest, image: Any, region: tuple[float, float, float, float] | None = None
    ) -> ImageSearchRequest:
        """``request``'s search fields with ``image`` (and its ``region``)."""
        names = {f.name for f in dataclasses.fields(SearchRequest)}
        return cls(**{name: getattr(request, name) for name in names}, image=image, region=region)

    def search_request(self) -> ImageSearchRequest:
        """Itself: its search is by the picture."""
        return self

    def to_dict(self) -> dict:
        """Its fields, the picture as its size."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["doc_ids"] = list(self.doc_ids) if self.doc_ids is not None else None
        data["image"] = list(self.image.size) if hasattr(self.image, "size") else None
        data["region"] = list(self.region) if self.region is not None else None
        return data
