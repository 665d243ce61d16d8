"""``pagesight search`` and ``pagesight ask``: their options are the fields of ``SearchRequest`` and
``AskRequest`` (``common.request_options``), and the rest is what only a command line has (an image
file, an HTML file to write, the reader's endpoint)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pagesight.answer.base import Answer, Reader, build_reader
from pagesight.cli.common import (
    ApiKeyOption,
    BaseUrlOption,
    DeviceOption,
    IndexOption,
    JsonOption,
    ReaderDeviceOption,
    TrustOption,
    VisualConcurrencyOption,
    VisualEndpointOption,
    VisualKeyFileOption,
    VisualMaxPixelsOption,
    err,
    fail,
    open_index,
    out,
    request_options,
    served_at,
)
from pagesight.endpoints import CONCURRENCY
from pagesight.errors import PagesightError
from pagesight.frontends import open_image, parse_region
from pagesight.index import Index
from pagesight.request import AskRequest, ImageSearchRequest, SearchRequest

app = typer.Typer()


@app.command()
@request_options(SearchRequest)
def search(
    index: IndexOption,
    request: SearchRequest,
    image: Annotated[
        Path | None,
        typer.Option(
            help="Search with this image (or --region of it): alone (ranked by the visual run; the "
            "options that rank text or fuse runs are refused), or with QUERY, a question about it (the "
            "image searched with the question, fused with the text search): visual indexes."
        ),
    ] = None,
    region: Annotated[
        str | None, typer.Option(help="With --image: x0,y0,x1,y1 in the image's pixels.")
    ] = None,
    explain: Annotated[
        Path | None,
        typer.Option(
            help="Write each hit's similarity map (which patches matched) to this folder as "
            "PAGE_TILE.png: indexes with a late-interaction visual encoder."
        ),
    ] = None,
    device: DeviceOption = "auto",
    trust_remote_code: TrustOption = False,
    visual_endpoint: VisualEndpointOption = None,
    visual_endpoint_key_file: VisualKeyFileOption = None,
    visual_concurrency: VisualConcurrencyOption = CONCURRENCY,
    visual_max_pixels: VisualMaxPixelsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search by a question, a picture or both.

    A picture (--image, a --region of it) is searched with the question. Hits are tiles with
    their page, score per retriever, snippet and evidence boxes.
    """
    served = served_at(visual_endpoint, visual_endpoint_key_file, visual_concurrency, visual_max_pixels)
    idx = open_index(index, device=device, trust_remote_code=trust_remote_code, visual_endpoint=served)
    try:
        if image is not None:  # a search by the picture (and the question, when given)
            picture = open_image(image, str(image))
            request = ImageSearchRequest.of(request, picture, parse_region(region, "--region"))
        elif region is not None:
            raise PagesightError("--region needs --image")
        hits = idx.search(request)
        _report_rerank(idx, request)
        if explain is not None:
            if image is not None:
                raise PagesightError("--explain draws the maps of a text query, not of --image")
            _explain(idx, request.query, hits, explain)
    except PagesightError as exc:
        fail(str(exc))
    if as_json:
        print(json.dumps([hit.to_dict() for hit in hits], ensure_ascii=False))
        return
    table = Table(show_lines=False)
    for column in ("#", "page", "tile", "score", "snippet"):
        table.add_column(column, overflow="fold")
    for rank, hit in enumerate(hits, start=1):
        tile = f"{hit.tile} ({hit.region.kind})" if hit.region is not None else str(hit.tile)
        table.add_row(str(rank), hit.page_id, tile, f"{hit.score:.4f}", hit.snippet)
    out.print(table)


def _explain(idx: Index, query: str, hits: list, folder: Path) -> None:
    """Each hit's similarity map drawn over its tile, saved in ``folder``; one line on stderr each."""
    folder.mkdir(parents=True, exist_ok=True)
    for hit in hits:
        path = folder / f"{hit.page_id}_{hit.tile}.png"
        idx.explain(query, hit.doc_id, hit.page, hit.tile).draw().save(path)
        err.print(f"similarity map: {path}", highlight=False)


def _report_rerank(idx: Index, request: SearchRequest) -> None:
    """One line on stderr: what the reranker of the last search scored, in batches of what, how fast."""
    if request.rerank is not None:
        last = idx.reranker(request.rerank, request.rerank_model).last
        err.print(
            f"reranked {last['candidates']} candidates with {last['reranker']} "
            f"(batch {last['batch_size']}) in {last['ms']:.0f} ms",
            highlight=False,
        )


@app.command()
@request_options(AskRequest, required=("query",))
def ask(
    index: IndexOption,
    request: AskRequest,
    base_url: BaseUrlOption = None,
    api_key: ApiKeyOption = None,
    device: ReaderDeviceOption = None,
    trust_remote_code: TrustOption = False,
    image: Annotated[
        Path | None,
        typer.Option(
            help="An image the question is about (a photo): searched with the question and shown to a "
            "model reader beside the tiles; with --agent, one it may search by regions of."
        ),
    ] = None,
    region: Annotated[
        str | None, typer.Option(help="With --image: search by x0,y0,x1,y1 of it, in its pixels.")
    ] = None,
    html: Annotated[
        Path | None, typer.Option(help="Also write an HTML page showing the cited regions.")
    ] = None,
    visual_endpoint: VisualEndpointOption = None,
    visual_endpoint_key_file: VisualKeyFileOption = None,
    visual_concurrency: VisualConcurrencyOption = CONCURRENCY,
    visual_max_pixels: VisualMaxPixelsOption = None,
    stream: Annotated[
        bool,
        typer.Option(
            "--stream",
            help="Print the answer as the reader writes it (a reader that cannot stream: whole, once "
            "read), then the citations.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Answer a question from the best tiles, with citations.

    Citations name pages and the regions on them; --html shows them cropped, boxes drawn. With
    --image the question is about a picture: the tiles are searched by both, and a model reader
    sees the picture beside them (the extractive reader reads the tiles' text alone). With
    --agent a model reader is given a search tool instead of the tiles: it decides what to search
    (text, or a region of an image it was given), reads the tiles found, and answers.
    """
    from pagesight.answer.show import write_html

    served = served_at(visual_endpoint, visual_endpoint_key_file, visual_concurrency, visual_max_pixels)
    idx = open_index(
        index, device=device or "auto", trust_remote_code=trust_remote_code, visual_endpoint=served
    )
    try:
        reader = build_reader(
            request, trust_remote_code=trust_remote_code, base_url=base_url, api_key=api_key, device=device
        )
        if region is not None and image is None:
            raise PagesightError("--region needs --image")
        if stream and as_json:
            raise PagesightError("--stream prints the answer as text; --json prints it whole")
        question_image = open_image(image, str(image)) if image is not None else None
        asked = {"image": question_image, "region": parse_region(region, "--region")}
        answer = _streamed(idx, request, reader, asked) if stream else idx.ask(request, reader, **asked)
        if html is not None:
            write_html(idx, answer, html)
    except PagesightError as exc:
        fail(str(exc))
    if as_json:
        print(json.dumps(answer.to_dict(), ensure_ascii=False))
        return
    if not answer.answered:
        out.print(
            f"[bold]Not answered: {escape(answer.reason or 'the reader declined')}[/bold]", highlight=False
        )
    elif not stream:
        shown = escape(answer.text) if answer.text else "No answer found in the retrieved pages."
        out.print(f"[bold]{shown}[/bold]", highlight=False)
    for citation in answer.citations:
        boxes = ", ".join("[" + ", ".join(f"{v:.0f}" for v in box) + "]" for box in citation.boxes)
        quote = f' "{citation.text}"' if citation.text and citation.text != answer.text else ""
        out.print(f"  {citation.page_id} tile {citation.tile}:{quote} {boxes}", highlight=False)
    _report(answer)
    if html is not None:
        err.print(f"cited regions: {html}", highlight=False)


def _report(answer: Answer) -> None:
    """On stderr: the searches an agent made, the answer's notes, and one line of what it cost."""
    timing = answer.timings
    for n, made in enumerate(answer.usage.get("searches", []), 1):
        asked = {key: made[key] for key in ("query", "image", "region", "k", "doc_ids") if key in made}
        found = f"error: {made['error']}" if "error" in made else f"{len(made['hits'])} tiles"
        err.print(f"search {n}: {json.dumps(asked, ensure_ascii=False)}: {found}", highlight=False)
    for warning in answer.usage.get("warnings", []):
        err.print(f"note: {warning}", highlight=False)
    stages = "".join(
        f", {name} {timing[name] * 1000:.0f} ms" for name in ("prefill", "decode") if name in timing
    )
    speed = answer.usage.get("decode_tokens_per_s")
    err.print(
        f"{answer.reader}, {len(answer.hits)} tiles, {answer.usage['image_tokens']} image tokens,"
        f" {timing['total'] * 1000:.0f} ms (search {timing['search'] * 1000:.0f} ms{stages})"
        + (f", {speed:g} tokens/s" if speed else ""),
        highlight=False,
    )


def _streamed(idx: Index, request: AskRequest, reader: Reader, asked: dict) -> Answer:
    """The answer to ``request``, its text printed to stdout as the reader writes it."""
    answer = None
    for piece in idx.ask_stream(request, reader, **asked):
        if isinstance(piece, str):
            sys.stdout.write(piece)
            sys.stdout.flush()
        else:
            answer = piece
    sys.stdout.write("\n")
    return answer
