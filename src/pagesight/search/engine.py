"""Search over a store: a text or image query to ranked tiles with their evidence.

    check     the request against the index: mode, picture, k, documents, filter, ranker file
    retrieve  encode (BM25 terms with the thesaurus's words, the dense text model, the visual
              encoder), then each retriever's run over the store's vector stores, limited to the
              allowed tiles, as widely as the request's ef, nprobe and ef_search say
    fuse      relative score or reciprocal rank fusion                    ``search.fusion``
    weigh     each tile's score fused with its document's                 ``search.documents``
    rank      the head reordered by the learned ranker (hybrid text)      ``search.ranking``
    reranked  the head reordered by a reranker                            ``search.rerank``
    finish    hits: the tile's records from the catalog, the score per retriever, and the lines
              that match the query as snippet and boxes

``first_stage`` runs check to rank and ``search_text`` all of them; ``Index.search`` calls it with
the index's store and visual encoder, and a server's ``pool.Lending`` calls the stages around a
rerank one by one, so that a model reranking holds no index. A question about a picture
(an ``ImageSearchRequest`` with a query) is searched as the question and the picture together: the
text runs read the question, the visual run the picture (with the question when the encoder embeds
both as one query, ``image_vector``), and fusion weighs them as ever; a picture alone is ranked by
the visual run alone, then fused with its documents' scores as any ranking is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image

from pagesight.choices import ACROSS_ALPHA, DEFAULT_DOCUMENT_WEIGHT, LANGUAGE_HEAD
from pagesight.encode.lexical import query_stems
from pagesight.errors import PagesightError
from pagesight.records import Hit, Region, printed_rows, union
from pagesight.request import SearchRequest
from pagesight.search.documents import document_fusion
from pagesight.search.fusion import (
    Run,
    fusion_weights,
    language_alpha,
    reciprocal_rank_fusion,
    relative_score_fusion,
)
from pagesight.search.ranking import learned_ranking, ranker
from pagesight.search.words import matching_lines, tile_texts
from pagesight.settings import Settings
from pagesight.store.base import Allowed, Catalog, Effort, Retrievers, Store
from pagesight.text.language import query_language, question_language
from pagesight.where import parse

# A query image (or the region of it searched by) an encoder's processor takes in bounded work:
# a 200,000 x 1 picture is few pixels, but a processor scaling its short side up to the model's
# size makes it billions (CLIP's 224: 18 s, or no memory, while every batched query waits)
MAX_QUERY_SIDE = 10_000  # pixels of a side
MAX_QUERY_ASPECT = 50  # the long side over the short


def search_text(
    store: Store,
    request: SearchRequest,
    *,
    visual_encoder: Callable[[], object] | None = None,
    evidence: bool = True,
    rerank: Callable[[str, Run], tuple[Run, Run]] | None = None,
    timings: dict[str, float] | None = None,
) -> list[Hit]:
    """The ``request.k`` best tiles for a query; see ``Index.search`` and ``SearchRequest``: its
    first stage (``first_stage``), reranked when ``rerank`` is given (``reranked``), as hits
    (``finish``). ``visual_encoder`` returns the index's loaded visual encoder (called only when
    needed). ``evidence=False`` leaves out snippets and boxes. ``timings``, when given, gets the
    seconds each stage took (``Laps``)."""
    ranking = first_stage(store, request, visual_encoder=visual_encoder, timings=timings)
    if rerank is not None:
        ranking = reranked(ranking, rerank, timings)
    return finish(store.catalog, ranking, evidence, timings)


@dataclass
class Ranking:
    """A search's ranking between its stages: the fused, weighed and ranked (tile id, score) pairs,
    each retriever's run (the hits carry their scores), and what the hits are made for: the query,
    ``k`` and the language the query was read in."""

    query: str
    k: int
    language: str
    ranked: Run
    runs: dict[str, Run]


@dataclass
class _Plan:
    """What ``check`` settles before any retriever runs."""

    mode: str
    image: Image.Image | None  # the picture searched by (its region), in RGB
    alone: bool  # the picture alone: its visual run ranks
    allowed: Allowed | None  # None: every tile
    language: str
    current: Retrievers
    given_ranker: object | None


def first_stage(
    store: Store,
    request: SearchRequest,
    *,
    visual_encoder: Callable[[], object] | None = None,
    timings: dict[str, float] | None = None,
) -> Ranking:
    """The stages before a rerank, each timed (``Laps``): check the request against the index,
    retrieve each run (bm25, dense, encode, visual), fuse them, weigh tiles with their documents
    and rank the head with the learned ranker (both timed as rank). An ``ImageSearchRequest`` is
    searched by its picture (its region): with its question, by the visual run instead of the text
    alone (a mode that reads images, ``reads_images``), or alone, by the visual run alone
    (PixSearch)."""
    lap = Laps(timings)
    plan = check(store, request)
    lap("check")
    if plan.allowed is not None and not plan.allowed.doc_ids:
        return Ranking(request.query, request.k, plan.language, [], {})
    runs = retrieve(store, request, plan, visual_encoder, lap)
    ranked = fuse(store, request, plan.mode, runs)
    lap("fuse")
    ranked = weigh(store, request, plan, ranked)
    ranked = rank(store, request, plan, ranked, runs)
    lap("rank")
    return Ranking(request.query, request.k, plan.language, ranked, runs)


def check(store: Store, request: SearchRequest) -> _Plan:
    """The request checked against the index (its mode, picture, k, documents, filter and ranker
    file, each refused with a ``PagesightError`` naming it), and what follows from it: the tiles
    allowed, the language the query is read in and the retrievers every run searches."""
    settings = store.catalog.settings
    query, doc_ids = request.query, request.doc_ids
    image = getattr(request, "image", None)
    alone = image is not None and not query.strip()
    mode = check_mode(store, "visual" if alone else request.mode)
    if not query.strip() and image is None:
        raise PagesightError("the query is empty")
    if image is not None:
        if not reads_images(store, mode):
            raise PagesightError(
                f"{store.location}: index has no visual vectors to search a question image by (create it "
                "with a visual encoder: --encoder)"
                if not settings.visual_encoder
                else f"mode {mode} searches by text alone: a question image needs mode visual or hybrid"
            )
        image = query_image(image, request.region)
    check_request(store, request.k, doc_ids, request.where)
    # a missing or malformed ranker file is refused before any search, read once a search
    given_ranker = ranker(request.ranker_file) if request.ranker_file is not None else None
    given, doc_ids = doc_ids, passing(store, doc_ids, request.where)
    current = store.retrievers()
    language = request.language or (
        query_language(query, current.lexical.languages) if query.strip() else "en"
    )
    allowed = _allowed(store, doc_ids, given, request.where)
    return _Plan(mode, image, alone, allowed, language, current, given_ranker)


def retrieve(
    store: Store, request: SearchRequest, plan: _Plan, visual_encoder: Callable[[], object] | None, lap: Laps
) -> dict[str, Run]:
    """Each retriever's run of the mode: BM25 over the query with its thesaurus words, the dense
    text model's, the visual encoder's over the query or its picture; ``candidates`` tiles each."""
    settings = store.catalog.settings
    query, pool, current = request.query, max(request.candidates, request.k), plan.current
    runs: dict[str, Run] = {}
    if plan.mode in ("lexical", "hybrid"):
        query_text = lexical_query(settings, query)
        runs["bm25"] = current.lexical.search(query_text, pool, plan.allowed, language=plan.language)
        lap("bm25")
    effort = Effort(request.ef, request.nprobe, request.ef_search)
    if plan.mode == "dense" or (plan.mode == "hybrid" and settings.dense_model):
        runs["dense"] = current.dense.search(dense_query(settings, query), pool, plan.allowed, effort=effort)
        lap("dense")
    if reads_images(store, plan.mode):
        encoder = visual_encoder()
        image = plan.image
        vector = encoder.encode_queries([query])[0] if image is None else image_vector(encoder, image, query)
        lap("encode")
        runs["visual"] = visual_run(current, vector, pool, plan.allowed, effort)
        lap("visual")
    return runs


def fuse(store: Store, request: SearchRequest, mode: str, runs: dict[str, Run]) -> Run:
    """One ranking of the runs: in hybrid ``mode`` their relative score fusion or reciprocal rank
    fusion, weighed by the request (``search.fusion``); in another, its one run."""
    if mode != "hybrid":
        return next(iter(runs.values()))
    settings = store.catalog.settings
    alpha = request.alpha
    if (
        alpha is None
        and request.fusion == "rsf"
        and settings.dense_model in ACROSS_ALPHA
        and runs.get("dense")
    ):
        alpha = dense_weight(store.catalog, request.language, request.query, runs["dense"])
    weights = fusion_weights(request.fusion, runs, alpha, request.visual_weight, settings.dense_model)
    if request.fusion == "rrf":
        return reciprocal_rank_fusion(runs, k=request.rrf_k, weights=weights)
    return relative_score_fusion(runs, weights)


def weigh(store: Store, request: SearchRequest, plan: _Plan, ranked: Run) -> Run:
    """Each tile's score fused with its document's (``search.documents``); a picture alone is not,
    by default: its best match is the page it shows, not its siblings."""
    document_weight = request.document_weight
    if document_weight is None:
        document_weight = 0.0 if plan.alone else DEFAULT_DOCUMENT_WEIGHT
    if document_weight <= 0 or not ranked:
        return ranked
    pages = store.catalog.tile_pages([tile_id for tile_id, _ in ranked])
    return document_fusion(ranked, pages, document_weight)


def rank(store: Store, request: SearchRequest, plan: _Plan, ranked: Run, runs: dict[str, Run]) -> Run:
    """The head reordered by the learned ranker (``search.ranking``), for a hybrid search of text
    by BM25 and dense runs; its scores join ``runs`` as "ranker"."""
    if not (request.ranker and plan.mode == "hybrid" and set(runs) == {"bm25", "dense"} and ranked):
        return ranked
    chosen = plan.given_ranker or ranker()
    bursts = plan.current.lexical.bursts
    ranked, runs["ranker"] = learned_ranking(
        store.catalog, chosen, request.query, ranked, runs, bursts, plan.language
    )
    return ranked


def reranked(
    ranking: Ranking, rerank: Callable[[str, Run], tuple[Run, Run]], timings: dict[str, float] | None = None
) -> Ranking:
    """``ranking`` reordered by ``rerank`` (``search.rerank.rerank_stage``), which returns the new
    ranking and the reranked head, whose scores the hits carry as "rerank"."""
    lap = Laps(timings)
    ranked, head = rerank(ranking.query, ranking.ranked)
    lap("rerank")
    return Ranking(ranking.query, ranking.k, ranking.language, ranked, {**ranking.runs, "rerank": head})


def finish(
    catalog: Catalog, ranking: Ranking, evidence: bool = True, timings: dict[str, float] | None = None
) -> list[Hit]:
    """The first ``k`` of the ranking as hits, with their evidence (``hits``), timed as evidence."""
    lap = Laps(timings)
    found = hits(catalog, ranking.ranked, ranking.runs, ranking.query, evidence, ranking.k, ranking.language)
    lap("evidence")
    return found


class Laps:
    """The seconds each stage of a search took, added into ``timings`` (nothing kept when None):
    each call names the stage that ends then, timed from the call before."""

    def __init__(self, timings: dict[str, float] | None):
        self.timings = timings
        self.last = time.perf_counter()

    def __call__(self, stage: str) -> None:
        if self.timings is not None:
            now = time.perf_counter()
            self.timings[stage] = self.timings.get(stage, 0.0) + now - self.last
            self.last = now


def dense_weight(catalog: Catalog, given: str | None, query: str, dense: Run) -> float:
    """Relative score fusion's dense weight for ``query`` on an index whose dense model has a weight
    across languages: that one when the dense run's first tiles are mostly in other languages than
    the question's (``given``, else told from it; ``search.fusion.language_alpha``)."""
    model = catalog.settings.dense_model
    head = [tile_id for tile_id, _ in dense[:LANGUAGE_HEAD]]
    languages = catalog.tile_languages(head)
    return language_alpha(model, given or question_language(query), [languages.get(t) for t in head])


def query_image(image: Image.Image, region: tuple[float, float, float, float] | None) -> Image.Image:
    """The part of a query image searched by: its ``region`` (x0, y0, x1, y1 in its pixels), or all
    of it, in RGB; refused (before it joins other queries' batch) when it is not inside the image,
    holds no pixel once rounded, or its sides are past ``query_size_refusal``'s bounds."""
    if region is not None:
        x0, y0, x1, y1 = region
        if not (0 <= x0 < x1 <= image.width and 0 <= y0 < y1 <= image.height):
            raise PagesightError(
                f"region {list(region)} is not inside the {image.width}x{image.height} query image"
            )
        box = (round(x0), round(y0), round(x1), round(y1))
        if box[2] <= box[0] or box[3] <= box[1]:
            raise PagesightError(f"region {list(region)} holds no whole pixel of the query image")
        image = image.crop(box)
    refused = query_size_refusal(image.width, image.height)
    if refused is not None:
        raise PagesightError(f"the {'region' if region is not None else 'query image'}: {refused}")
    return image.convert("RGB")


def query_size_refusal(width: int, height: int) -> str | None:
    """Why a query picture of ``width`` x ``height`` is refused (a side past ``MAX_QUERY_SIDE``,
    or past ``MAX_QUERY_ASPECT`` times the other), or None."""
    if max(width, height) > MAX_QUERY_SIDE:
        return f"{width}x{height} has a side over {MAX_QUERY_SIDE:,} pixels"
    if max(width, height) > MAX_QUERY_ASPECT * max(1, min(width, height)):
        return f"{width}x{height} is more than {MAX_QUERY_ASPECT} times as long as it is wide"
    return None


def image_vector(encoder, image: Image.Image, text: str = "") -> np.ndarray:
    """The query vector of ``image``: with ``text`` when the encoder embeds an image and a text as
    one query (``encode.visual.joint_queries``), else of the image alone."""
    from pagesight.encode.visual import joint_queries

    if text and joint_queries(encoder):
        return encoder.encode_image_text_queries([image], [text])[0]
    return encoder.encode_image_queries([image])[0]


def reads_images(store: Store, mode: str | None) -> bool:
    """Whether a search in ``mode`` (None: the index's default) has a visual run, which a query
    image is searched by."""
    mode = check_mode(store, mode)
    return mode == "visual" or (mode == "hybrid" and bool(store.catalog.settings.visual_encoder))


def lexical_query(settings: Settings, query: str) -> str:
    """The query as the BM25 run reads it: with the words the index's thesaurus adds
    (``search.expansion``) and the years of its period codes (``encode.lexical.with_years``)."""
    from pagesight.encode.lexical import with_years
    from pagesight.search.expansion import expand

    text = expand(query, settings.thesaurus)
    return with_years(text) if settings.period_years else text


def dense_query(settings: Settings, query: str) -> np.ndarray:
    """The query's vector from the index's dense text model (its ONNX export when cached)."""
    from pagesight.encode.dense import dense_model

    return dense_model(settings.dense_model).encode_queries([query])[0]


def _allowed(
    store: Store, doc_ids: Sequence[str] | None, given: Sequence[str] | None, where: str | None
) -> Allowed | None:
    """The tiles of ``doc_ids`` (None: every tile), listed only by a store that needs their ids; with
    the filter ``where`` they are all the documents passing, when no documents were ``given``."""
    if doc_ids is None:
        return None
    passing_all = parse(where) if where is not None and not given else None
    return Allowed(doc_ids, lambda: store.catalog.tile_ids_of(doc_ids), passing_all)


def visual_run(current: Retrievers, vector, pool: int, allowed, effort: Effort | None = None) -> Run:
    """The visual run from the same retrievers as the query's other runs."""
    if current.visual is None:
        return []
    return current.visual.search(vector, pool, allowed, effort=effort)


def passing(store: Store, doc_ids: Sequence[str] | None, where: str | None) -> list[str] | None:
    """The documents a search may return: ``doc_ids`` (None: all), of them those whose fields pass
    ``where`` (``search.filters``); None when neither restricts."""
    if where is None:
        return list(doc_ids) if doc_ids else None
    from pagesight.search.filters import passing_documents

    found, every = passing_documents(store, where)
    if not doc_ids:
        return None if every else found  # all pass: no set of tiles to keep to
    asked = set(doc_ids)
    return [doc_id for doc_id in found if doc_id in asked]


def check_request(store: Store, k: int, doc_ids: Sequence[str] | None, where: str | None = None) -> None:
    """``k`` and the documents ``doc_ids`` asked for: each must be in the index and, with ``where``,
    pass it. A document the filter leaves out is answered as one that is missing, in the same
    words, so a filter that bounds what a caller sees (a tenant's) does not tell which ids exist."""
    if k <= 0:
        raise PagesightError(f"k must be 1 or more, got {k}")
    if not doc_ids:
        return
    known = set(doc_ids) if where is None else set(passing(store, doc_ids, where) or ())
    if where is None:
        known = {doc_id for doc_id in known if store.catalog.document(doc_id) is not None}
    missing = [doc_id for doc_id in doc_ids if doc_id not in known]
    if missing:
        scope = " passing the filter" if where is not None else ""
        raise PagesightError(f"no document {', '.join(map(repr, missing))}{scope} in the index")


def check_mode(store: Store, mode: str | None) -> str:
    """``mode`` (None: the default of this index) checked against what the index holds."""
    settings = store.catalog.settings
    location = store.location
    mode = mode or ("hybrid" if settings.dense_model or settings.visual_encoder else "lexical")
    if mode == "dense" and not settings.dense_model:
        raise PagesightError(f"{location}: index has no dense vectors; use --mode lexical")
    if mode == "hybrid" and not (settings.dense_model or settings.visual_encoder):
        raise PagesightError(f"{location}: index has no dense vectors to fuse with; use --mode lexical")
    if mode == "visual" and not settings.visual_encoder:
        raise PagesightError(
            f"{location}: index has no visual vectors (create it with a visual encoder: --encoder)"
        )
    return mode


def hits(
    catalog: Catalog,
    ranked: Run,
    runs: dict[str, Run],
    query: str,
    evidence: bool,
    k: int | None = None,
    language: str = "en",
) -> list[Hit]:
    """Hits for the ranked (tile id, score) pairs, the first ``k`` tiles (all: None), with each
    retriever's score and evidence: the lines sharing the most terms with the query read in
    ``language``, found in the tile's words by line (``search.words``).

    In an index made with layout regions a table or figure is a unit of its own: it stands for the
    band tile that holds its centre, whose hit then carries the region (``Hit.region``) and takes
    its snippet and boxes from the region's lines. A tile is hit once, by its best-ranked unit.
    """
    per_retriever = {name: dict(run) for name, run in runs.items()}
    stems = query_stems(query, language)
    found: list[Hit] = []
    seen: set[tuple[str, int, int]] = set()
    bands: dict[tuple[str, int], list] = {}  # a page's band rows, for regions' units
    start, limit = 0, len(ranked) if k is None else k
    merged = True  # units merged into a tile hit already made: the next ones in the ranking fill in
    while merged and len(found) < limit and start < len(ranked):
        merged = False
        batch = ranked[start : start + limit - len(found)]
        start += len(batch)
        rows = catalog.tiles([tile_id for tile_id, _ in batch], spans=evidence)
        texts = tile_texts(catalog, list(rows), rows) if evidence else {}
        for tile_id, score in batch:
            row = rows.get(tile_id)
            if row is None:  # deleted since the retrievers were built
                continue
            band = _band(catalog, row, bands) if row.region is not None else row
            if band is None or (band.doc_id, band.page, band.idx) in seen:
                merged = True
                continue
            seen.add((band.doc_id, band.page, band.idx))
            scores = {name: run[tile_id] for name, run in per_retriever.items() if tile_id in run}
            lines = printed_rows([s[1] for s in row.spans], [s[2] if len(s) > 2 else "" for s in row.spans])
            matching = matching_lines(stems, texts[tile_id], len(lines)) if evidence else []
            hit = _hit(row, score, scores, lines, matching)
            if row.region is not None:
                hit.region = Region(row.region.kind, tuple(float(v) for v in row.box), row.region.score)
                hit.tile, hit.tile_box = band.idx, band.box
            found.append(hit)
    return found


def _band(catalog: Catalog, row, bands: dict) -> object | None:
    """The band tile of a region's unit: the one holding the region's vertical centre."""
    key = (row.doc_id, row.page)
    if key not in bands:
        bands[key] = catalog.page_tiles(row.doc_id, row.page)
    middle = (row.box[1] + row.box[3]) / 2
    for band in bands[key]:
        if band.box[1] <= middle < band.box[3]:
            return band
    return bands[key][-1] if bands[key] else None


def _hit(row, score: float, scores: dict[str, float], lines: list[range], matching: list[int]) -> Hit:
    """A hit whose snippet and boxes are the tile's printed lines (``lines``: ranges of its
    spans) that share the most query terms (``matching``: how many each line shares)."""
    matched = [
        (overlap, position, " ".join(row.spans[i][0] for i in line), union([row.spans[i][1] for i in line]))
        for position, (line, overlap) in enumerate(zip(lines, matching))
        if overlap
    ]
    if matched:
        best = max(m[0] for m in matched)
        chosen = sorted((m for m in matched if m[0] * 2 >= best), key=lambda m: (-m[0], m[1]))[:5]
        evidence = sorted(chosen, key=lambda m: m[1])
        snippet = " … ".join(m[2] for m in evidence[:3])
        boxes = [m[3] for m in evidence]
    else:
        snippet = " ".join(s[0] for s in row.spans[:3])
        boxes = []
    snippet = snippet if len(snippet) <= 300 else snippet[:299] + "…"
    return Hit(
        doc_id=row.doc_id,
        page=row.page,
        tile=row.idx,
        score=float(score),
        scores={name: float(value) for name, value in scores.items()},
        snippet=snippet,
        boxes=[tuple(float(v) for v in box) for box in boxes],
        page_size=row.page_size,
        tile_box=row.box,
    )
