"""The ``pagesight`` command line: ingest, search, ask, info, delete, serve, mcp, eval, train, bench."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from PIL import Image
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pagesight import __version__
from pagesight.errors import PagesightError, SettingsConflict
from pagesight.search.documents import DEFAULT_DOCUMENT_WEIGHT
from pagesight.search.fusion import DEFAULT_ALPHA
from pagesight.settings import Settings

if TYPE_CHECKING:
    from pagesight.index import Index

app = typer.Typer(
    help="Retrieval-augmented generation in pixel space: index page images, search them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: reads at 80 columns and in a pipe, and starts faster
    context_settings={"max_content_width": 100},
)
out = Console()
err = Console(stderr=True)


def _print_version(value: bool) -> None:
    if value:
        print(f"pagesight {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    ctx.call_on_close(_close_opened)


IndexOption = Annotated[
    str,
    typer.Option(
        "--index", "-i", help="Index: a directory, or a store (qdrant:FOLDER, qdrant://HOST:PORT/COLLECTION)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
RerankOption = Annotated[
    str | None,
    typer.Option(
        help="Rerank the first-stage hits: cross-encoder, vlm (transformers reader), vlm-openai, or a "
        "visual encoder (colqwen2.5, colpali, ...: MaxSim over the tile images)."
    ),
]
RerankModelOption = Annotated[
    str | None,
    typer.Option(
        help="The reranker's model: hub id or folder (for cross-encoder, the cross-encoder/ folder "
        "pagesight train writes), or the reader's model for vlm."
    ),
]
RerankCandidatesOption = Annotated[int, typer.Option(help="First-stage hits the reranker scores.")]
DeviceOption = Annotated[
    str, typer.Option(help="Where the visual encoder runs: auto, cpu, cuda, cuda:N or mps.")
]


class Ocr(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


class OcrEngine(str, Enum):
    rapidocr = "rapidocr"
    tesseract = "tesseract"


class Mode(str, Enum):
    lexical = "lexical"
    dense = "dense"
    visual = "visual"
    hybrid = "hybrid"


class VisualKind(str, Enum):
    flat = "flat"
    ivf = "ivf"
    hnsw = "hnsw"
    ivfpq = "ivfpq"


class Fusion(str, Enum):
    rrf = "rrf"
    rsf = "rsf"


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _open(path: str | Path, create: bool = False, settings: dict | None = None) -> Index:
    """The index at ``path`` (created with ``settings`` when ``create``); an error ends the
    command, except a settings conflict, which the caller words with its options' names."""
    try:
        from pagesight.index import Index

        index = Index.open(path, create=create, settings=settings)
    except SettingsConflict:
        raise
    except PagesightError as exc:
        _fail(str(exc))
    _OPENED.append(index)
    return index


_OPENED: list[Index] = []  # closed when the command ends (``_main``)


def _close_opened() -> None:
    """Close the indexes the command opened: a store's client (Qdrant's) lets go of its files and
    connections before the interpreter ends, and in-process callers can open the store again."""
    while _OPENED:
        _OPENED.pop().close()


@app.command()
def ingest(
    ctx: typer.Context,
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Files, folders (searched recursively) and URLs; PDFs, images, office files (LibreOffice), "
            "HTML, ZIM archives."
        ),
    ],
    index: IndexOption,
    ocr: Annotated[
        Ocr,
        typer.Option(
            help="OCR pages without a usable text layer (auto), all, or none; web pages take the DOM's "
            "text unless always (then OCR reads their tiles)."
        ),
    ] = Ocr.auto,
    ocr_engine: Annotated[
        OcrEngine,
        typer.Option(
            help="OCR engine: tesseract, or rapidocr (3-4x slower, a little better at rank 1) "
            "(new index only)."
        ),
    ] = OcrEngine.tesseract,
    dense: Annotated[
        bool,
        typer.Option(help="Also embed text (minilm-static) for dense and hybrid search (new index only)."),
    ] = True,
    dense_model: Annotated[
        str | None,
        typer.Option(
            help="The text model: minilm-static (default), minilm-l6-v2 (slower, a little better), or a "
            "MiniLM fine-tuned by pagesight train (its dense/ folder) (new index only)."
        ),
    ] = None,
    dpi: Annotated[float, typer.Option(help="Rendering resolution of PDF pages (new index only).")] = 100.0,
    tile_height: Annotated[int, typer.Option(help="Tile height in pixels (new index only).")] = 1024,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Reader processes (default: one per core).")] = 0,
    timeout: Annotated[
        float,
        typer.Option(help="Seconds allowed to read one file (or render one web page), besides its pages."),
    ] = 120.0,
    page_timeout: Annotated[
        float, typer.Option(help="Seconds more a file may take for each page it has read.")
    ] = 20.0,
    max_memory: Annotated[float, typer.Option(help="GiB of memory a reader process may use.")] = 4.0,
    viewport_width: Annotated[
        int, typer.Option(help="Web pages: browser viewport width in CSS pixels (new index only).")
    ] = 875,
    javascript: Annotated[bool, typer.Option(help="Web pages: run the pages' scripts.")] = True,
    allow_network: Annotated[
        bool, typer.Option(help="Web pages: let pages load resources from outside their folder or archive.")
    ] = False,
    max_page_height: Annotated[
        int, typer.Option(help="Web pages: capture at most this many pixels of a page, noting the cut.")
    ] = 60_000,
    keep_images: Annotated[
        bool, typer.Option(help="Web pages: keep tile images in the index, or render them again on demand.")
    ] = True,
    tabs: Annotated[
        int,
        typer.Option(help="Web pages: browser tabs rendering at once."),
    ] = 2,
    encoder: Annotated[
        str | None,
        typer.Option(
            help="Visual encoder embedding every tile image: colqwen2, dse, clip, ... (new index only)."
        ),
    ] = None,
    encoder_model: Annotated[
        str | None, typer.Option(help="The visual encoder's hub id or local folder (new index only).")
    ] = None,
    encoder_adapter: Annotated[
        str | None, typer.Option(help="A LoRA adapter on the visual encoder (new index only).")
    ] = None,
    visual_index: Annotated[
        VisualKind,
        typer.Option(help="ANN structure of the visual vectors; exact while small (new index only)."),
    ] = VisualKind.ivf,
    device: DeviceOption = "auto",
    layout: Annotated[
        bool,
        typer.Option(
            "--layout",
            help="Index tables and figures, with their captions, as units (new index only).",
        ),
    ] = False,
    heading_weight: Annotated[
        int,
        typer.Option(
            help="BM25: how many times each page's heading counts beside its text (new index only)."
        ),
    ] = Settings.heading_weight,
    period_years: Annotated[
        bool,
        typer.Option(help="BM25: read FY2018, 2023Q2 and the like as their years too (new index only)."),
    ] = Settings.period_years,
    thesaurus: Annotated[
        str,
        typer.Option(help="BM25: expand questions from this thesaurus (finance), or none (new index only)."),
    ] = Settings.thesaurus,
    ray: Annotated[
        bool,
        typer.Option(help="Read and encode files on Ray (a local Ray unless --ray-address)."),
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="With --ray: the cluster (ray://HOST:10001, HOST:6379 or auto); files must be at "
            "the same paths on every node."
        ),
    ] = None,
    ray_encoders: Annotated[int, typer.Option(help="With --ray: actors per encoder model.")] = 1,
    ray_gpus: Annotated[float, typer.Option(help="With --ray: GPUs for each encoder actor.")] = 0.0,
    as_json: JsonOption = False,
) -> None:
    """Add files, folders and URLs to the index.

    The index is created if missing; unchanged inputs are skipped, changed ones replaced.
    """
    from pagesight.encode.visual.base import model_reference

    # The index's settings the command line sets: only those given are checked against an index
    # that exists; a new one takes the rest from Settings' defaults, which the options' match.
    chosen = {
        "dpi": ("dpi", dpi),
        "tile_height": ("tile_height", tile_height),
        "viewport_width": ("viewport_width", viewport_width),
        "dense_model": (
            "dense_model" if _given(ctx, "dense_model") else "dense",
            (model_reference(dense_model) if dense_model else Settings.dense_model) if dense else None,
        ),
        "visual_encoder": ("encoder", encoder),
        "visual_model": ("encoder_model", model_reference(encoder_model) if encoder_model else None),
        "visual_adapter": ("encoder_adapter", model_reference(encoder_adapter) if encoder_adapter else None),
        "visual_index": ("visual_index", visual_index.value),
        "layout": ("layout", layout),
        "ocr_engine": ("ocr_engine", ocr_engine.value),
        "heading_weight": ("heading_weight", heading_weight),
        "period_years": ("period_years", period_years),
        "thesaurus": ("thesaurus", None if thesaurus == "none" else thesaurus),
    }
    given = {name: value for name, (option, value) in chosen.items() if _given(ctx, option)}
    try:
        idx = _open(index, create=True, settings=given)
    except SettingsConflict as exc:
        flags = [_flag(ctx, chosen[name][0]) for name in exc.conflicts]
        made = ", ".join(f"{name}={stored!r}" for name, (stored, _) in exc.conflicts.items())
        named = flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} and {flags[-1]}"
        _fail(
            f"{index}: {named} {'is' if len(flags) == 1 else 'are'} chosen when an index is made "
            f"(it was made with {made}); make a new index for {flags[0] if len(flags) == 1 else 'them'}"
        )
    idx.device = device
    ray_options = None
    if ray or ray_address:
        from pagesight.ingest.distributed import RayOptions

        ray_options = RayOptions(
            address=ray_address,
            readers=jobs or None,
            encoders=max(1, ray_encoders),
            gpus_per_encoder=ray_gpus,
            device=device,
        )
    try:
        report = _add_with_progress(
            idx,
            paths,
            transient=as_json,
            ray=ray_options,
            ocr=ocr.value,
            jobs=jobs or None,
            timeout=timeout,
            page_timeout=page_timeout,
            max_memory=int(max_memory * (1 << 30)) if max_memory > 0 else None,
            web={
                "javascript": javascript,
                "allow_network": allow_network,
                "max_height": max_page_height,
                "keep_images": keep_images,
                "concurrency": max(1, tabs),
            },
        )
    except PagesightError as exc:
        _fail(str(exc))
    for path, note in report.notes:
        err.print(f"{path}: note: {note}", highlight=False, markup=False, soft_wrap=True)
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


def _progress(transient: bool) -> Progress | _LineProgress:
    """A live progress bar on a terminal; plain progress lines on stderr elsewhere (logs, CI)."""
    if not err.is_terminal:
        return _LineProgress()
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
        console=err,
        transient=transient,
    )


@dataclass
class _LineTask:
    description: str
    total: float | None
    note: str
    completed: float = 0
    shown: float = 0.0  # when its last line was printed


class _LineProgress:
    """The part of rich's Progress the commands use, printed as lines: each task's first step,
    then at most one line every ``every`` seconds, and its last step."""

    def __init__(self, every: float = 10.0):
        self.every = every
        self.tasks: list[_LineTask] = []
        self.started = time.monotonic()

    def __enter__(self) -> _LineProgress:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def add_task(self, description: str, total: float | None = None, note: str = "") -> int:
        self.tasks.append(_LineTask(description, total, note))
        return len(self.tasks) - 1

    def update(
        self, task_id: int, *, advance: float = 0, completed: float | None = None, total=None, note=None
    ):
        task = self.tasks[task_id]
        before = task.completed
        task.completed = completed if completed is not None else task.completed + advance
        task.total = total if total is not None else task.total
        task.note = note if note is not None else task.note
        now = time.monotonic()
        done = task.total is not None and task.completed >= task.total
        if task.completed > before and (before == 0 or done or now - task.shown >= self.every):
            task.shown = now
            of = f"/{task.total:g}" if task.total is not None else ""
            err.print(
                f"{task.description}: {task.completed:g}{of} {task.note} ({now - self.started:.0f} s)",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )


def _add_with_progress(idx: Index, paths, transient: bool, **options):
    """``idx.add`` with a progress bar of files and pages on stderr."""
    with _progress(transient) as progress:
        task = progress.add_task("ingest", total=None, note="files, 0 pages")
        pages = 0

        def on_file(path: str, outcome: str, n_pages: int) -> None:
            nonlocal pages
            pages += n_pages
            progress.update(task, advance=1, note=f"files, {pages} pages")

        def on_planned(n: int) -> None:
            progress.update(task, total=n + progress.tasks[0].completed)

        return idx.add(paths, progress=on_file, on_planned=on_planned, **options)


def _reranking(name: str | None, model: str | None, candidates: int, device: str | None) -> dict:
    """``Index.search`` options for ``--rerank``, ``--rerank-model``, ``--rerank-candidates``."""
    if name is None:
        if model is not None:
            raise PagesightError("--rerank-model needs --rerank")
        return {}
    options: dict = {"model": model} if model else {}
    if device and name != "cross-encoder" and name != "vlm-openai":
        options["device"] = device
    return {"rerank": name, "rerank_candidates": candidates, "rerank_options": options}


def _report_rerank(idx: Index, search_options: dict) -> None:
    """One line on stderr: what the reranker of the last search scored, in batches of what, how fast."""
    if search_options:
        last = idx.reranker(search_options["rerank"], **search_options["rerank_options"]).last
        err.print(
            f"reranked {last['candidates']} candidates with {last['reranker']} "
            f"(batch {last['batch_size']}) in {last['ms']:.0f} ms",
            highlight=False,
        )


def _given(ctx: typer.Context, option: str) -> bool:
    """Whether the command's parameter ``option`` was set on the command line, not defaulted."""
    source = ctx.get_parameter_source(option)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def _flag(ctx: typer.Context, option: str) -> str:
    """The command-line flag of the command's parameter ``option`` (``--dense-model``)."""
    return next(max(param.opts, key=len) for param in ctx.command.params if param.name == option)


def _query_image(path: Path) -> Image.Image:
    try:
        with Image.open(path) as opened:
            return opened.convert("RGB")
    except (OSError, ValueError) as exc:
        raise PagesightError(f"{path}: cannot read the query image ({exc})") from None


def _region(text: str | None) -> tuple[float, float, float, float] | None:
    if text is None:
        return None
    try:
        x0, y0, x1, y1 = (float(v) for v in text.split(","))
    except ValueError:
        raise PagesightError(f"--region must be x0,y0,x1,y1 in pixels, got '{text}'") from None
    return x0, y0, x1, y1


@app.command()
def search(
    index: IndexOption,
    query: Annotated[str, typer.Argument(help="The question or keywords (none with --image).")] = "",
    k: Annotated[int, typer.Option("-k", help="Number of hits.")] = 10,
    mode: Annotated[
        Mode | None, typer.Option(help="Retrievers: lexical, dense, visual or hybrid (default).")
    ] = None,
    fusion: Annotated[
        Fusion, typer.Option(help="Hybrid fusion: reciprocal rank or relative score.")
    ] = Fusion.rsf,
    alpha: Annotated[
        float, typer.Option(help="Relative score fusion: weight of the dense side.")
    ] = DEFAULT_ALPHA,
    document_weight: Annotated[
        float,
        typer.Option(
            help="Weight of a hit's document score (its best pages) beside its own; 0: pages alone."
        ),
    ] = DEFAULT_DOCUMENT_WEIGHT,
    doc: Annotated[list[str] | None, typer.Option("--doc", help="Only this document (repeatable).")] = None,
    image: Annotated[
        Path | None,
        typer.Option(help="Search with this image (or --region of it) instead of QUERY: visual indexes."),
    ] = None,
    region: Annotated[
        str | None, typer.Option(help="With --image: x0,y0,x1,y1 in the image's pixels.")
    ] = None,
    device: DeviceOption = "auto",
    rerank: RerankOption = None,
    rerank_model: RerankModelOption = None,
    rerank_candidates: RerankCandidatesOption = 50,
    as_json: JsonOption = False,
) -> None:
    """Search with a text query, or an image or image region.

    Hits are tiles with their page, score per retriever, snippet and evidence boxes.
    """
    idx = _open(index)
    idx.device = device
    try:
        if image is not None:
            hits = idx.search_image(_query_image(image), k=k, region=_region(region), doc_ids=doc)
        else:
            if region is not None:
                raise PagesightError("--region needs --image")
            reranking = _reranking(rerank, rerank_model, rerank_candidates, device)
            hits = idx.search(
                query,
                k=k,
                mode=mode.value if mode else None,
                fusion=fusion.value,
                alpha=alpha,
                document_weight=document_weight,
                doc_ids=doc,
                **reranking,
            )
            _report_rerank(idx, reranking)
    except PagesightError as exc:
        _fail(str(exc))
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


class Strategy(str, Enum):
    auto = "auto"
    all = "all"
    concat = "concat"
    weighted = "weighted"


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    index: IndexOption,
    reader: Annotated[
        str, typer.Option(help="Reader: extractive (offline default), openai, transformers.")
    ] = "extractive",
    k: Annotated[int, typer.Option("-k", help="Tiles given to the reader.")] = 5,
    mode: Annotated[
        Mode | None, typer.Option(help="Retrievers: lexical, dense, visual or hybrid (default).")
    ] = None,
    compression: Annotated[
        float, typer.Option("-c", "--compression", help="Tile images shrink by sqrt(c) per side.")
    ] = 1.0,
    strategy: Annotated[
        Strategy, typer.Option(help="For one-image readers: concat (pages side by side) or weighted.")
    ] = Strategy.auto,
    model: Annotated[
        str | None, typer.Option(help="Reader model: hub id, local folder or served name.")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="openai reader: the endpoint's base URL.")] = None,
    api_key: Annotated[str | None, typer.Option(help="openai reader: API key.")] = None,
    device: Annotated[
        str | None, typer.Option(help="transformers reader and visual encoder: cpu, cuda, mps or auto.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="Model readers: the longest answer, in tokens (default 512).")
    ] = None,
    inputs: Annotated[
        str | None,
        typer.Option(help="Model readers: images (default), text (the tiles' text) or images+text."),
    ] = None,
    doc: Annotated[list[str] | None, typer.Option("--doc", help="Only this document (repeatable).")] = None,
    agent: Annotated[
        bool, typer.Option("--agent", help="Model readers: the reader searches itself (-k tiles a search).")
    ] = False,
    max_searches: Annotated[int, typer.Option(help="With --agent: the most searches it may make.")] = 3,
    image: Annotated[
        Path | None,
        typer.Option(help="With --agent: an image the question is about, which it may search by regions of."),
    ] = None,
    html: Annotated[
        Path | None, typer.Option(help="Also write an HTML page showing the cited regions.")
    ] = None,
    rerank: RerankOption = None,
    rerank_model: RerankModelOption = None,
    rerank_candidates: RerankCandidatesOption = 50,
    as_json: JsonOption = False,
) -> None:
    """Answer a question from the best tiles, with citations.

    Citations name pages and the regions on them; --html shows them cropped, boxes drawn. With
    --agent a model reader is given a search tool instead of the tiles: it decides what to search
    (text, or a region of an image it was given), reads the tiles found, and answers.
    """
    from pagesight.answer import make_reader
    from pagesight.answer.show import write_html

    options = {
        "model": model,
        "base_url": base_url,
        "api_key": api_key,
        "device": device,
        "max_tokens": max_tokens,
        "inputs": inputs,
    }
    options = {key: value for key, value in options.items() if value is not None}
    if reader == "openai" and strategy == Strategy.weighted:
        options["logprobs"] = True  # weighted selection weighs each answer by its probability
    idx = _open(index)
    idx.device = device or "auto"
    try:
        try:
            chosen = make_reader(reader, **options)
        except TypeError:
            raise PagesightError(
                f"reader '{reader}' takes none of --{' --'.join(o.replace('_', '-') for o in options)}"
            ) from None
        if image is not None and not agent:
            raise PagesightError("--image needs --agent")
        answer = idx.ask(
            question,
            chosen,
            k=k,
            **_reranking(rerank, rerank_model, rerank_candidates, device),
            mode=mode.value if mode else None,
            compression=compression,
            strategy=strategy.value,
            doc_ids=doc,
            agent=agent,
            max_searches=max_searches,
            image=_query_image(image) if image is not None else None,
        )
        if html is not None:
            write_html(idx, answer, html)
    except PagesightError as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps(answer.to_dict(), ensure_ascii=False))
        return
    out.print(f"[bold]{answer.text or 'No answer found in the retrieved pages.'}[/bold]", highlight=False)
    for citation in answer.citations:
        boxes = ", ".join("[" + ", ".join(f"{v:.0f}" for v in box) + "]" for box in citation.boxes)
        quote = f' "{citation.text}"' if citation.text and citation.text != answer.text else ""
        out.print(f"  {citation.page_id} tile {citation.tile}:{quote} {boxes}", highlight=False)
    timing = answer.timings
    for n, made in enumerate(answer.usage.get("searches", []), 1):
        asked = {key: made[key] for key in ("query", "image", "region", "k", "doc_ids") if key in made}
        found = f"error: {made['error']}" if "error" in made else f"{len(made['hits'])} tiles"
        err.print(f"search {n}: {json.dumps(asked, ensure_ascii=False)}: {found}", highlight=False)
    err.print(
        f"{answer.reader}, {len(answer.hits)} tiles, {answer.usage['image_tokens']} image tokens,"
        f" {timing['total'] * 1000:.0f} ms (search {timing['search'] * 1000:.0f} ms)",
        highlight=False,
    )
    if html is not None:
        err.print(f"cited regions: {html}", highlight=False)


@app.command()
def info(index: IndexOption, as_json: JsonOption = False) -> None:
    """Counts, models, settings and size of an index."""
    idx = _open(index)
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
        ("lexical", "BM25 over the tiles' text"),
    ]
    if settings["dense_model"]:
        rows.append(
            (
                "dense",
                f"{settings['dense_model']}: {data['vectors']:,} vectors of {settings['chunk_words']}-word "
                f"chunks ({settings['chunk_overlap']} overlapping)",
            )
        )
    else:
        rows.append(("dense", "none (made with --no-dense)"))
    if data["visual_encoder"]:
        from pagesight.encode.visual import describe_spec

        rows.append(
            (
                "visual",
                f"{describe_spec(data['visual_encoder'])}: {data['visual_vectors']:,} tiles embedded, "
                f"{settings['visual_index']} index",
            )
        )
    elif settings["visual_encoder"]:
        model = settings["visual_model"] or "its default model"
        rows.append(("visual", f"'{settings['visual_encoder']}' ({model}): no tile embedded yet"))
    else:
        rows.append(("visual", "none"))
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


def _size(n_bytes: int) -> str:
    size, unit = float(n_bytes), "bytes"
    for bigger in ("KB", "MB", "GB"):
        if size < 1000:
            break
        size, unit = size / 1000, bigger
    return f"{n_bytes:,} bytes" if unit == "bytes" else f"{size:,.1f} {unit}"


@app.command()
def documents(index: IndexOption, as_json: JsonOption = False) -> None:
    """List the documents with their types, pages and sources.

    The ids listed are what delete and --doc take.
    """
    idx = _open(index)
    listing = idx.document_list()
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
    table.add_column("source", overflow="fold")
    for row in listing:
        table.add_row(row["id"], row["type"], f"{row['pages']:,}", _shown_path(row["source"]))
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
    idx = _open(index)
    try:
        deleted = idx.delete(doc_id)
    except PagesightError as exc:
        _fail(str(exc))
    if not deleted:
        _fail(f"{index}: no document '{doc_id}'", code=1)
    err.print(f"deleted {doc_id}", highlight=False)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


@app.command()
def serve(
    index: IndexOption,
    host: Annotated[
        str, typer.Option(help="Address to bind; beyond loopback it needs --api-key (or --insecure).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="PAGESIGHT_API_KEY",
            show_envvar=True,
            help="Key every API request must carry (Authorization: Bearer KEY or X-API-Key); "
            "without one, uploads and deletes are refused.",
        ),
    ] = None,
    max_upload_mb: Annotated[float, typer.Option(help="Largest request body (an upload), in MB.")] = 100.0,
    readers: Annotated[
        int, typer.Option(help="Searches served at once, each with its own retrievers in memory.")
    ] = 4,
    uploads: Annotated[
        Path | None, typer.Option(help="Folder for uploaded files (default: uploads/ in the index).")
    ] = None,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure", help="Allow binding beyond loopback without an API key (readable by all)."
        ),
    ] = False,
    device: DeviceOption = "auto",
) -> None:
    """Serve the index over HTTP: a web page and a JSON API.

    The API is documented at /docs (OpenAPI). Binds to 127.0.0.1; with --api-key every request needs
    the key, and uploads and deletes are allowed.
    """
    if host not in LOOPBACK and not api_key and not insecure:
        _fail(
            f"--host {host} serves beyond this machine: give --api-key KEY (or --insecure to serve it open)"
        )
    if max_upload_mb <= 0 or readers < 1:
        _fail("--max-upload-mb and --readers must be positive")
    import uvicorn

    from pagesight.serve.app import create_app

    idx = _open(index)
    idx.device = device
    if uploads is None and not idx.root.is_dir():
        _fail(f"{index}: not a folder, so uploads need a folder of their own: give --uploads DIR")
    from pagesight.serve.mcp import http_app
    from pagesight.store.local import LocalStore

    # MCP at /mcp through an index of its own (its tools take turns on it); Qdrant's local mode
    # lets one client open a folder, so there `pagesight mcp` serves the tools instead.
    mcp = http_app(_open(index), host=host) if isinstance(idx.store, LocalStore) else None
    try:
        web = create_app(
            idx, api_key=api_key, max_upload_mb=max_upload_mb, readers=readers, uploads=uploads, mcp_app=mcp
        )
    except PagesightError as exc:
        _fail(str(exc))
    shown = f"[{host}]" if ":" in host else host
    writes = "uploads and deletes on: API key set" if api_key else "read-only: no API key"
    tools = f", MCP at http://{shown}:{port}/mcp" if mcp is not None else ""
    err.print(f"serving {index} at http://{shown}:{port}/ ({writes}{tools})", highlight=False)
    uvicorn.run(web, host=host, port=port, log_level="warning")


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
) -> None:
    """Serve the index as MCP tools for agents.

    Tools: search, ask, get_page and list_documents, over stdio (what an agent launches: see the
    README for the mcpServers entry), or with --http over streamable HTTP at http://HOST:PORT/mcp.
    """
    from pagesight.answer import make_reader
    from pagesight.serve.mcp import serve as serve_mcp

    idx = _open(index)
    idx.device = device
    options = {key: value for key, value in (("model", model), ("base_url", base_url)) if value is not None}
    chosen = reader  # the extractive reader is made on the first ask, so the server starts at once
    if reader != "extractive" or options:
        try:
            chosen = make_reader(reader, **options)
        except (PagesightError, TypeError) as exc:
            _fail(f"reader '{reader}': {exc}")
    if http:
        shown = f"[{host}]" if ":" in host else host
        err.print(f"serving MCP for {index} at http://{shown}:{port}/mcp", highlight=False)
    serve_mcp(idx, chosen, http=http, host=host, port=port)


@app.command("eval")
def evaluate(
    dataset: Annotated[Path, typer.Argument(help="Dataset folder: documents, queries.jsonl, qrels.tsv.")],
    index: Annotated[
        str | None,
        typer.Option(
            "--index", "-i", help="Index directory or store (default: a folder cached per dataset)."
        ),
    ] = None,
    mode: Annotated[
        list[str] | None,
        typer.Option(
            "--mode",
            "-m",
            help="Configuration(s): lexical, dense, visual, hybrid (the search default), rrf, rsf:ALPHA; "
            "each with /doc:WEIGHT for another document weight, then /within. Repeatable.",
        ),
    ] = None,
    within_document: Annotated[
        bool,
        typer.Option(
            help="Also search each question inside its own documents only (queries.jsonl's doc_ids, "
            "else its relevant pages' documents), as long-document benchmarks do."
        ),
    ] = False,
    sweep: Annotated[bool, typer.Option(help="Add relative score fusion at alpha 0, 0.1, ..., 1.")] = False,
    report: Annotated[
        Path | None, typer.Option(help="Write report.md/.html, plots and TREC runs into this folder.")
    ] = None,
    depth: Annotated[int, typer.Option(help="Ranked corpus items kept per query.")] = 100,
    primary: Annotated[str, typer.Option(help="Metric that picks the best configuration.")] = "ndcg@10",
    reader: Annotated[
        str | None,
        typer.Option(
            help="Also answer the questions of answers.jsonl with this reader (best configuration)."
        ),
    ] = None,
    answer_k: Annotated[int, typer.Option(help="Tiles given to the reader.")] = 5,
    judge_model: Annotated[
        str | None, typer.Option(help="Judge answers with this model on an OpenAI-compatible endpoint.")
    ] = None,
    judge_base_url: Annotated[str | None, typer.Option(help="The judge's endpoint.")] = None,
    rerank: Annotated[
        str | None,
        typer.Option(
            help="Also evaluate each configuration reranked by this reranker (see search --rerank)."
        ),
    ] = None,
    rerank_model: RerankModelOption = None,
    rerank_candidates: RerankCandidatesOption = 50,
    as_json: JsonOption = False,
) -> None:
    """Score search (and answers) on a dataset.

    Recall@k, nDCG@10, MRR@10 and Success@k per configuration; with --reader, also exact match,
    F1, relaxed accuracy and containment of the answers.
    """
    from pagesight.eval.answers import openai_judge
    from pagesight.eval.dataset import Dataset
    from pagesight.eval.harness import default_index_dir
    from pagesight.eval.runner import evaluate_dataset
    from pagesight.store.base import store_exists

    if judge_model and reader is None:
        _fail("--judge-model needs --reader")
    with _progress(transient=True) as progress:
        tasks: dict = {}

        def searched(config, done: int, total: int) -> None:
            if config not in tasks:
                tasks[config] = progress.add_task(config.name, total=total, note="queries")
            progress.update(tasks[config], completed=done)

        def answered(done: int, total: int) -> None:
            if "answers" not in tasks:
                tasks["answers"] = progress.add_task("answers", total=total, note="questions")
            progress.update(tasks["answers"], completed=done)

        try:
            reranking = _reranking(rerank, rerank_model, rerank_candidates, None)
            data = Dataset.load(dataset)
            path = index or default_index_dir(data)
            if not store_exists(path):
                err.print(f"indexing {data.documents} into {path}", highlight=False)
            evaluation = evaluate_dataset(
                data,
                index=path,
                modes=mode or (),
                sweep=sweep,
                depth=depth,
                primary=primary,
                rerank=rerank,
                rerank_candidates=rerank_candidates,
                rerank_options=reranking.get("rerank_options"),
                within_document=within_document,
                reader=reader,
                answer_k=answer_k,
                judge=openai_judge(judge_model, judge_base_url) if judge_model else None,
                report=report,
                progress=searched,
                answer_progress=answered,
            )
        except PagesightError as exc:
            _fail(str(exc))
    for failed_path, reason in evaluation.failed:
        err.print(f"{failed_path}: {reason}", highlight=False, markup=False, soft_wrap=True)
    if evaluation.report_files:
        err.print(f"report: {evaluation.report_files['html']}", highlight=False)
    if as_json:
        print(json.dumps(evaluation.to_dict()))
        return
    _print_summaries(evaluation.summaries())
    if evaluation.answers is not None:
        summary = evaluation.answers.summary()
        names = [
            key for key in ("exact_match", "f1", "relaxed_accuracy", "contains", "cites_relevant", "judge")
        ]
        scores = ", ".join(f"{name} {summary[name]:.4f}" for name in names if name in summary)
        out.print(
            f"answers ({summary['reader']}, {summary['config']}, {summary['n_answers']} questions): {scores}",
            highlight=False,
        )


def _print_summaries(summaries: list[dict]) -> None:
    columns = ("recall@1", "recall@5", "recall@10", "recall@20", "ndcg@10", "mrr@10")  # all in --json
    table = Table(pad_edge=False)
    # A long configuration name folds onto a second line; the numbers are never cut.
    table.add_column("config", overflow="fold")
    for column in columns:
        name = column.replace("recall", "R").replace("ndcg", "nDCG").replace("mrr", "MRR")
        table.add_column(name, justify="right", no_wrap=True, min_width=6)
    table.add_column("p50 ms", justify="right", no_wrap=True)
    for s in summaries:
        latency = f"{s['latency_ms_p50']:.1f}" if "latency_ms_p50" in s else "-"
        table.add_row(s["config"], *(f"{s[c]:.4f}" for c in columns), latency)
    out.print(table)
    pages = f", {summaries[0]['n_pages']} pages" if "n_pages" in summaries[0] else ""
    out.print(f"{summaries[0]['n_queries']} queries{pages}", highlight=False)


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="Saved runs in TREC format (from eval --report).")],
    qrels: Annotated[Path, typer.Option(help="qrels.tsv of the dataset the runs answer.")],
    at: Annotated[str, typer.Option(help="Success metric for wins and losses.")] = "success@5",
    as_json: JsonOption = False,
) -> None:
    """Compare saved evaluation runs.

    Metrics side by side, and the queries only one of them gets right.
    """
    from pagesight.eval import metrics
    from pagesight.eval.dataset import read_qrels
    from pagesight.eval.harness import Config, Result
    from pagesight.eval.report import comparisons
    from pagesight.eval.runs import read_trec

    try:
        judged = read_qrels(qrels)
        loaded = []
        for path in runs:
            run, tag = read_trec(path)
            per_query = metrics.per_query({q: [d for d, _ in ranked] for q, ranked in run.items()}, judged)
            loaded.append(Result(Config(tag or path.stem, "saved"), run, per_query, latencies=[0.0]))
    except (PagesightError, OSError) as exc:
        _fail(str(exc))
    if at not in next(iter(loaded[0].per_query.values())):
        _fail(f"--at must be one of success@1, success@5, success@10, got '{at}'")
    summaries = [{"config": r.config.name, **r.means, "n_queries": len(r.per_query)} for r in loaded]
    pairs = comparisons(loaded, at)
    if as_json:
        print(json.dumps({"runs": summaries, "comparisons": pairs}))
        return
    _print_summaries(summaries)
    for pair in pairs:
        out.print(
            f"{pair['a']} vs {pair['b']} at {at}: only {pair['a']} {len(pair['only_a'])}, "
            f"only {pair['b']} {len(pair['only_b'])}, both {pair['both']}, neither {pair['neither']}",
            highlight=False,
        )


@app.command()
def train(
    index: IndexOption,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the queries, models and report.")],
    sample: Annotated[int, typer.Option(help="Tiles to write queries for (0: every tile with text).")] = 0,
    per_tile: Annotated[int, typer.Option(help="Queries per tile.")] = 2,
    reader: Annotated[
        str | None,
        typer.Option(help="Write the queries with this reader (openai, transformers) shown each tile image."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="The reader's model.")] = None,
    base_url: Annotated[str | None, typer.Option(help="openai reader: the endpoint's base URL.")] = None,
    negatives_from: Annotated[
        list[Mode] | None, typer.Option(help="Retrievers to mine hard negatives with (repeatable).")
    ] = None,
    negatives: Annotated[int, typer.Option(help="Hard negatives per query.")] = 3,
    depth: Annotated[int, typer.Option(help="Ranks searched for hard negatives.")] = 30,
    margin: Annotated[
        float, typer.Option(help="Drop candidates scoring at least this fraction of the positive's score.")
    ] = 0.95,
    heldout: Annotated[float, typer.Option(help="Share of the tiles whose queries are held out.")] = 0.1,
    dense: Annotated[bool, typer.Option(help="Train the index's dense text model.")] = True,
    cross_encoder: Annotated[
        bool, typer.Option("--cross-encoder", help="Train a cross-encoder reranker from MiniLM's weights.")
    ] = False,
    cross_passage_words: Annotated[
        int | None,
        typer.Option(help="Cross-encoder: words per passage (overlap a sixth); default the index's chunks."),
    ] = None,
    visual: Annotated[
        bool, typer.Option("--visual", help="Train a LoRA adapter for the index's visual encoder.")
    ] = False,
    lora: Annotated[
        bool, typer.Option("--lora", help="Dense model: LoRA instead of full fine-tuning.")
    ] = False,
    lora_rank: Annotated[int, typer.Option(help="LoRA rank.")] = 16,
    lora_vision: Annotated[
        bool, typer.Option("--lora-vision", help="Visual encoder: adapt the vision tower too.")
    ] = False,
    gradient_checkpointing: Annotated[
        bool,
        typer.Option(
            "--gradient-checkpointing",
            help="Visual encoder: recompute activations in backward (less memory, about a third slower).",
        ),
    ] = False,
    epochs: Annotated[float, typer.Option(help="Passes over the training queries.")] = 1.0,
    batch_size: Annotated[
        int, typer.Option(help="Queries per optimiser step (the in-batch negatives).")
    ] = 32,
    cache_batch: Annotated[
        int | None,
        typer.Option(help="Gradient caching: encode this many at a time, the whole batch in-batch."),
    ] = None,
    accumulation: Annotated[int, typer.Option(help="Micro-batches per step (without gradient caching).")] = 1,
    learning_rate: Annotated[float | None, typer.Option(help="Default: 3e-5 (full), 1e-4 (LoRA).")] = None,
    temperature: Annotated[float, typer.Option(help="InfoNCE temperature.")] = 0.05,
    max_steps: Annotated[int | None, typer.Option(help="Stop each training after this many steps.")] = None,
    device: DeviceOption = "auto",
    seed: Annotated[int, typer.Option(help="Seed of the sampling, splits and training.")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Fine-tune retrievers on the index's own pages.

    Synthetic queries, hard negatives mined from the index, contrastive training of MiniLM (and
    of visual encoders with --visual), a cross-encoder reranker.

    Writes OUT/queries and OUT/heldout (datasets for pagesight eval), OUT/dense (a MiniLM that
    ingest --dense-model loads; with --lora also OUT/dense-adapter), OUT/cross-encoder (for search
    --rerank cross-encoder --rerank-model), OUT/visual-adapter (for ingest --encoder-adapter) and
    OUT/report.json: queries made and filtered, negatives and their thresholds, losses, time, memory,
    held-out metrics before and after.
    """
    from pagesight.train.contrastive import Options
    from pagesight.train.run import TrainConfig
    from pagesight.train.run import train as run_training

    idx = _open(index)
    idx.device = device
    rate = learning_rate or (1e-4 if lora else 3e-5)
    options = dict(
        epochs=epochs,
        batch_size=batch_size,
        cache_batch=cache_batch,
        accumulation=accumulation,
        temperature=temperature,
        lora_rank=lora_rank,
        max_steps=max_steps,
        seed=seed,
    )
    try:
        chosen_reader = None
        if reader is not None:
            from pagesight.answer import make_reader

            settings = {"model": model, "base_url": base_url} if reader == "openai" else {"model": model}
            chosen_reader = make_reader(reader, **settings)
        config = TrainConfig(
            sample=sample,
            per_tile=per_tile,
            reader=chosen_reader,
            negatives_from=tuple(r.value for r in negatives_from or [Mode.hybrid]),
            negatives=negatives,
            depth=depth,
            margin=margin,
            heldout=heldout,
            dense=dense,
            cross_encoder=cross_encoder,
            cross_passage=(cross_passage_words, cross_passage_words // 6) if cross_passage_words else None,
            visual=visual,
            dense_options=Options(learning_rate=rate, lora=lora, **options),
            cross_options=Options(learning_rate=learning_rate or 3e-5, **options),
            visual_options=Options(
                learning_rate=learning_rate or 1e-4,
                lora=True,
                lora_vision=lora_vision,
                gradient_checkpointing=gradient_checkpointing,
                **options,
            ),
            seed=seed,
        )
        with _progress(transient=True) as progress:
            tasks: dict[str, int] = {}

            def show(stage: str, done: int, total: int, note: str) -> None:
                if stage not in tasks:
                    tasks[stage] = progress.add_task(stage, total=total, note=note)
                progress.update(tasks[stage], completed=done, note=note)

            report = run_training(idx, out, config, show)
    except PagesightError as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps(report))
        return
    _print_training(report)


def _print_training(report: dict) -> None:
    made = report["queries"]
    out.print(
        f"queries: {made['made']} from {made['tiles_sampled']} tiles ({made['train']} train, "
        f"{made['heldout']} held out), {made['source']}",
        highlight=False,
    )
    mined = report["negatives"]
    out.print(
        f"hard negatives: {mined['kept']} kept of {mined['candidates_seen']} seen, dropped {mined['dropped']}; "
        f"thresholds: {mined['thresholds']}",
        highlight=False,
    )
    for name in ("dense", "cross_encoder", "visual"):
        if name in report:
            part = report[name]
            out.print(
                f"{name}: {part['steps']} steps in {part['seconds']:.0f} s, loss {part['loss_first_steps']} -> "
                f"{part['loss_last_steps']}, peak {part['peak_rss_mb']:.0f} MB; saved {part['saved']}",
                highlight=False,
            )
            for when in ("heldout_before", "heldout_after"):
                if part.get(when):
                    out.print(f"  {when}: {json.dumps(part[when])}", highlight=False)
    out.print(f"report: {report['out']}/report.json", highlight=False)


@app.command("import-dataset")
def import_dataset(
    source: Annotated[
        Path, typer.Argument(help="ViDoRe/MTEB-style tables (Parquet or JSONL) or a BEIR folder.")
    ],
    out: Annotated[Path, typer.Argument(help="New dataset folder for `pagesight eval`.")],
    split: Annotated[str, typer.Option(help="Split to take where the source has several.")] = "test",
) -> None:
    """Convert a public dataset into the layout eval reads."""
    from pagesight.eval.importers import import_dataset as convert

    try:
        counts = convert(source, out, split=split)
    except PagesightError as exc:
        _fail(str(exc))
    err.print(
        f"{out}: {counts['corpus']} corpus items, {counts['queries']} queries, {counts['qrels']} judgements",
        highlight=False,
    )


@app.command()
def bench(
    paths: Annotated[list[Path], typer.Argument(help="Files and folders to ingest for the benchmark.")],
    index: Annotated[
        Path | None,
        typer.Option("--index", "-i", help="Keep the benchmark index here (new; default: temporary)."),
    ] = None,
    queries: Annotated[
        Path | None,
        typer.Option(help="queries.jsonl to time (default: 100 six-word spans of the indexed text)."),
    ] = None,
    dense: Annotated[bool, typer.Option(help="Include dense vectors (MiniLM).")] = True,
    scale: Annotated[
        list[int] | None,
        typer.Option(help="Also time dense search over this many random vectors. Repeatable."),
    ] = None,
    max_pages: Annotated[int, typer.Option(help="Pages timed stage by stage.")] = 100,
    ocr_pages: Annotated[int, typer.Option(help="Of those, pages also OCRed.")] = 5,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Reader processes (default: one per core).")] = 0,
) -> None:
    """Measure ingestion, search latency, size and memory.

    Ingestion per stage and end to end; prints JSON.
    """
    from pagesight import bench as benchmark

    if index is not None and index.exists() and any(index.iterdir()):
        _fail(f"{index}: exists and is not empty; the benchmark needs a new index")
    asked = None
    if queries is not None:
        try:
            from pagesight.eval.dataset import read_jsonl

            asked = [row["text"] for row in read_jsonl(queries, ("text",))]
        except PagesightError as exc:
            _fail(str(exc))
    settings = Settings() if dense else Settings(dense_model=None)
    result = benchmark.run(
        paths, settings, index_dir=index, queries=asked, scale_sizes=scale or (), max_pages=max_pages,
        ocr_pages=ocr_pages, jobs=jobs or None,
    )  # fmt: skip
    print(json.dumps(result, indent=1))
