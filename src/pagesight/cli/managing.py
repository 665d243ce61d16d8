"""``pagesight info``, ``documents`` and ``delete``: what an index holds, and removing from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from pagesight.cli.common import IndexOption, JsonOption, err, fail, open_index, out
from pagesight.errors import PagesightError

if TYPE_CHECKING:
    pass

app = typer.Typer()


@app.command()
def info(index: IndexOption, as_json: JsonOption = False) -> None:
    """Counts, models, settings and size of an index."""
    idx = open_index(index)
    data = idx.info()
    if as_json:
        print(json.dumps(data))
        return
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in _info_rows(data):
        table.add_row(key, value)
    out.print(table, highlight=False)


def _info_rows(data: dict) -> list[tuple[str, str]]:
    """``Index.info()`` as labelled lines a person reads: what is stored, how it is searched."""
    settings = data["settings"]
    rows = [
        (
            "index",
            data["path"]
            + (f" ({_size(data['bytes_on_disk'])} on disk)" if data["bytes_on_disk"] is not None else ""),
        ),
        (
            "documents",
            f"{data['documents']:,}: {data['pages']:,} pages in {data['tiles']:,} tiles, "
            f"{data['ocr_pages']:,} pages read by OCR",
        ),
        (
            "languages",
            ", ".join(f"{code} {pages:,} pages" for code, pages in data["languages"].items()) or "none",
        ),
        ("lexical", "BM25 over the tiles' text"),
    ]
    rows += [("dense", _dense_row(data)), ("visual", _visual_row(data))]
    rows.append(
        (
            "rendering",
            f"PDF pages at {settings['dpi']:g} dpi (OCR by {settings.get('ocr_engine', 'rapidocr')} at "
            f"{settings['ocr_dpi']:g} dpi), tiles "
            f"{settings['tile_height']:,} px tall, web pages {settings['viewport_width']} px wide",
        )
    )
    if settings.get("layout"):
        rows.append(
            (
                "layout",
                f"{data['regions']:,} regions found; tables and figures searched on their own: "
                f"{data['region_units']:,}",
            )
        )
    lag = data["retrievers_generation"]
    state = (
        "up to date"
        if lag == data["generation"]
        else "behind the catalog: rebuilt by the next search or ingest"
    )
    rows.append(("retrievers", f"{state} (generation {data['generation']})"))
    return rows


def _dense_row(data: dict) -> str:
    settings = data["settings"]
    if not settings["dense_model"]:
        return "none (made with --no-dense)"
    return (
        f"{settings['dense_model']}: {data['vectors']:,} vectors of {settings['chunk_words']}-word "
        f"chunks ({settings['chunk_overlap']} overlapping)"
    )


def _visual_row(data: dict) -> str:
    settings = data["settings"]
    if data["visual_encoder"]:
        from pagesight.encode.visual import describe_spec

        return (
            f"{describe_spec(data['visual_encoder'])}: {data['visual_vectors']:,} tiles embedded, "
            f"{data['visual_index']} index; query image: {data['query_image']}"
        )
    if settings["visual_encoder"]:
        model = settings["visual_model"] or "its default model"
        return f"'{settings['visual_encoder']}' ({model}): no tile embedded yet"
    return "none"


def _size(n_bytes: int) -> str:
    size, unit = float(n_bytes), "bytes"
    for bigger in ("KB", "MB", "GB"):
        if size < 1000:
            break
        size, unit = size / 1000, bigger
    return f"{n_bytes:,} bytes" if unit == "bytes" else f"{size:,.1f} {unit}"


@app.command()
def documents(
    index: IndexOption,
    where: Annotated[
        str | None, typer.Option(help="Only documents whose fields pass (see search --where).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the documents with their types, pages and sources.

    The ids listed are what delete and --doc take, the language its pages' most frequent; --json
    also gives each document's fields, what --where reads.
    """
    idx = open_index(index)
    try:
        listing = idx.document_list(where)
    except PagesightError as exc:
        fail(str(exc))
    if as_json:
        print(json.dumps(listing))
        return
    if not listing:
        err.print(f"{index}: no documents yet", highlight=False)
        return
    table = Table(box=None, pad_edge=False)
    table.add_column("id", overflow="fold")
    table.add_column("type")
    table.add_column("pages", justify="right")
    table.add_column("language")
    table.add_column("source", overflow="fold")
    for row in listing:
        language = row["fields"].get("language") or ""
        table.add_row(row["id"], row["type"], f"{row['pages']:,}", language, _shown_path(row["source"]))
    out.print(table, highlight=False)
    for row in listing:
        for note in row["notes"]:
            err.print(f"{row['id']}: note: {note}", highlight=False, markup=False, soft_wrap=True)


def _shown_path(source: str) -> str:
    """A source path relative to the current folder when it lies below it."""
    path = Path(source)
    if not path.exists():  # a URL, or a file moved away since
        return source
    path = path.resolve()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


@app.command()
def delete(
    doc_id: Annotated[str, typer.Argument(help="Document id (file stem).")], index: IndexOption
) -> None:
    """Remove a document and all its pages from the index."""
    idx = open_index(index)
    try:
        deleted = idx.delete(doc_id)
    except PagesightError as exc:
        fail(str(exc))
    if not deleted:
        fail(f"{index}: no document '{doc_id}'", code=1)
    err.print(f"deleted {doc_id}", highlight=False)
