"""The ``pagesight`` command line: ingest, search, info, delete."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pagesight.errors import PagesightError
from pagesight.index import DEFAULT_ALPHA, Index
from pagesight.settings import Settings

app = typer.Typer(
    help="Retrieval-augmented generation in pixel space: index page images, search them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

IndexOption = Annotated[Path, typer.Option("--index", "-i", help="Index directory.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


class Ocr(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


class Mode(str, Enum):
    lexical = "lexical"
    dense = "dense"
    hybrid = "hybrid"


class Fusion(str, Enum):
    rrf = "rrf"
    rsf = "rsf"


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _open(path: Path, create: bool = False, settings: Settings | None = None) -> Index:
    try:
        return Index.open(path, create=create, settings=settings)
    except PagesightError as exc:
        _fail(str(exc))


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files and folders (searched recursively).")],
    index: IndexOption,
    ocr: Annotated[
        Ocr, typer.Option(help="OCR pages without a usable text layer (auto), all, or none.")
    ] = Ocr.auto,
    dense: Annotated[
        bool, typer.Option(help="Also embed text with MiniLM for dense and hybrid search (new index only).")
    ] = True,
    dpi: Annotated[float, typer.Option(help="Rendering resolution of PDF pages (new index only).")] = 100.0,
    tile_height: Annotated[int, typer.Option(help="Tile height in pixels (new index only).")] = 1024,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Reader processes (default: one per core).")] = 0,
    timeout: Annotated[float, typer.Option(help="Seconds allowed to read one file.")] = 120.0,
    max_memory: Annotated[float, typer.Option(help="GiB of memory a reader process may use.")] = 4.0,
    as_json: JsonOption = False,
) -> None:
    """Add files to the index (created if missing). Unchanged files are skipped."""
    settings = Settings(dpi=dpi, tile_height=tile_height, dense_model=Settings.dense_model if dense else None)
    exists = (index / "catalog.sqlite").exists()
    idx = _open(index, create=True, settings=None if exists else settings)
    if exists and idx.settings.dense_model is None and dense and _given("--dense"):
        _fail(f"{index}: index was created without dense vectors; make a new index for --dense")
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[pages]} pages"),
        TimeElapsedColumn(),
        console=err,
        transient=as_json,
        disable=not err.is_terminal and not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task("ingest", total=None, pages=0)
        pages = 0

        def on_file(path: str, outcome: str, n_pages: int) -> None:
            nonlocal pages
            pages += n_pages
            progress.update(task, advance=1, pages=pages)

        def on_planned(n: int) -> None:
            progress.update(task, total=n + progress.tasks[0].completed)

        try:
            report = idx.add(
                paths,
                ocr=ocr.value,
                jobs=jobs or None,
                timeout=timeout,
                max_memory=int(max_memory * (1 << 30)) if max_memory > 0 else None,
                progress=on_file,
                on_planned=on_planned,
            )
        except PagesightError as exc:
            _fail(str(exc))
    for path, reason in report.failed:
        err.print(f"{path}: {reason}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        print(json.dumps(report.to_dict()))
    else:
        err.print(
            f"{len(report.added)} added, {len(report.replaced)} replaced, {len(report.unchanged)} unchanged, "
            f"{len(report.failed)} failed; {report.pages} pages read",
            highlight=False,
        )
    idx.close()
    raise typer.Exit(0 if report.ok else 1)


def _given(flag: str) -> bool:
    return flag in sys.argv


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="The question or keywords.")],
    index: IndexOption,
    k: Annotated[int, typer.Option("-k", help="Number of hits.")] = 10,
    mode: Annotated[Mode | None, typer.Option(help="Retrievers: lexical, dense or hybrid (default).")] = None,
    fusion: Annotated[
        Fusion, typer.Option(help="Hybrid fusion: reciprocal rank or relative score.")
    ] = Fusion.rsf,
    alpha: Annotated[
        float, typer.Option(help="Relative score fusion: weight of the dense side.")
    ] = DEFAULT_ALPHA,
    doc: Annotated[list[str] | None, typer.Option("--doc", help="Only these document ids.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Search the index with a text query."""
    idx = _open(index)
    try:
        hits = idx.search(
            query, k=k, mode=mode.value if mode else None, fusion=fusion.value, alpha=alpha, doc_ids=doc
        )
    except PagesightError as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps([hit.to_dict() for hit in hits], ensure_ascii=False))
        return
    table = Table(show_lines=False)
    for column in ("#", "page", "tile", "score", "snippet"):
        table.add_column(column, overflow="fold")
    for rank, hit in enumerate(hits, start=1):
        table.add_row(str(rank), hit.page_id, str(hit.tile), f"{hit.score:.4f}", hit.snippet)
    out.print(table)


@app.command()
def info(index: IndexOption, as_json: JsonOption = False) -> None:
    """Counts, settings and size of an index."""
    idx = _open(index)
    data = idx.info()
    if as_json:
        print(json.dumps(data))
        return
    for key, value in data.items():
        out.print(f"[bold]{key}[/bold]: {value}", highlight=False)


@app.command()
def delete(
    doc_id: Annotated[str, typer.Argument(help="Document id (file stem).")], index: IndexOption
) -> None:
    """Remove a document and all its pages from the index."""
    idx = _open(index)
    try:
        deleted = idx.delete(doc_id)
    except PagesightError as exc:
        _fail(str(exc))
    if not deleted:
        _fail(f"{index}: no document '{doc_id}'", code=1)
    err.print(f"deleted {doc_id}", highlight=False)
