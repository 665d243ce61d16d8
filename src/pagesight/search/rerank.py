"""Rerankers: a second, slower look at the first-stage hits of a search.

A reranker scores (query, candidate tile) pairs; the engine reorders the top ``candidates`` fused
hits by those scores (``Index.search(..., rerank=NAME)``, ``--rerank NAME`` on search, ask and
eval). Three kinds, chosen by name (``make_reranker``, ``register``):

- ``cross-encoder``: a sentence-transformers ``CrossEncoder`` (a hub id, a folder, or the one
  ``pagesight train --cross-encoder`` writes) reads the query with the tile's chunk that shares the
  most terms with it (``encode.dense.best_chunk``, the chunks the dense index holds);
- the name of a visual encoder (``colqwen2.5``, ``colpali``, ... or a single-vector one): the
  query and the tile images through that encoder, scored by MaxSim for late interaction, cosine
  otherwise, so an index without visual vectors can still be reranked visually;
- ``vlm``: a vision-language reader judges each tile image: the probability of "yes" against "no"
  as the first token of its answer to "does this image answer the question?", pointwise, through
  the ``transformers`` reader (the model's logits) or the ``openai`` one (the endpoint's top
  log-probabilities).
- ``jina-m0``: jina-reranker-m0 (a Qwen2-VL-2B with a scoring head, its own code: it needs
  ``trust_remote_code``) scores each (query, tile image) pair through its ``compute_score``.

A reranker that runs a model here takes the index's ``device``, and one that can run a model's own
code takes ``trust_remote_code`` (the opener's leave, ``Index.open``); neither ever comes from a request.

Each reranker keeps the size and time of its last call (``last``), which search reports.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from PIL import Image

from pagesight.errors import PagesightError
from pagesight.registry import Registry, lent

if TYPE_CHECKING:
    from pagesight.settings import Settings
    from pagesight.store.base import Catalog


@dataclass
class Candidate:
    """A first-stage hit as a reranker sees it: the tile's text, and its image on demand."""

    tile_id: int
    doc_id: str
    page: int
    tile: int
    text: str
    load_image: Callable[[], Image.Image] | None = field(default=None, repr=False)
    chunking: tuple[int, int] = (120, 20)  # the index's chunk words and overlap, for text rerankers
    # The tile's vectors as the index's visual encoder stored them, given the spec of the encoder
    # asking (``encode.visual.base``); None when the index has none in that encoder's space.
    stored_vectors: Callable[[dict], np.ndarray | None] | None = field(default=None, repr=False)

    @property
    def image(self) -> Image.Image:
        if self.load_image is None:
            raise PagesightError(f"{self.doc_id}_{self.page}: no image for this candidate")
        return self.load_image()


@runtime_checkable
class Reranker(Protocol):
    name: str
    batch_size: int
    last: dict  # candidates, batch_size, ms of the last ``score`` call

    def score(self, query: str, candidates: Sequence[Candidate]) -> list[float]:
        """One relevance score per candidate, higher is better, in the candidates' order."""
        ...


RERANKERS = Registry(
    "reranker",
    "pagesight.rerankers",
    {
        "cross-encoder": "pagesight.search.rerank:CrossEncoderReranker",
        "vlm": "pagesight.answer.reranking:VlmReranker",
        "vlm-openai": "pagesight.answer.reranking:openai_vlm",
        "jina-m0": "pagesight.search.rerank:JinaM0Reranker",
    },
)


def register(name: str, target: str) -> None:
    """Make a reranker available by name; ``target`` is ``"module:factory"``."""
    RERANKERS.register(name, target)


def make_reranker(
    name: str,
    model: str | None = None,
    device: str = "auto",
    trust_remote_code: bool = False,
    endpoint: Any = None,
    **options: Any,
) -> Reranker:
    """The reranker registered as ``name``, or visual reranking by the visual encoder ``name``,
    with ``model`` (None: its default) and ``options``, on ``device`` when it runs a model here,
    allowed to run the model's own code with ``trust_remote_code`` when it can, and calling its
    model at ``endpoint`` (``answer.endpoint.Endpoint``) when it calls one (its factory takes a
    ``device``, a ``trust_remote_code``, an ``endpoint``)."""
    from pagesight.encode.visual import ENCODERS

    if model:
        options["model"] = model
    if name in RERANKERS:
        factory = RERANKERS.load(name)
    elif name in ENCODERS:
        factory = partial(VisualReranker, name)
    else:
        factory = None
    if factory is not None:
        lends = lent(factory, device=device, trust_remote_code=trust_remote_code, endpoint=endpoint)
        return factory(**options, **lends)
    known = ", ".join(sorted(RERANKERS) + ["a visual encoder (" + ", ".join(sorted(ENCODERS)) + ")"])
    raise PagesightError(f"unknown reranker '{name}'; choose one of {known}")


def rerank_stage(
    catalog: Catalog,
    settings: Settings,
    tile_image: Callable[[str, int, int], Image.Image],
    reranker: Reranker,
    n: int,
) -> Callable[[str, list], tuple[list, list]]:
    """The search engine's rerank step (``engine.search_text``): the ``n`` best fused tiles as
    candidates, with their text, their images rendered on demand by ``tile_image(doc_id, page,
    tile)`` and their stored visual vectors read once when first asked, scored by ``reranker``."""
    chunking = (settings.chunk_words, settings.chunk_overlap)

    def rerank(query: str, ranked: list) -> tuple[list, list]:
        tile_ids = [tile_id for tile_id, _ in ranked[:n]]
        rows = catalog.tiles(tile_ids, spans=True)

        @cache
        def recorded() -> dict | None:  # the spec of the encoder that wrote the stored vectors
            return catalog.visual_spec()

        @cache
        def vectors() -> dict:  # the candidates' stored vectors, read once, when first asked
            ids, found = catalog.visual_vectors(tile_ids)
            return dict(zip(ids.tolist(), found))

        def stored(tile_id: int, spec: dict):
            """The tile's stored vectors when ``spec`` (the asking encoder's) is their space."""
            from pagesight.encode.visual.base import spec_differences

            if recorded() is None or spec_differences(recorded(), spec):
                return None
            return vectors().get(tile_id)

        candidates = [
            Candidate(
                row.id,
                row.doc_id,
                row.page,
                row.idx,
                "\n".join(span[0] for span in row.spans),
                partial(tile_image, row.doc_id, row.page, row.idx),
                chunking,
                partial(stored, row.id),
            )
            for row in (rows.get(tile_id) for tile_id, _ in ranked[:n])
            if row is not None
        ]
        scores = reranker.score(query, candidates)
        return reorder([(c.tile_id, 0.0) for c in candidates] + ranked[n:], scores)

    return rerank


def reorder(run: list[tuple[int, float]], scores: Sequence[float]) -> tuple[list, list]:
    """The first ``len(scores)`` entries of ``run`` sorted by ``scores`` (ties keep their order),
    then the rest of ``run`` in its order, scored below every reranked entry; and the reranked
    entries alone."""
    head = sorted(((tile_id, float(s)) for (tile_id, _), s in zip(run, scores)), key=lambda item: -item[1])
    floor = min((s for _, s in head), default=0.0)
    tail = [(tile_id, floor - rank) for rank, (tile_id, _) in enumerate(run[len(head) :], 1)]
    return head + tail, head


class TimedReranker:
    """A reranker that times its ``score`` calls into ``last``: subclasses implement ``_score``."""

    name = "reranker"
    batch_size = 1

    def __init__(self) -> None:
        self.last: dict = {}

    def score(self, query: str, candidates: Sequence[Candidate]) -> list[float]:
        start = time.perf_counter()
        scores = self._score(query, list(candidates)) if candidates else []
        self.last = {
            "reranker": self.name,
            "candidates": len(candidates),
            "batch_size": self.batch_size,
            "ms": round(1000 * (time.perf_counter() - start), 2),
        }
        return scores

    def _score(self, query: str, candidates: list[Candidate]) -> list[float]:
        raise NotImplementedError


PASSAGE_FILE = "pagesight.json"  # in a cross-encoder folder: the passage size it was trained on


class CrossEncoderReranker(TimedReranker):
    """A sentence-transformers cross-encoder over (query, the tile's best chunk). The chunk size is
    the one the model was trained on when its folder says (``PASSAGE_FILE``, written by
    ``pagesight train``), else the index's."""

    name = "cross-encoder"

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 64,
        max_length: int = 256,
        device: str = "auto",
        trust_remote_code: bool = False,
    ):
        super().__init__()
        if not model:
            raise PagesightError(
                "the cross-encoder reranker needs a model: --rerank-model with a hub id, a folder, or "
                "the cross-encoder/ folder pagesight train --cross-encoder wrote"
            )
        try:
            from sentence_transformers.cross_encoder import CrossEncoder
        except ImportError:
            raise PagesightError(
                "the cross-encoder reranker needs the 'dense' extra: pip install torch 'pagesight[dense]'"
            ) from None
        from pagesight.encode.models import load_pretrained

        self.batch_size = batch_size
        self.model = load_pretrained(
            "cross-encoder",
            model,
            lambda m: CrossEncoder(
                m,
                max_length=max_length,
                device=None if device == "auto" else device,
                trust_remote_code=trust_remote_code,
            ),
        )
        self.passage = passage_size(model)

    def _score(self, query: str, candidates: list[Candidate]) -> list[float]:
        from pagesight.encode.dense import best_chunk

        pairs = [
            (query, best_chunk(c.text, query, *(self.passage or c.chunking)) or c.text) for c in candidates
        ]
        scores = self.model.predict(
            pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        return [float(s) for s in np.asarray(scores, dtype=np.float32).reshape(-1)]


def passage_size(model: str) -> tuple[int, int] | None:
    """The (words, overlap) of the passages the cross-encoder in folder ``model`` was trained on."""
    path = Path(model) / PASSAGE_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return int(data["passage_words"]), int(data["passage_overlap"])


class VisualReranker(TimedReranker):
    """The query and each candidate's tile image through a visual encoder: MaxSim for
    late-interaction (``col*``) encoders, cosine for single-vector ones."""

    def __init__(
        self,
        encoder: str,
        model: str | None = None,
        adapter: str | None = None,
        device: str = "auto",
        batch_size: int = 4,
        trust_remote_code: bool = False,
        **options: Any,
    ):
        super().__init__()
        from pagesight.encode.visual import make_encoder

        self.encoder = make_encoder(
            encoder,
            model=model,
            adapter=adapter,
            device=device,
            batch_size=batch_size,
            trust_remote_code=trust_remote_code,
        )
        self.name = encoder
        self.batch_size = batch_size
        self.stored = 0  # candidates of the last call scored from stored vectors

    def score(self, query: str, candidates: Sequence[Candidate]) -> list[float]:
        self.stored = 0
        scores = super().score(query, candidates)
        self.last["stored"] = self.stored  # candidates scored from stored vectors, not encoded
        return scores

    def _score(self, query: str, candidates: list[Candidate]) -> list[float]:
        """Tiles the index holds in this encoder's space are scored from their stored vectors (an
        index made with ``--encoder colqwen2`` reranks any first stage by exact MaxSim at the cost
        of the query alone); the others are encoded from their images."""
        from pagesight.vectors import maxsim

        q = self.encoder.encode_queries([query])[0]
        spec = self.encoder.spec()
        pages = [c.stored_vectors(spec) if c.stored_vectors else None for c in candidates]
        missing = [i for i, page in enumerate(pages) if page is None]
        for i, page in zip(
            missing, self.encoder.encode_images([candidates[i].image for i in missing]) if missing else []
        ):
            pages[i] = page
        self.stored = len(candidates) - len(missing)
        if self.encoder.multi_vector:
            return [float(s) for s in maxsim([q], pages)[0]]
        return [float(np.dot(q, np.asarray(p).reshape(-1))) for p in pages]


class JinaM0Reranker(TimedReranker):
    """jina-reranker-m0 (jinaai/jina-reranker-m0 by default): the relevance of each tile image to the
    query from the model's own ``compute_score`` over (query, image) pairs, ``doc_type="image"``,
    at most ``max_length`` tokens a pair; sigmoid scores in [0, 1]. Its code comes with the model,
    so it loads only with ``trust_remote_code``."""

    name = "jina-m0"
    default_model = "jinaai/jina-reranker-m0"

    def __init__(
        self,
        model: str | None = None,
        device: str = "auto",
        batch_size: int = 8,
        max_length: int = 2048,
        dtype: str = "auto",
        trust_remote_code: bool = False,
    ):
        super().__init__()
        from pagesight.devices import import_torch, resolve_device, resolve_dtype
        from pagesight.encode.models import load_pretrained, remote_code_refused, require

        model = model or self.default_model
        if not trust_remote_code:
            raise remote_code_refused(f"reranker '{self.name}': model", model)
        import_torch()
        transformers = require("transformers", "visual")
        device = resolve_device(device)
        self.batch_size = batch_size
        self.max_length = max_length
        self.model = load_pretrained(
            "reranker",
            model,
            transformers.AutoModel.from_pretrained,
            dtype=resolve_dtype(dtype, device),
            trust_remote_code=True,
        )
        self.model.to(device).eval()

    def _score(self, query: str, candidates: list[Candidate]) -> list[float]:
        scores = self.model.compute_score(
            [[query, c.image] for c in candidates],
            batch_size=self.batch_size,
            max_length=self.max_length,
            doc_type="image",
        )
        return [float(s) for s in np.atleast_1d(np.asarray(scores, dtype=np.float32))]  # one pair: a float
