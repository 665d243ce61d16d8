"""GET /api/search, POST /api/search/image and POST /api/ask: their parameters are the request
fields (``request.py``) under their HTTP names (``serve/fields.py``), and what only HTTP has."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import nullcontext
from typing import Annotated

from fastapi import APIRouter, File, Form, Query, UploadFile
from fastapi.responses import StreamingResponse
from pydantic import Field

from pagesight.answer.ask import ask as answer
from pagesight.answer.ask import ask_stream, retrieve
from pagesight.errors import PagesightError
from pagesight.frontends import MAX_QUERY_BYTES, decode_image, hits_payload, open_image
from pagesight.request import AskRequest, ImageSearchRequest, SearchRequest
from pagesight.serve.fields import make, request_model
from pagesight.serve.offer import ENDPOINT_RERANKERS, Slot, for_tenant
from pagesight.serve.pool import Lending
from pagesight.serve.routes.common import ApiError, Caller, Server, check_documents, given_boxes

log = logging.getLogger(__name__)
router = APIRouter(tags=["search"])

SearchQuery = request_model(
    SearchRequest,
    "SearchQuery",
    required=("query",),
    extra={"c": (float, Field(1.0, ge=1, le=64, description="Compression the image-token cost is for."))},
)
ImageSearchForm = request_model(
    SearchRequest,
    "ImageSearchForm",
    extra={
        "region": (str | None, Field(None, max_length=200, description="x0,y0,x1,y1 in the image's pixels.")),
        "c": (float, Field(1.0, ge=1, le=64, description="Compression the image-token cost is for.")),
    },
)
AskBody = request_model(
    AskRequest,
    "AskBody",
    required=("query",),
    extra={
        "stream": (bool, Field(False, description="NDJSON lines: the hits first, then the answer.")),
        "image": (
            str | None,
            Field(
                None,
                description=f"An image the question is about: a PNG or JPEG, base64 (at most "
                f"{MAX_QUERY_BYTES:,} bytes decoded); searched with the question and shown to a model "
                "reader beside the tiles.",
            ),
        ),
        "region": (
            str | None,
            Field(None, description="With image: search by x0,y0,x1,y1 of it, in its pixels."),
        ),
    },
)


@router.get("/api/search")
def search(server: Server, tenant: Caller, query: Annotated[SearchQuery, Query()]) -> dict:  # type: ignore[valid-type]
    """The best tiles for a text query, with snippets and evidence boxes (page pixels). One
    reranked by a model behind the endpoint counts among the key's answers in progress (``ask``)."""
    request = server.offer.check(make(SearchRequest, query))
    request = tenant.narrowed(request)
    calls_model = request.rerank in ENDPOINT_RERANKERS
    with server.asks.take(tenant) if calls_model else nullcontext():
        return _searched(server, request, tenant, query.c)


@router.post("/api/search/image")
def search_image(
    server: Server,
    tenant: Caller,
    image: Annotated[UploadFile, File(description="The query image.")],
    form: Annotated[ImageSearchForm, Form()],  # type: ignore[valid-type]
) -> dict:
    """The best tiles for an image, or a region of it (an index with a visual encoder): alone, or
    with ``q``, a question about it; the other fields are a search's (``GET /api/search``), and
    one reranked by a model behind the endpoint counts among the key's answers in progress."""
    if not server.pool.index.settings.visual_encoder:  # told before the image is decoded
        raise ApiError(400, "this index has no visual vectors: search it by text")
    box = given_boxes(form.region, "region", limit=1)[0] if form.region else None
    try:
        query = open_image(image.file, image.filename or "image")
    except PagesightError as exc:
        raise ApiError(415, str(exc)) from None
    request = server.offer.check(make(ImageSearchRequest, form, image=query, region=box))
    with server.asks.take(tenant) if request.rerank in ENDPOINT_RERANKERS else nullcontext():
        return _searched(server, tenant.narrowed(request), tenant, form.c)


def _searched(server, request: SearchRequest, tenant, compression: float) -> dict:
    """The hits of ``request`` as JSON, with ``timings``: the milliseconds of each stage
    (``Index.search``'s, and ``wait``, for an index of the pool) and the ``total``. A search
    reranked by a model behind the endpoint holds no index while that model reads
    (``pool.Lending``)."""
    start = time.perf_counter()
    timings: dict[str, float] = {}
    with server.pool.reading() as idx:
        timings["wait"] = time.perf_counter() - start
        check_documents(idx, request.doc_ids, tenant)
        if request.rerank not in ENDPOINT_RERANKERS:
            hits = idx.search(request, timings=timings)
    if request.rerank in ENDPOINT_RERANKERS:
        hits = Lending(server.pool.reading, server.pool.index).search(request, timings=timings)
    payload = hits_payload(hits, compression)
    timings["total"] = time.perf_counter() - start
    payload["timings"] = {stage: round(seconds * 1000, 3) for stage, seconds in timings.items()}
    return payload


@router.post("/api/ask")
def ask(server: Server, tenant: Caller, body: AskBody):  # type: ignore[valid-type]
    """An answer from the best tiles, with citations (boxes on pages) and its image-token cost.

    With ``stream`` (or at ``/api/ask/stream``), NDJSON: ``{"event": "hits", ...}``, then the
    answer's text as the reader writes it, ``{"event": "text", "text": ...}`` lines (the whole text
    at once from a reader that cannot stream), then ``{"event": "answer", ...}`` (or
    ``{"event": "error", ...}``). A key has at most ``offer.ASKS_PER_TENANT`` answers in progress
    (429 past it); no index is held while the reader reads (``pool.Lending``)."""
    request = server.offer.check(make(AskRequest, body))
    request = tenant.narrowed(request)
    reader = for_tenant(server.readers.get(request), tenant)
    image = box = None
    if body.image is not None:
        try:
            image = decode_image(body.image, "image")
        except PagesightError as exc:
            raise ApiError(415, str(exc)) from None
        box = given_boxes(body.region, "region", limit=1)[0] if body.region else None
    elif body.region is not None:
        raise ApiError(422, "region is a part of the question image: send the image too")
    with server.pool.reading() as idx:
        check_documents(idx, request.doc_ids, tenant)
    index = Lending(server.pool.reading, server.pool.index)
    slot = server.asks.take(tenant)
    if not body.stream:
        with slot:
            return answer(index, request, reader, image=image, region=box).to_dict()
    lines = _sent(_stages(server, index, request, reader, image, box), slot)
    weakref.finalize(lines, slot.release)  # a stream dropped before it started gives its slot back
    return StreamingResponse(lines, media_type="application/x-ndjson")


@router.post("/api/ask/stream")
def ask_streamed(server: Server, tenant: Caller, body: AskBody):  # type: ignore[valid-type]
    """``POST /api/ask`` with ``stream``: NDJSON events, the answer's text as it is written."""
    return ask(server, tenant, body.model_copy(update={"stream": True}))


async def _sent(events: Iterator[bytes], slot: Slot) -> AsyncIterator[bytes]:
    """The lines of ``events`` as they come, made in a thread of their own; the slot given back when
    they end, or at once when the client goes (the stream cancelled: the thread then stops the
    answer at its next step, ``ask_stream``). A plain iterator left to the server would be closed
    only when collected, its slot held until then."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    gone = threading.Event()

    def put(line: bytes | None) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(lines.put_nowait, line)

    def make() -> None:
        try:
            for line in events:
                if gone.is_set():
                    break
                put(line)
        finally:
            events.close()  # the answer stopped, its thread joined (``ask_stream``)
            slot.release()
            put(None)

    threading.Thread(target=make, name="pagesight-ask-lines", daemon=True).start()
    try:
        while (line := await lines.get()) is not None:
            yield line
    finally:
        gone.set()
        slot.release()


def _stages(server, index: Lending, request: AskRequest, reader, image, box) -> Iterator[bytes]:
    """The NDJSON lines of a streamed answer: its hits, then the answer or the error."""
    try:
        hits = None if request.agent else retrieve(index, request, image, box)
        if hits is not None:
            payload = hits_payload(hits, request.compression, request.token_model)
            yield _line({"event": "hits", **payload})
        for piece in ask_stream(index, request, reader, image=image, region=box, hits=hits):
            if isinstance(piece, str):
                yield _line({"event": "text", "text": piece})
            else:
                yield _line({"event": "answer", "answer": piece.to_dict()})
    except PagesightError as exc:
        yield _line({"event": "error", "error": server.scrub(str(exc))})
    except Exception:
        log.exception("streamed answer failed")
        yield _line({"event": "error", "error": "internal error (see the server log)"})


def _line(event: dict) -> bytes:
    return (json.dumps(event, ensure_ascii=False) + "\n").encode()
