"""The HTTP API and the web page of one index (``pagesight serve``).

    GET    /api/health, /api/status               liveness; the index's counts, settings, jobs
    GET    /api/search?q=...                      text search (mode, fusion, alpha, document_weight, k, doc)
    POST   /api/search/image                      image or image-region search (multipart)
    POST   /api/ask                               an answer with citations; NDJSON stages with stream
    GET    /api/tile, /api/page                   PNG of a tile or page, ?c= compression, ?boxes= drawn
    GET    /api/documents[/ID]                    the documents, one document
    POST   /api/documents                         upload files: an ingestion job (202)
    DELETE /api/documents/ID                      remove a document
    GET    /api/jobs[/ID]                         ingestion jobs and their progress
    GET    /                                      the web page (``static/``); /docs: OpenAPI

Safe by default: with no API key reads are open (the CLI binds to loopback) and writes are refused;
with a key every request under /api (but health) and /mcp needs it, as ``Authorization: Bearer KEY``
or ``X-API-Key: KEY``. Errors are JSON ``{"error": message}`` with their status; a bug answers 500
with no traceback (the server log has it). Blocking library calls run in the threadpool (plain
``def`` endpoints), each on an index of its own (``pool.py``), so searches answer while an upload is
being ingested.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
from collections.abc import Iterator
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, File, Form, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from PIL import Image
from pydantic import Field
from starlette.exceptions import HTTPException

from pagesight import __version__
from pagesight.answer.show import draw_boxes
from pagesight.errors import IndexLockedError, PagesightError
from pagesight.index import Index
from pagesight.records import Box
from pagesight.render.tiles import downscale
from pagesight.request import MAX_K, AskRequest, SearchRequest
from pagesight.serve.fields import make, request_model
from pagesight.serve.jobs import Jobs, UploadError, check_content, safe_name, save
from pagesight.serve.pool import IndexPool, retry_locked
from pagesight.service import MAX_BOXES, Readers, hits_payload, open_image, parse_boxes

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
API_KEY_ENV = "PAGESIGHT_API_KEY"
MAX_FILES = 20  # files in one upload
# Readers whose model a request may name: the name goes to an endpoint the server's environment
# configures. A local reader would load whatever folder or hub id a request named.
REMOTE_READERS = {"openai"}
NO_WRITES = (
    "writing is off: start the server with --api-key KEY (or the environment variable "
    f"{API_KEY_ENV}) to upload and delete documents"
)


class ApiError(HTTPException):
    """An error answered as ``{"error": message}`` with its status."""


# The search's query parameters and the answer's body: the request fields (``request.py``) under
# their HTTP names, and what only HTTP has.
SearchQuery = request_model(
    SearchRequest,
    "SearchQuery",
    required=("query",),
    extra={"c": (float, Field(1.0, ge=1, le=64, description="Compression the image-token cost is for."))},
)
AskBody = request_model(
    AskRequest,
    "AskBody",
    required=("query",),
    extra={"stream": (bool, Field(False, description="NDJSON lines: the hits first, then the answer."))},
)


def create_app(
    index: Index,
    *,
    api_key: str | None = None,
    max_upload_mb: float = 100,
    readers: int = 4,
    uploads: Path | None = None,
    ingest_options: dict | None = None,
    mcp_app=None,
) -> FastAPI:
    """The app serving ``index``.

    ``api_key``: None leaves reads open and refuses writes. ``max_upload_mb`` bounds every request
    body. ``readers``: indexes searching at once (each with its own retrievers in memory).
    ``uploads``: where uploaded files are kept (they are the documents' sources; default
    ``uploads/`` in the index directory). ``ingest_options`` go to ``Index.add`` (ocr, jobs,
    timeout, max_memory). ``mcp_app``: an ASGI app mounted at /mcp behind the same key (``serve.mcp.http_app``,
    given an ``Index`` of its own), its lifespan run by this app's.
    """
    pool = IndexPool(index, readers)
    jobs = Jobs(pool, ingest_options)
    uploads = Path(uploads) if uploads is not None else index.root / "uploads"
    max_bytes = int(max_upload_mb * (1 << 20))
    answerers = Readers()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # a mounted app's lifespan is not run by Starlette: the MCP app's starts its session manager
        async with mcp_app.router.lifespan_context(mcp_app) if mcp_app is not None else nullcontext():
            yield
        jobs.close()
        pool.close()

    app = FastAPI(
        title="pagesight",
        version=__version__,
        summary="Search page images and answer with cited regions.",
        lifespan=lifespan,
    )
    _install_errors(app)

    @app.middleware("http")
    async def guard(request: Request, call_next):
        """The API key, and the body size before anything reads the body."""
        path = request.url.path
        guarded = (path.startswith("/api/") and path != "/api/health") or path.startswith("/mcp")
        if api_key and guarded and not _authorized(request, api_key):
            return _error(
                401, "an API key is needed: Authorization: Bearer KEY", {"WWW-Authenticate": "Bearer"}
            )
        if "transfer-encoding" in request.headers and "content-length" not in request.headers:
            return _error(411, "a request body needs a Content-Length")
        length = request.headers.get("content-length", "0")
        if not length.isdigit():
            return _error(400, "a malformed Content-Length")
        if int(length) > max_bytes:
            return _error(
                413, f"the request is larger than the limit of {max_upload_mb:g} MB (--max-upload-mb)"
            )
        return await call_next(request)

    def writable() -> None:
        if not api_key:
            raise ApiError(403, NO_WRITES)

    # Status ------------------------------------------------------------------------------------

    @app.get("/api/health", tags=["status"])
    def health() -> dict:
        """Liveness; needs no key."""
        return {"status": "ok", "version": __version__}

    @app.get("/api/status", tags=["status"])
    def status() -> dict:
        """The index's counts, settings and size, whether writes are on, the jobs in progress."""
        with pool.reading() as idx:
            info = idx.info()
        pending = [job.to_dict() for job in jobs.all() if job.state in ("queued", "running")]
        return {"index": info, "writable": bool(api_key), "readers": pool.readers, "jobs": pending}

    # Search and ask ----------------------------------------------------------------------------

    @app.get("/api/search", tags=["search"])
    def search(query: Annotated[SearchQuery, Query()]) -> dict:  # type: ignore[valid-type]
        """The best tiles for a text query, with snippets and evidence boxes (page pixels)."""
        request = make(SearchRequest, query)
        with pool.reading() as idx:
            _check_documents(idx, request.doc_ids)
            hits = idx.search(request)
        return hits_payload(hits, query.c)

    @app.post("/api/search/image", tags=["search"])
    def search_image(
        image: Annotated[UploadFile, File(description="The query image.")],
        k: Annotated[int, Form(ge=1, le=MAX_K)] = SearchRequest.k,
        region: Annotated[str | None, Form(description="x0,y0,x1,y1 in the image's pixels.")] = None,
        doc: Annotated[list[str] | None, Form(description="Only this document (repeatable).")] = None,
    ) -> dict:
        """The best tiles for an image, or a region of it (an index with a visual encoder)."""
        try:
            query = open_image(image.file, image.filename or "image")
        except PagesightError as exc:
            raise ApiError(415, str(exc)) from None
        box = _boxes(region, "region", limit=1)[0] if region else None
        with pool.reading() as idx:
            _check_documents(idx, doc)
            hits = idx.search_image(query, k=k, region=box, doc_ids=doc)
        return hits_payload(hits)

    @app.post("/api/ask", tags=["search"])
    def ask(body: AskBody):  # type: ignore[valid-type]
        """An answer from the best tiles, with citations (boxes on pages) and its image-token cost.

        With ``stream``, NDJSON: ``{"event": "hits", ...}``, then ``{"event": "answer", ...}`` (or
        ``{"event": "error", ...}``)."""
        request = make(AskRequest, body)
        if request.model is not None and request.reader not in REMOTE_READERS:
            raise ApiError(400, f"reader '{request.reader}' runs here: its model is the server's to choose")
        reader = answerers.get(request)
        if not body.stream:
            with pool.reading() as idx:
                _check_documents(idx, request.doc_ids)
                return idx.ask(request, reader).to_dict()
        with pool.reading() as idx:
            _check_documents(idx, request.doc_ids)

        def stages() -> Iterator[bytes]:
            with pool.reading() as idx:
                try:
                    hits = None if request.agent else idx.search(request.search_request())
                    if hits is not None:
                        payload = hits_payload(hits, request.compression, request.token_model)
                        yield _line({"event": "hits", **payload})
                    answer = idx.ask(request, reader, hits=hits)
                    yield _line({"event": "answer", "answer": answer.to_dict()})
                except PagesightError as exc:
                    yield _line({"event": "error", "error": str(exc)})
                except Exception:
                    log.exception("streamed answer failed")
                    yield _line({"event": "error", "error": "internal error (see the server log)"})

        return StreamingResponse(stages(), media_type="application/x-ndjson")

    # Images ------------------------------------------------------------------------------------

    png = {200: {"content": {"image/png": {}}, "description": "PNG"}}

    @app.get("/api/tile", tags=["images"], response_class=Response, responses=png)
    def tile_png(
        request: Request,
        doc: str,
        page: Annotated[int, Query(ge=1)],
        tile: Annotated[int, Query(ge=0)] = 0,
        c: Annotated[float, Query(ge=1, le=64, description="Each side shrinks by sqrt(c).")] = 1.0,
        boxes: Annotated[str | None, Query(description="x0,y0,x1,y1;... in page pixels, drawn.")] = None,
    ) -> Response:
        """A tile as the reader sees it at compression ``c``, evidence boxes drawn on request."""
        drawn = _boxes(boxes, "boxes") if boxes else []
        with pool.reading() as idx:
            document = _document(idx, doc)
            row = idx.catalog.tile_at(doc, page, tile)
            if row is None:
                raise ApiError(404, f"{doc}: no tile {tile} on page {page}")
            tag = _etag(document.sha256, "tile", page, tile, c, drawn)
            if _fresh(request, tag):
                return Response(status_code=304, headers={"ETag": tag})
            image = idx.tile_image(doc, page, tile, c)
        x0, y0 = row.box[0], row.box[1]
        scale = image.width / max(1.0, row.box[2] - row.box[0])
        return _png(image, [_moved(box, x0, y0, scale) for box in drawn], tag)

    @app.get("/api/page", tags=["images"], response_class=Response, responses=png)
    def page_png(
        request: Request,
        doc: str,
        page: Annotated[int, Query(ge=1)],
        c: Annotated[float, Query(ge=1, le=64, description="Each side shrinks by sqrt(c).")] = 1.0,
        boxes: Annotated[str | None, Query(description="x0,y0,x1,y1;... in page pixels, drawn.")] = None,
    ) -> Response:
        """A whole page rendered again at the index DPI, evidence boxes drawn on request."""
        drawn = _boxes(boxes, "boxes") if boxes else []
        with pool.reading() as idx:
            document = _document(idx, doc)
            if page > document.n_pages:
                raise ApiError(404, f"{doc}: no page {page} (it has {document.n_pages})")
            tag = _etag(document.sha256, "page", page, c, drawn)
            if _fresh(request, tag):
                return Response(status_code=304, headers={"ETag": tag})
            full = idx.page_image(doc, page)
        image = downscale(full, c)
        scale = image.width / full.width
        return _png(image, [_moved(box, 0, 0, scale) for box in drawn], tag)

    # Documents and ingestion -------------------------------------------------------------------

    @app.get("/api/documents", tags=["documents"])
    def documents() -> dict:
        """Each document: id, type, pages, source, bytes, notes."""
        with pool.reading() as idx:
            return {"documents": idx.document_list()}

    @app.get("/api/documents/{doc_id:path}", tags=["documents"])
    def document_info(doc_id: str) -> dict:
        with pool.reading() as idx:
            _document(idx, doc_id)
            return next(row for row in idx.document_list() if row["id"] == doc_id)

    @app.delete("/api/documents/{doc_id:path}", tags=["documents"], dependencies=[Depends(writable)])
    def delete(doc_id: str) -> dict:
        """Remove a document and its pages (and its file, when it was uploaded here)."""
        with pool.writing(wait=5.0) as idx:
            source = _document(idx, doc_id).source
            retry_locked(lambda: idx.delete(doc_id))
        if source.resolve().parent == uploads.resolve():
            source.unlink(missing_ok=True)
        return {"deleted": doc_id}

    @app.post("/api/documents", tags=["documents"], status_code=202, dependencies=[Depends(writable)])
    def upload(files: Annotated[list[UploadFile], File(description="PDFs and images.")]) -> dict:
        """Save the files and ingest them in the background; poll ``/api/jobs/{id}`` for progress.

        A file of a type not ingested is refused (415) before anything is saved; a file that
        cannot be read fails alone in the job's ``failed``."""
        if len(files) > MAX_FILES:
            raise ApiError(413, f"at most {MAX_FILES} files in one upload")
        received = []
        for upload in files:
            name = safe_name(upload.filename or "")
            data = upload.file.read()
            check_content(name, data)
            received.append((name, data))
        if len({name for name, _ in received}) < len(received):
            raise ApiError(422, "two uploaded files have the same name")
        return {"job": jobs.submit([save(uploads, name, data) for name, data in received]).to_dict()}

    @app.get("/api/jobs", tags=["documents"])
    def job_list() -> dict:
        return {"jobs": [job.to_dict() for job in jobs.all()]}

    @app.get("/api/jobs/{job_id}", tags=["documents"])
    def job_progress(job_id: str) -> dict:
        found = jobs.get(job_id)
        if found is None:
            raise ApiError(404, f"no job '{job_id}'")
        return found.to_dict()

    # The web page and the agents' endpoint -----------------------------------------------------

    @app.get("/", include_in_schema=False)
    def web_page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    if mcp_app is not None:  # MCP over streamable HTTP (serve/mcp.py), behind the same key
        app.mount("/mcp", mcp_app)
    app.state.pool, app.state.jobs = pool, jobs
    return app


# Requests ------------------------------------------------------------------------------------


def _authorized(request: Request, key: str) -> bool:
    given = request.headers.get("x-api-key")
    if given is None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = token.strip() if scheme.lower() == "bearer" else ""
    return hmac.compare_digest(given.encode(), key.encode())


def _document(index: Index, doc_id: str):
    """The catalog row of ``doc_id``: ids are looked up, never used as paths."""
    found = index.catalog.document(doc_id)
    if found is None:
        raise ApiError(404, f"no document '{doc_id}'")
    return found


def _check_documents(index: Index, doc_ids: list[str] | None) -> None:
    for doc_id in doc_ids or ():
        _document(index, doc_id)


def _boxes(text: str, name: str, limit: int = MAX_BOXES) -> list[Box]:
    """``service.parse_boxes``, its refusal a 422."""
    try:
        return parse_boxes(text, name, limit)
    except PagesightError as exc:
        raise ApiError(422, str(exc)) from None


# Responses -----------------------------------------------------------------------------------


def _line(event: dict) -> bytes:
    return (json.dumps(event, ensure_ascii=False) + "\n").encode()


def _moved(box: Box, x0: float, y0: float, scale: float) -> Box:
    """A page-pixel box in pixels of an image whose top left is page point (x0, y0), at ``scale``."""
    return ((box[0] - x0) * scale, (box[1] - y0) * scale, (box[2] - x0) * scale, (box[3] - y0) * scale)


def _etag(*parts) -> str:
    return '"' + hashlib.sha256(repr(parts).encode()).hexdigest()[:32] + '"'


def _fresh(request: Request, tag: str) -> bool:
    return request.headers.get("if-none-match") == tag


def _png(image: Image.Image, boxes: list[Box], tag: str) -> Response:
    if boxes:
        image = draw_boxes(image, boxes, width=max(2, round(3 * image.width / 1000)))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=3)
    headers = {"ETag": tag, "Cache-Control": "private, no-cache"}  # revalidated: a document can change
    return Response(buffer.getvalue(), media_type="image/png", headers=headers)


def _error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _install_errors(app: FastAPI) -> None:
    """Every error as ``{"error": message}`` with its status; never a traceback."""

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(part) for part in error['loc'] if part != 'body')}: {error['msg']}"
            for error in exc.errors()
        ]
        return _error(422, "; ".join(problems))

    @app.exception_handler(UploadError)
    async def refused(request: Request, exc: UploadError) -> JSONResponse:
        return _error(exc.status, str(exc))

    @app.exception_handler(IndexLockedError)
    async def locked(request: Request, exc: IndexLockedError) -> JSONResponse:
        return _error(409, f"{exc}; try again when it ends")

    @app.exception_handler(PagesightError)
    async def refused_by_library(request: Request, exc: PagesightError) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(500, "internal error (see the server log)")
