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
                                                  (its scripts served from here, no CDN)

The routes are in ``routes/``, a router per group; this module makes the app: the server's state,
the key and size guard, the errors, the web page and /mcp.

Safe by default: with no API key reads are open (the CLI binds to loopback) and writes are refused;
with a key every request under /api (but health) and /mcp needs it, as ``Authorization: Bearer KEY``
or ``X-API-Key: KEY``. A server bound to a loopback address answers only requests whose Host, and
Origin when sent, are loopback ones, on every route (a page of another site that rebinds its name to
127.0.0.1 reads nothing). Errors are JSON ``{"error": message}`` with their status, the server's
own folders never named in them; a bug answers 500 with no traceback (the server log has it). Blocking library calls run in the threadpool (plain
``def`` endpoints), each on an index of its own (``pool.py``), so searches answer while an upload is
being ingested.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import re
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException

from pagesight import __version__
from pagesight.errors import IndexLockedError, PagesightError
from pagesight.frontends import Scrub
from pagesight.index import Index
from pagesight.ingest.options import IngestOptions
from pagesight.serve.jobs import Jobs, UploadError
from pagesight.serve.offer import Asks, NotOffered, Offer, OfferedReaders, TooManyAsks
from pagesight.serve.pool import IndexPool
from pagesight.serve.reading import ReadingPool, ReadingTimedOut
from pagesight.serve.routes import ROUTERS
from pagesight.serve.routes.common import Served
from pagesight.serve.tenants import OPERATOR, PUBLIC, Tenant, identify

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
WORKER = str(os.getpid()).encode()  # the x-pagesight-worker header of each response


def create_app(
    index: Index,
    *,
    api_key: str | None = None,
    keys: dict[str, Tenant] | None = None,
    max_upload_mb: float = 100,
    readers: int = 4,
    uploads: Path | None = None,
    ingest_options: IngestOptions | None = None,
    mcp_app=None,
    offer: Offer | None = None,
    host: str | None = None,
    answers: OfferedReaders | None = None,
    asks: Asks | None = None,
) -> FastAPI:
    """The app serving ``index``.

    ``api_key``: the operator's key, which sees and writes everything; with neither it nor
    ``keys``, reads are open and writes refused. ``keys``: tenants' keys (``serve.tenants``), each
    seeing and writing only its documents. ``max_upload_mb`` bounds every request
    body. ``readers``: indexes searching at once (each with its own retrievers in memory).
    ``uploads``: where uploaded files are kept (they are the documents' sources; default
    ``uploads/`` in the index directory). ``ingest_options`` (``IngestOptions``: ocr, jobs,
    timeouts, memory) are the uploads'. ``mcp_app``: an ASGI app mounted at /mcp behind the same key (``serve.mcp.http_app``,
    given an ``Index`` of its own), its lifespan run by this app's. ``offer``: the readers, models
    and rerankers requests may choose (``serve.offer``; default: the extractive reader, no
    reranker). ``host``: the address served; a loopback one makes every route refuse requests
    whose Host or Origin is not loopback (DNS rebinding). ``answers``: the readers built for
    requests (default: the offer's, the extractive one reading in processes of its own,
    ``serve.reading``); ``asks``: the answers in progress (``offer.Asks``); both shared with the
    MCP tools of ``mcp_app`` when it was built with them.
    """
    offer = offer or Offer()
    answers = answers if answers is not None else OfferedReaders(offer, ReadingPool())
    index.endpoint = offer.endpoint()  # every model call of the server goes there (serve.offer)
    pool = IndexPool(index, readers)
    uploads = Path(uploads) if uploads is not None else index.root / "uploads"
    scrub = Scrub({index.root: "<index>", uploads: "<uploads>"})
    jobs = Jobs(pool, uploads, ingest_options, scrub=scrub)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # a mounted app's lifespan is not run by Starlette: the MCP app's starts its session manager
        async with mcp_app.router.lifespan_context(mcp_app) if mcp_app is not None else nullcontext():
            yield
        jobs.close()
        pool.close()
        if answers.pool is not None:
            answers.pool.close()

    app = FastAPIOffline(  # /docs with its scripts from the package, not a CDN
        title="pagesight",
        version=__version__,
        summary="Search page images and answer with cited regions.",
        lifespan=lifespan,
    )
    _install_errors(app, scrub)

    loopback_only = host is not None and is_loopback(host)
    app.add_middleware(
        Guard, api_key=api_key, keys=keys or {}, max_upload_mb=max_upload_mb, loopback_only=loopback_only
    )

    app.state.served = Served(pool, jobs, answers, uploads, offer, scrub, asks or Asks())
    for router in ROUTERS:  # serve/routes/: each reads the state above through Depends
        app.include_router(router)

    # The web page and the agents' endpoint -----------------------------------------------------

    @app.get("/", include_in_schema=False)
    def web_page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    if mcp_app is not None:  # MCP over streamable HTTP (serve/mcp.py), behind the same key
        app.mount("/mcp", mcp_app)
    return app


class Guard:
    """The API key, and the body size before anything reads the body. A plain ASGI middleware: the
    HTTP middleware decorator wraps each request in a task and streams of its own (226 -> 238
    lexical searches/s, BENCHMARKS "Serving")."""

    def __init__(
        self,
        app,
        *,
        api_key: str | None,
        keys: dict[str, Tenant],
        max_upload_mb: float,
        loopback_only: bool = False,
    ):
        self.app = app
        self.loopback_only = loopback_only
        self.keys = {**keys, api_key: OPERATOR} if api_key else dict(keys)  # the operator's is one more
        self.max_upload_mb = max_upload_mb
        self.max_bytes = int(max_upload_mb * (1 << 20))

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_worker(message) -> None:  # which server process answered (--workers)
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-pagesight-worker", WORKER)]
            await send(message)

        request = Request(scope)
        if self.loopback_only and (refusal := _foreign(scope, request)) is not None:
            await refusal(scope, receive, send_with_worker)
            return
        path = request.url.path
        guarded = (path.startswith("/api/") and path != "/api/health") or path.startswith("/mcp")
        tenant = self.caller(request) if guarded else None
        if guarded and tenant is None:
            refusal = _error(
                401, "an API key is needed: Authorization: Bearer KEY", {"WWW-Authenticate": "Bearer"}
            )
        else:
            refusal = self.refusal(request)
        if refusal is None and tenant is not None:
            scope.setdefault("state", {})["tenant"] = tenant
        await (refusal or self.app)(scope, receive, send_with_worker)

    def caller(self, request: Request) -> Tenant | None:
        """The tenant of the request's key (the operator's, --api-key, or one of --keys), the
        public when no key is configured, None for a key that is none of them."""
        return identify(_given_key(request), self.keys) if self.keys else PUBLIC

    def refusal(self, request: Request) -> JSONResponse | None:
        """A body the server will not read."""
        if "transfer-encoding" in request.headers and "content-length" not in request.headers:
            return _error(411, "a request body needs a Content-Length")
        length = request.headers.get("content-length", "0")
        if not length.isdigit():
            return _error(400, "a malformed Content-Length")
        if int(length) > self.max_bytes:
            return _error(
                413, f"the request is larger than the limit of {self.max_upload_mb:g} MB (--max-upload-mb)"
            )
        return None


# Requests ------------------------------------------------------------------------------------


def _given_key(request: Request) -> str:
    """The key a request carries: its X-API-Key, else its bearer token (an empty header is none)."""
    given = request.headers.get("x-api-key", "").strip()
    if not given:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = token.strip() if scheme.lower() == "bearer" else ""
    return given


@functools.lru_cache(maxsize=256)  # a server sees a few hosts: each is parsed once, not per request
def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, an IPv6 one bracketed or not) is this machine's
    loopback."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# A Host header as RFC 9110 has it: a name or IPv4 address, or a bracketed IPv6 one, then a port;
# no user info (``127.0.0.1@evil.example``), no path, one header only.
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::[0-9]{1,5})?")


def request_host(scope) -> str | None:
    """The host a request is addressed to, as a browser means it: an absolute-form request line's
    own (``GET http://HOST/...``, which RFC 9112 puts over the Host header; ``serve``'s protocol
    keeps it, ``workers.TargetHost``), else the one Host header's; None when malformed or sent twice."""
    path = scope.get("path", "")
    if "://" in path:  # an absolute-form target the server kept as the path
        return urlsplit(path).hostname
    given = [value for name, value in scope.get("headers", ()) if name == b"host"]
    if len(given) != 1:
        return None
    match = _HOST.fullmatch(given[0].decode("latin-1"))
    return match.group(1) if match else None


def _foreign(scope, request: Request) -> JSONResponse | None:
    """The refusal of a request to a loopback server whose Host or Origin is not loopback."""
    host = request_host(scope)
    if host is None:
        return _error(400, "a malformed Host header")
    if not is_loopback(host):
        return _error(421, "this server answers requests to a loopback address only (Host)")
    origin = request.headers.get("origin")
    if origin is not None and not is_loopback(urlsplit(origin).hostname or ""):
        return _error(403, "this server answers pages of loopback origins only (Origin)")
    return None


# Responses -----------------------------------------------------------------------------------


def _error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _install_errors(app: FastAPI, scrub: Scrub) -> None:
    """Every error as ``{"error": message}`` with its status; never a traceback, never a folder
    of the server."""

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, scrub(str(exc.detail)), getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(part) for part in error['loc'] if part != 'body')}: {error['msg']}"
            for error in exc.errors()
        ]
        return _error(422, "; ".join(problems))

    @app.exception_handler(UploadError)
    async def refused(request: Request, exc: UploadError) -> JSONResponse:
        return _error(exc.status, scrub(str(exc)))

    @app.exception_handler(NotOffered)
    async def not_offered(request: Request, exc: NotOffered) -> JSONResponse:
        return _error(403, str(exc))

    @app.exception_handler(TooManyAsks)
    async def too_many(request: Request, exc: TooManyAsks) -> JSONResponse:
        return _error(429, str(exc), {"Retry-After": "1"})

    @app.exception_handler(ReadingTimedOut)
    async def too_slow(request: Request, exc: ReadingTimedOut) -> JSONResponse:
        return _error(504, str(exc))

    @app.exception_handler(IndexLockedError)
    async def locked(request: Request, exc: IndexLockedError) -> JSONResponse:
        return _error(409, f"{scrub(str(exc))}; try again when it ends")

    @app.exception_handler(PagesightError)
    async def refused_by_library(request: Request, exc: PagesightError) -> JSONResponse:
        return _error(400, scrub(str(exc)))

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(500, "internal error (see the server log)")
