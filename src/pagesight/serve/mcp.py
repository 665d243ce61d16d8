"""The index as MCP tools for agents: ``search``, ``ask``, ``get_page`` and ``list_documents``.

``build_server(index)`` makes the server with the official SDK (``MCPServer``);
``pagesight mcp --index DIR`` runs it over stdio, the transport desktop agents launch, or with
``--http`` over streamable HTTP at ``/mcp``. ``http_app(index)`` is the streamable-HTTP ASGI app,
for mounting inside another app (``pagesight serve``'s): Starlette does not run a mounted app's
lifespan, and this one's starts the MCP session manager, so the host app enters it from its own::

    mcp_app = http_app(index)

    @asynccontextmanager
    async def lifespan(app):
        async with mcp_app.router.lifespan_context(mcp_app):
            yield

    app = FastAPI(lifespan=lifespan)
    app.mount("/mcp", mcp_app)  # http://HOST:PORT/mcp (the SDK's client follows /mcp -> /mcp/)

Results carry boxes in page pixels at the index DPI, as everywhere in pagesight; images are PNG
image content. ``search`` and ``ask`` take a picture the query is about as base64 PNG or JPEG
(``image``, and a ``region`` of it), searched with the query and shown to the ask tool's reader. The tools' parameters are the request fields (``request.py``) the HTTP API and the
CLI take too. The SDK runs synchronous tools in worker threads; they take one lock, as the index's
SQLite connection and its page cache are shared; an ask, and a search, take it for each stage and
tile they read, never while a model reads (the ask's reader, a reranker's: ``pool.Lending``;
PDFium has a lock of its own, for the process). An index error (an
unknown document, a page out of range) is a tool error the agent reads, never a crash of the server.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from PIL import Image
from pydantic import Field
from starlette.applications import Starlette

from pagesight import __version__
from pagesight.answer.ask import ask
from pagesight.answer.base import Reader, Readers
from pagesight.errors import PagesightError
from pagesight.frontends import MAX_QUERY_BYTES, Scrub, decode_image, hits_payload, parse_region
from pagesight.index import Index
from pagesight.render.pages import MAX_SERVED_PIXELS
from pagesight.render.png import png_base64
from pagesight.render.tiles import downscale
from pagesight.request import MAX_PAGE, MAX_TILE, AskRequest, ImageSearchRequest, SearchRequest
from pagesight.serve.fields import tool_parameters, tool_request
from pagesight.serve.offer import ENDPOINT_RERANKERS, KEPT_READERS, Asks, Offer, OfferedReaders, for_tenant
from pagesight.serve.pool import Lending
from pagesight.serve.tenants import OPERATOR, Tenant, shown
from pagesight.where import MAX_WHERE

INSTRUCTIONS = (
    "pagesight searches an index of document page images (PDFs, scans, web pages) cut into tiles. "
    "search finds tiles by a text query or a picture, with snippets and boxes; get_page shows a page or a tile as an "
    "image; ask answers a question with citations; list_documents names the documents. Boxes are "
    "[x0, y0, x1, y1] in pixels of the page as rendered at the index's DPI, origin top left."
)
_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

# The ask tool answers with the reader the server was started with.
SERVER_CHOOSES = ("reader", "model", "max_tokens", "inputs")
Compression = Annotated[
    float,
    Field(ge=1, le=64, description="Images shrink by sqrt(compression) per side: 4 halves each side."),
]
QueryImage = Annotated[
    str | None,
    Field(
        description=f"A picture the query is about: a PNG or JPEG, base64 (at most {MAX_QUERY_BYTES:,} "
        "bytes decoded), searched with the query (an index with visual vectors)."
    ),
]
SearchImage = Annotated[
    str | None,
    Field(
        description=f"A picture to search by: a PNG or JPEG, base64 (at most {MAX_QUERY_BYTES:,} bytes "
        "decoded); alone (no query: ranked by the visual run, the fields that rank text or fuse runs "
        "refused) or with the query, a question about it (an index with visual vectors)."
    ),
]
Region = Annotated[
    str | None, Field(max_length=200, description="With image: x0,y0,x1,y1 of it, in its pixels.")
]


class _Tools:
    """What the tools do on one index (``build_server``): one tool at a time, its index errors
    tool errors that name no folder of the server."""

    def __init__(self, index: Index, readers: Readers, offer: Offer | None, asks: Asks | None):
        self.index, self.readers, self.offer, self.asks = index, readers, offer, asks
        self.lock = threading.Lock()
        self.scrub = Scrub({index.root: "<index>"})

    @contextmanager
    def using_index(self) -> Iterator[None]:
        with self.lock, self.tool_errors():
            yield

    @contextmanager
    def tool_errors(self) -> Iterator[None]:
        try:
            yield
        except PagesightError as exc:
            raise ToolError(self.scrub(str(exc))) from None

    def slot(self, tenant: Tenant, calls: bool = True):
        """The caller's place among the answers in progress (``offer.Asks``) while a tool reads
        answers or calls a model (``calls``), given back however it ends; none where no bound is kept."""
        return self.asks.take(tenant) if calls and self.asks is not None else nullcontext()

    @contextmanager
    def lent(self) -> Iterator[Index]:
        """The index, for one call (``pool.Lending``)."""
        with self.lock:
            yield self.index

    def search(self, arguments: dict) -> CallToolResult:
        """The best tiles for a text query, a picture (image, base64), or both: page id
        (<doc id>_<page>), tile, score, snippet, the boxes of the matching lines and the tile's box on
        its page; with images, each tile's image too."""
        tenant = caller(arguments.pop("ctx"))
        images, compression = arguments.pop("images"), arguments.pop("compression")
        picture, region = arguments.pop("image"), arguments.pop("region")
        lent = Lending(self.lent, self.index)  # a reranker's model reads with the index free
        with self.tool_errors():
            request = tool_request(SearchRequest, arguments)
            if self.offer is not None:
                request = self.offer.check(request)
            image, box = _query_image(picture, region)
            if image is not None:  # the picture alone, or with the query (a question about it)
                request = ImageSearchRequest.of(request, image, box)
            with self.slot(tenant, request.rerank in ENDPOINT_RERANKERS):
                hits = lent.search(tenant.narrowed(request))
            found = hits_payload(hits, compression)
            content: list[TextContent | ImageContent] = [_text(found)]
            if images:
                for n, hit in enumerate(hits, 1):
                    content.append(TextContent(type="text", text=f"Hit {n}: {hit.page_id} tile {hit.tile}"))
                    content.append(_png(lent.tile_image(hit.doc_id, hit.page, hit.tile, compression)))
        return CallToolResult(content=content, structured_content=found)

    def ask(self, arguments: dict) -> CallToolResult:
        """Answer a question (about a picture, when given) from the best tiles, with citations: page
        id, tile and the cited boxes."""
        tenant = caller(arguments.pop("ctx"))
        picture, region = arguments.pop("image"), arguments.pop("region")
        with self.tool_errors():  # the index taken for each search and tile alone, not while reading
            request = tool_request(AskRequest, arguments)
            if self.offer is not None:
                request = self.offer.check(request)
            image, box = _query_image(picture, region)
            reader = for_tenant(self.readers.get(request), tenant)
            with self.slot(tenant):
                answer = ask(
                    Lending(self.lent, self.index), tenant.narrowed(request), reader, image=image, region=box
                )
        data = answer.to_dict()
        result = {
            key: data[key]
            for key in ("text", "answered", "reason", "support", "citations", "reader", "usage")
        }
        return CallToolResult(content=[_text(result)], structured_content=result)

    def get_page(
        self, doc_id: str, page: int, tile: int | None, compression: float, explain: str | None, ctx
    ) -> list[TextContent | ImageContent]:
        with self.using_index():
            found = self.index.catalog.document(doc_id)
            if found is None or not caller(ctx).sees(found):
                raise PagesightError(f"no document '{doc_id}'")  # another tenant's: as if absent
            if explain is not None:
                if tile is None:
                    raise PagesightError("explain needs a tile")
                picture = downscale(self.index.explain(explain, doc_id, page, tile).draw(), compression)
                what = f"{doc_id} page {page} tile {tile}, its similarity map to {explain!r}"
            elif tile is None:
                picture = downscale(
                    self.index.page_image(doc_id, page, max_pixels=MAX_SERVED_PIXELS), compression
                )
                what = f"{doc_id} page {page}"
            else:
                picture = self.index.tile_image(doc_id, page, tile, compression)
                what = f"{doc_id} page {page} tile {tile}"
        note = f"{what}: {picture.width}x{picture.height} pixels (compression {compression:g})"
        return [TextContent(type="text", text=note), _png(picture)]

    def list_documents(self, where: str | None, ctx) -> CallToolResult:
        with self.using_index():
            tenant = caller(ctx)
            documents = shown(self.index.document_list(tenant.within(where)), tenant)
        return CallToolResult(
            content=[_text({"documents": documents})], structured_content={"documents": documents}
        )


def _request_tool(name: str, run, parameters: list[inspect.Parameter]):
    """A tool ``name`` taking ``parameters`` (a request's fields and the tool's own), run by ``run``
    with them as a dict, the caller's context among them; its description is ``run``'s."""

    def tool(**arguments) -> CallToolResult:
        return run(arguments)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = run.__doc__
    tool.__signature__ = inspect.Signature(
        [*parameters, _parameter("ctx", Context, inspect.Parameter.empty)], return_annotation=CallToolResult
    )
    tool.__annotations__ = {"ctx": Context, "return": CallToolResult}  # the SDK finds the context by type
    return tool


def _readers(reader: str | Reader | Readers, offer: Offer | None) -> Readers:
    """What builds the ask tool's readers: ``reader`` itself when it does, the offer's when the
    server offers models beside the extractive reader, else ``reader`` (kept ``KEPT_READERS``)."""
    if isinstance(reader, Readers):
        return reader
    if offer is not None and reader == "extractive":
        return OfferedReaders(offer)
    return Readers(reader, kept=KEPT_READERS)


def build_server(
    index: Index,
    reader: str | Reader | Readers = "extractive",
    offer: Offer | None = None,
    asks: Asks | None = None,
) -> MCPServer:
    """The MCP server of ``index``; ``ask`` answers with ``reader`` (a reader, a reader's name, or
    the ``Readers`` that build it for each request's options, such as its coordinates; a reader
    named is built on the first ask that needs it: it may load a model). ``offer``: the rerankers a
    search or an ask may name (``serve.offer``; None: any, for an agent that launched the server
    itself), whose endpoint (``Offer.endpoint``) every model call of the tools goes to; pages are
    drawn within ``MAX_SERVED_PIXELS``. ``asks``: the answers in progress, each key's bounded
    (``offer.Asks``: a server's, shared with its HTTP routes; None: unbounded, for one agent).
    The readers built are kept ``KEPT_READERS`` at most. Errors never name the index's folder."""
    # Warnings only: the SDK's log level is the root logger's, and INFO lines from every library
    # would fill an agent's log of the server's stderr.
    server = MCPServer("pagesight", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    if offer is not None:  # its rerankers call the offered endpoint and no other
        index.endpoint = offer.endpoint()
    tools = _Tools(index, _readers(reader, offer), offer, asks)
    shown_too = Annotated[bool, Field(description="Also return each tile as an image.")]
    search = [  # the query may be left out for an image alone
        *(p.replace(default="") if p.name == "query" else p for p in tool_parameters(SearchRequest)),
        _parameter("images", shown_too, False),
        _parameter("compression", Compression, 4.0),
        _parameter("image", SearchImage, None),
        _parameter("region", Region, None),
    ]
    server.tool(annotations=_READ_ONLY)(_request_tool("search", tools.search, search))
    ask = [
        *tool_parameters(AskRequest, exclude=SERVER_CHOOSES),
        _parameter("image", QueryImage, None),
        _parameter("region", Region, None),
    ]
    server.tool(annotations=_READ_ONLY)(_request_tool("ask", tools.ask, ask))

    @server.tool(annotations=_READ_ONLY)
    def get_page(
        doc_id: Annotated[str, Field(description="The document id.")],
        page: Annotated[int, Field(ge=1, le=MAX_PAGE, description="The page number, from 1.")],
        tile: Annotated[
            int | None, Field(ge=0, le=MAX_TILE, description="A tile of the page (from 0) instead of it all.")
        ] = None,
        compression: Compression = 1.0,
        explain: Annotated[
            str | None,
            Field(
                max_length=1000,
                description="With tile: a query whose similarity map is drawn over the tile (which "
                "patches matched; an index with a late-interaction visual encoder).",
            ),
        ] = None,
        ctx: Context = None,
    ) -> list[TextContent | ImageContent]:
        """The image of a page, or of one tile of it, rendered again from its source."""
        return tools.get_page(doc_id, page, tile, compression, explain, ctx)

    @server.tool(annotations=_READ_ONLY)
    def list_documents(
        where: Annotated[
            str | None,
            Field(
                max_length=MAX_WHERE,
                description="Only documents whose fields pass, e.g. 'type = pdf and year >= 2020'.",
            ),
        ] = None,
        ctx: Context = None,
    ) -> CallToolResult:
        """The documents: id, type, pages, source, size in bytes, notes made when they were read, and
        the fields a search's ``where`` reads."""
        return tools.list_documents(where, ctx)

    return server


def http_app(
    index: Index,
    reader: str | Reader | Readers = "extractive",
    *,
    path: str = "/",
    host: str = "127.0.0.1",
    stateless: bool = False,
    offer: Offer | None = None,
    asks: Asks | None = None,
) -> Starlette:
    """The tools over streamable HTTP as an ASGI app answering at ``path`` (``/``: where it is mounted).

    ``host`` is where the app is served: on a loopback address the SDK refuses requests whose Host or
    Origin header is not a loopback one (DNS rebinding). Run the app's lifespan (see the module
    docstring): it starts the session manager. ``stateless``: each request stands alone, for
    several server processes behind one address (``serve --workers``). ``offer``, ``asks``: what a
    search may choose and the answers in progress (``build_server``).
    """
    return build_server(index, reader, offer, asks).streamable_http_app(
        streamable_http_path=path, host=host, stateless_http=stateless
    )


def serve(
    index: Index,
    reader: str | Reader | Readers = "extractive",
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8765,
) -> None:
    """Serve the tools until the client goes (stdio) or the process is stopped (HTTP, at ``/mcp``)."""
    server = build_server(index, reader)
    if http:
        server.run("streamable-http", host=host, port=port)
    else:
        server.run("stdio")


def caller(ctx: Context | None) -> Tenant:
    """The tenant of the HTTP request that called a tool, as ``pagesight serve``'s guard found it
    (``serve.tenants``); the operator over stdio and where no guard stands (``pagesight mcp``)."""
    request = getattr(ctx.request_context, "request", None) if ctx is not None else None
    tenant = getattr(getattr(request, "state", None), "tenant", None)
    return tenant if tenant is not None else OPERATOR


def _query_image(image: str | None, region: str | None) -> tuple[Image.Image | None, tuple | None]:
    """A tool's query image (base64) and the region of it, read."""
    if image is None:
        if region is not None:
            raise PagesightError("region is a part of the query image: give the image too")
        return None, None
    return decode_image(image, "image"), parse_region(region)


def _parameter(name: str, annotation, default) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _text(data: dict) -> TextContent:
    return TextContent(type="text", text=json.dumps(data, ensure_ascii=False))


def _png(image: Image.Image) -> ImageContent:
    return ImageContent(type="image", data=png_base64(image), mime_type="image/png")
