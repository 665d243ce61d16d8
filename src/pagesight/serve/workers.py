"""`pagesight serve`, in one process or in several over one index (``--workers N``).

One server process searches on one core: its Python runs under one lock. With ``--workers N``
uvicorn starts N processes that accept on the same socket; each opens the index itself (its own
retrievers in memory, its own readers and models), so N cores answer. They share what is on disk:

- the catalog and the retriever files: a commit by any process is seen by the others' next search
  once their retrievers catch up (``LocalStore.max_lag``, ``pool.READ_LAG`` seconds at most);
- the single writer: the store's write lock, so uploads taken by different processes are ingested
  one after another (``Jobs`` waits for the lock);
- the ingestion jobs' records (``Jobs``: JSON files), so a job is followed from any process.

The MCP endpoint at /mcp is stateless there (each request stands alone), as a session opened by
one process may be continued through another. Several processes need a store that several
processes may open: the local one, or a Qdrant server (not Qdrant's local mode).

A process of ``--workers`` builds its app from the environment (``app_from_environment``),
since uvicorn imports an app in each process it starts.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import FastAPI

from pagesight.endpoints import CONCURRENCY, VisualEndpoint
from pagesight.errors import PagesightError
from pagesight.index import Index
from pagesight.serve.offer import DEFAULT_MAX_TOKENS, DEFAULT_RERANK_CANDIDATES, Offer
from pagesight.serve.reading import READ_SECONDS
from pagesight.serve.tenants import load_keys

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # no httptools: uvicorn's h11 protocol serves
    HttpToolsProtocol = None

CONFIG_ENV = "PAGESIGHT_SERVE_CONFIG"  # a worker's configuration, as JSON (the keys are not in it)
KEY_ENV = "PAGESIGHT_API_KEY"
MODEL_KEY_ENV = "PAGESIGHT_SERVE_MODEL_KEY"  # the key sent to the offered endpoint, for a worker
VISUAL_KEY_ENV = "PAGESIGHT_SERVE_VISUAL_KEY"  # the key sent to the visual encoder's endpoint, for a worker


@dataclass(frozen=True)
class ServeConfig:
    index: str
    host: str = "127.0.0.1"
    port: int = 8000
    max_upload_mb: float = 100.0
    readers: int = 4
    uploads: str | None = None
    device: str = "auto"
    workers: int = 1
    keys: str | None = None  # a keys file binding keys to tenants (serve.tenants)
    # what requests may choose (serve.offer): model readers, their models and endpoint, rerankers
    offer_readers: tuple[str, ...] = ()
    offer_models: tuple[str, ...] = ()
    base_url: str | None = None
    rerankers: tuple[str, ...] = ()
    max_tokens: int = DEFAULT_MAX_TOKENS
    # whether the index's visual encoder and the offered rerankers may run their model's own code:
    # the operator's leave at start, which no request can give (it is no request field)
    trust_remote_code: bool = False
    # where the index's visual encoder runs, when on an inference server (endpoints.VisualEndpoint):
    # the operator's, its key given apart (never in this configuration, which workers read as JSON)
    visual_endpoint: str | None = None
    visual_concurrency: int = CONCURRENCY
    rerank_candidates: int = DEFAULT_RERANK_CANDIDATES  # the most tiles a search may have reranked
    read_seconds: float = READ_SECONDS  # an extractive reading's deadline (serve.reading)
    visual_max_pixels: int | None = None  # the endpoint's image processor's pixel budget

    def served(self, visual_key: str | None = None) -> VisualEndpoint | None:
        """The visual encoder's endpoint, ``visual_key`` sent to it; None: the encoder runs here."""
        if self.visual_endpoint is None:
            return None
        return VisualEndpoint(
            self.visual_endpoint,
            api_key=visual_key,
            concurrency=self.visual_concurrency,
            max_pixels=self.visual_max_pixels,
        )

    def offer(self, model_key: str | None = None) -> Offer:
        """What requests may choose, its endpoint called with ``model_key``."""
        return Offer(
            tuple(self.offer_readers),
            tuple(self.offer_models),
            self.base_url,
            tuple(self.rerankers),
            self.max_tokens,
            api_key=model_key,
            rerank_candidates=self.rerank_candidates,
        )


if HttpToolsProtocol is not None:

    class TargetHost(HttpToolsProtocol):
        """uvicorn's httptools protocol with the host of an absolute-form request line (``GET
        http://HOST/path``) put in place of the Host header, as RFC 9112 says a server takes it:
        uvicorn drops that host, so the loopback guard would see the Host header's instead of the
        one a browser means."""

        def on_headers_complete(self) -> None:
            if not self.url.startswith((b"/", b"*")):
                authority = urlsplit(self.url).netloc
                self.headers[:] = [*((n, v) for n, v in self.headers if n != b"host"), (b"host", authority)]
            super().on_headers_complete()

else:
    TargetHost = None


def check(config: ServeConfig) -> None:
    """Refuse a configuration that cannot be served, before any process starts."""
    if config.workers > 1 and config.index.startswith("qdrant:") and not config.index.startswith("qdrant://"):
        raise PagesightError(
            f"{config.index}: Qdrant's local mode lets one process open a folder; serve it with one worker"
        )
    if config.keys is not None:
        load_keys(Path(config.keys))  # a missing or malformed keys file stops the server with one line
    config.offer()  # a model reader without its models or endpoint stops it too
    config.served()  # a visual endpoint that is no URL too
    with Index.open(config.index, create=False, device=config.device) as index:
        if config.uploads is None and not index.root.is_dir():
            raise PagesightError(
                f"{config.index}: not a folder, so uploads need a folder of their own: give --uploads DIR"
            )


def build(
    config: ServeConfig, api_key: str | None, model_key: str | None = None, visual_key: str | None = None
) -> FastAPI:
    """The app of one server process: the index opened, the MCP tools beside it where the store
    lets a second client open it (stateless with several processes), the JSON API and web page;
    ``api_key`` is the operator's key to the server, ``model_key`` the one sent to the offered
    model endpoint, ``visual_key`` the one sent to the visual encoder's endpoint."""
    from pagesight.encode import exported
    from pagesight.serve.app import create_app
    from pagesight.serve.mcp import http_app
    from pagesight.serve.offer import Asks, OfferedReaders
    from pagesight.serve.pool import batched
    from pagesight.serve.reading import ReadingPool
    from pagesight.store.local import LocalStore

    exported.use_threads(1)  # requests run side by side: one thread each encodes queries best
    offer = config.offer(model_key)
    served = config.served(visual_key)
    index = Index.open(
        config.index,
        create=False,
        device=config.device,
        trust_remote_code=config.trust_remote_code,
        visual_endpoint=served,
    )
    # MCP at /mcp through an index of its own (its tools take turns on it); Qdrant's local mode
    # lets one client open a folder, so there `pagesight mcp` serves the tools instead.
    queries = batched(index)  # the visual encoder loaded now, its queries gathered across threads
    # the routes and the tools answer with the same readers (the extractive one in processes of its
    # own, started on the first ask), within the same bound of answers in progress
    answers = OfferedReaders(offer, ReadingPool(seconds=config.read_seconds))
    asks = Asks()
    mcp = None
    if isinstance(index.store, LocalStore):
        tools = Index.open(
            config.index,
            create=False,
            device=config.device,
            trust_remote_code=config.trust_remote_code,
            visual_endpoint=served,
        )
        if queries is not None:
            tools.use_visual_encoder(queries)  # one model a process
        mcp = http_app(tools, answers, host=config.host, stateless=config.workers > 1, offer=offer, asks=asks)
    return create_app(
        index,
        api_key=api_key,
        keys=load_keys(Path(config.keys)) if config.keys else None,
        max_upload_mb=config.max_upload_mb,
        readers=config.readers,
        uploads=Path(config.uploads) if config.uploads else None,
        mcp_app=mcp,
        offer=offer,
        host=config.host,
        answers=answers,
        asks=asks,
    )


def app_from_environment() -> FastAPI:
    """The app of a process that ``run`` started (uvicorn's factory)."""
    given = json.loads(os.environ[CONFIG_ENV])
    config = ServeConfig(
        **{key: tuple(value) if isinstance(value, list) else value for key, value in given.items()}
    )
    return build(
        config,
        os.environ.get(KEY_ENV) or None,
        os.environ.get(MODEL_KEY_ENV) or None,
        os.environ.get(VISUAL_KEY_ENV) or None,
    )


def http_protocol() -> type | str:
    """uvicorn's HTTP protocol for ``serve``: ``TargetHost`` where httptools is installed, else
    uvicorn's h11 one (which keeps an absolute-form target whole as the path, where the guard reads
    its host: ``app.request_host``)."""
    return TargetHost if TargetHost is not None else "h11"


def run(
    config: ServeConfig, api_key: str | None, model_key: str | None = None, visual_key: str | None = None
) -> None:
    """Serve until stopped (``check`` the configuration first): the app in this process, or
    ``config.workers`` processes of it; ``model_key`` is sent to the offered endpoint,
    ``visual_key`` to the visual encoder's."""
    import uvicorn

    if config.workers <= 1:
        app = build(config, api_key, model_key, visual_key)
        uvicorn.run(app, host=config.host, port=config.port, log_level="warning", http=http_protocol())
        return
    os.environ[CONFIG_ENV] = json.dumps(dataclasses.asdict(config))
    if api_key:
        os.environ[KEY_ENV] = api_key
    if model_key:
        os.environ[MODEL_KEY_ENV] = model_key
    if visual_key:
        os.environ[VISUAL_KEY_ENV] = visual_key
    uvicorn.run(
        "pagesight.serve.workers:app_from_environment",
        factory=True,
        workers=config.workers,
        host=config.host,
        port=config.port,
        log_level="warning",
        http=http_protocol(),
    )
