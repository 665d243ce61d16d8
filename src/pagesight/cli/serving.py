"""``pagesight serve`` (HTTP API and web page) and ``pagesight mcp`` (tools for agents)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pagesight.cli.common import (
    DeviceOption,
    IndexOption,
    TrustOption,
    VisualConcurrencyOption,
    VisualEndpointOption,
    VisualKeyFileOption,
    VisualMaxPixelsOption,
    err,
    fail,
    open_index,
    served_at,
)
from pagesight.endpoints import CONCURRENCY
from pagesight.errors import PagesightError

app = typer.Typer()

LOOPBACK = ("127.0.0.1", "localhost", "::1")


HostOption = Annotated[
    str, typer.Option(help="Address to bind; beyond loopback it needs --api-key (or --insecure).")
]
ApiKey = Annotated[
    str | None,
    typer.Option(
        envvar="PAGESIGHT_API_KEY",
        show_envvar=True,
        help="Key every API request must carry (Authorization: Bearer KEY or X-API-Key); "
        "without one, uploads and deletes are refused.",
    ),
]
MaxUploadOption = Annotated[float, typer.Option(help="Largest request body (an upload), in MB.")]
ReadersOption = Annotated[
    int, typer.Option(help="Searches served at once, each with its own retrievers in memory.")
]
UploadsOption = Annotated[
    Path | None, typer.Option(help="Folder for uploaded files (default: uploads/ in the index).")
]
InsecureOption = Annotated[
    bool,
    typer.Option("--insecure", help="Allow binding beyond loopback without an API key (readable by all)."),
]
KeysOption = Annotated[
    Path | None,
    typer.Option(help="A JSON file binding keys to tenants, each seeing and writing its own documents."),
]
WorkersOption = Annotated[
    int, typer.Option(help="Server processes over the index, each on a core of its own (stateless /mcp).")
]
OfferedReaders = Annotated[
    list[str] | None,
    typer.Option(
        help="A model reader requests may choose beside the extractive one: openai (needs --model "
        "and --base-url)."
    ),
]
OfferedModels = Annotated[
    list[str] | None,
    typer.Option(help="A model requests may name for --reader (repeatable; the first is the default)."),
]
ModelsUrl = Annotated[
    str | None,
    typer.Option(envvar="PAGESIGHT_OPENAI_BASE_URL", help="--reader openai: the endpoint the models run at."),
]
ModelKey = Annotated[
    str | None,
    typer.Option(
        envvar=["PAGESIGHT_OPENAI_API_KEY", "OPENAI_API_KEY"],
        show_envvar=False,
        help="The key sent to --base-url (default: $PAGESIGHT_OPENAI_API_KEY, else $OPENAI_API_KEY, "
        "read once at start).",
    ),
]
OfferedRerankers = Annotated[
    list[str] | None,
    typer.Option(
        help="A reranker requests may choose (repeatable): cross-encoder, vlm-openai (needs --model "
        "and --base-url), ..."
    ),
]
MaxTokensOption = Annotated[
    int, typer.Option(help="Model readers: the longest answer a request may ask for, in tokens.")
]
RerankCandidatesOption = Annotated[
    int, typer.Option(help="The most tiles a search may have reranked (each a model call for vlm-openai).")
]
ReadSecondsOption = Annotated[
    float,
    typer.Option(
        help="The extractive reader's deadline for one answer, in seconds (read in processes of "
        "its own); past it the answer is refused with 504."
    ),
]


@app.command()
def serve(
    index: IndexOption,
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    api_key: ApiKey = None,
    max_upload_mb: MaxUploadOption = 100.0,
    readers: ReadersOption = 4,
    uploads: UploadsOption = None,
    insecure: InsecureOption = False,
    keys: KeysOption = None,
    workers: WorkersOption = 1,
    reader: OfferedReaders = None,
    model: OfferedModels = None,
    base_url: ModelsUrl = None,
    model_key: ModelKey = None,
    rerank: OfferedRerankers = None,
    max_tokens: MaxTokensOption = 1024,
    rerank_candidates: RerankCandidatesOption = 100,
    read_seconds: ReadSecondsOption = 30.0,
    device: DeviceOption = "auto",
    trust_remote_code: TrustOption = False,
    visual_endpoint: VisualEndpointOption = None,
    visual_endpoint_key_file: VisualKeyFileOption = None,
    visual_concurrency: VisualConcurrencyOption = CONCURRENCY,
    visual_max_pixels: VisualMaxPixelsOption = None,
) -> None:
    """Serve the index over HTTP: a web page and a JSON API.

    The API is documented at /docs (OpenAPI). Binds to 127.0.0.1; with --api-key every request needs
    the key, and uploads and deletes are allowed. Requests choose among the readers, models and
    rerankers given here: by default the extractive reader and no reranker. Whether models may run
    their own code (--trust-remote-code), and where the visual encoder runs (--visual-endpoint), are
    the operator's choices alone: no request can name them.
    """
    if host not in LOOPBACK and not (api_key or keys) and not insecure:
        fail(f"--host {host} serves beyond this machine: give --api-key KEY (or --insecure to serve it open)")
    if max_upload_mb <= 0 or readers < 1 or workers < 1 or rerank_candidates < 1 or read_seconds <= 0:
        fail("--max-upload-mb, --readers, --workers, --rerank-candidates and --read-seconds must be positive")
    from pagesight.serve.workers import ServeConfig, check, run

    served = served_at(
        visual_endpoint, visual_endpoint_key_file, visual_concurrency, visual_max_pixels
    )  # its key read once
    config = ServeConfig(
        index, host, port, max_upload_mb, readers, str(uploads) if uploads else None, device, workers,
        str(keys) if keys else None, tuple(reader or ()), tuple(model or ()), base_url, tuple(rerank or ()),
        max_tokens, trust_remote_code, visual_endpoint, visual_concurrency, rerank_candidates, read_seconds,
        visual_max_pixels,
    )  # fmt: skip
    try:
        check(config)
    except PagesightError as exc:
        fail(str(exc))
    shown = f"[{host}]" if ":" in host else host
    writes = "uploads and deletes on: API key set" if api_key else "read-only: no API key"
    if keys:
        writes += f", tenants' keys from {keys}"
    processes = f", {workers} processes" if workers > 1 else ""
    tools = "" if index.startswith("qdrant:") else f", MCP at http://{shown}:{port}/mcp"
    err.print(f"serving {index} at http://{shown}:{port}/ ({writes}{processes}{tools})", highlight=False)
    run(config, api_key, model_key, served.api_key if served else None)


@app.command("mcp")
def mcp_server(
    index: IndexOption,
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP at /mcp instead of stdio.")
    ] = False,
    host: Annotated[str, typer.Option(help="With --http: address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="With --http: port to listen on.")] = 8765,
    reader: Annotated[str, typer.Option(help="Reader of the ask tool: extractive, openai, transformers.")] = (
        "extractive"
    ),
    model: Annotated[
        str | None, typer.Option(help="Reader model: hub id, local folder or served name.")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="openai reader: the endpoint's base URL.")] = None,
    device: DeviceOption = "auto",
    trust_remote_code: TrustOption = False,
    visual_endpoint: VisualEndpointOption = None,
    visual_endpoint_key_file: VisualKeyFileOption = None,
    visual_concurrency: VisualConcurrencyOption = CONCURRENCY,
    visual_max_pixels: VisualMaxPixelsOption = None,
) -> None:
    """Serve the index as MCP tools for agents.

    Tools: search, ask, get_page and list_documents, over stdio (what an agent launches: the
    mcpServers entry is in docs/reference/mcp.md), or with --http over streamable HTTP at
    http://HOST:PORT/mcp.
    """
    from pagesight.answer.base import Readers
    from pagesight.request import AskRequest
    from pagesight.serve.mcp import serve as serve_mcp
    from pagesight.serve.offer import KEPT_READERS

    served = served_at(visual_endpoint, visual_endpoint_key_file, visual_concurrency, visual_max_pixels)
    idx = open_index(index, device=device, trust_remote_code=trust_remote_code, visual_endpoint=served)
    try:
        idx.visual_encoder()  # loaded now: the first search does not wait for the model
    except PagesightError as exc:
        fail(str(exc))
    options = {key: value for key, value in (("model", model), ("base_url", base_url)) if value is not None}
    # built for each ask's options (its coordinates); the extractive reader on the first ask, so the
    # server starts at once, another now, so a bad option fails here
    chosen = Readers(reader, options, kept=KEPT_READERS, trust_remote_code=trust_remote_code)
    if reader != "extractive" or options:
        try:
            chosen.get(AskRequest())
        except PagesightError as exc:
            fail(str(exc))
    if http:
        shown = f"[{host}]" if ":" in host else host
        err.print(f"serving MCP for {index} at http://{shown}:{port}/mcp", highlight=False)
    serve_mcp(idx, chosen, http=http, host=host, port=port)
