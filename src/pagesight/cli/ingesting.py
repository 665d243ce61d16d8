"""``pagesight ingest``: files, folders and URLs into an index, with progress."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from pagesight.cli.common import (
    DeviceOption,
    IndexOption,
    JsonOption,
    MultiVectorStorage,
    Ocr,
    OcrEngine,
    TrustOption,
    VisualKind,
    _fail,
    _flag,
    _given,
    _open,
    _progress,
    err,
)
from pagesight.errors import PagesightError, SettingsConflict
from pagesight.ingest.options import IngestOptions, RayOptions, meta_fields
from pagesight.render.web.jobs import RenderOptions
from pagesight.settings import Settings

if TYPE_CHECKING:
    from pagesight.index import Index

app = typer.Typer()


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
    language: Annotated[
        str | None,
        typer.Option(
            help="Every page's language, for BM25's stemming and stop words: en, fr, de, es, it or pt "
            "(default: detected a page)."
        ),
    ] = None,
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
            help="The text model: minilm-static (default), minilm-l6-v2 (slower, a little better), "
            "multilingual (multilingual-e5-small, the 'multilingual' extra: questions in another "
            "language than the pages, a transformer pass a chunk), a MiniLM fine-tuned by pagesight "
            "train (its dense/ folder), or any sentence-transformers model's folder or hub id "
            "(new index only)."
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
    meta: Annotated[
        list[str] | None,
        typer.Option(help="A field KEY=VALUE every document ingested carries, for --where (repeatable)."),
    ] = None,
    encoder: Annotated[
        str | None,
        typer.Option(
            help="Visual encoder embedding every tile image: colqwen2, dse, clip, ...; visrag-ret, jina-v4 "
            "and nemotron-colembed run their model's own code (--trust-remote-code) (new index only)."
        ),
    ] = None,
    encoder_model: Annotated[
        str | None, typer.Option(help="The visual encoder's hub id or local folder (new index only).")
    ] = None,
    encoder_adapter: Annotated[
        str | None, typer.Option(help="A LoRA adapter on the visual encoder (new index only).")
    ] = None,
    multi_vector_storage: Annotated[
        MultiVectorStorage,
        typer.Option(
            help="Late-interaction token vectors searched as float16, or as int8 or 1-bit codes "
            "rescored with the float16 kept on disk (new index only)."
        ),
    ] = MultiVectorStorage.float16,
    visual_index: Annotated[
        VisualKind,
        typer.Option(help="ANN structure of the visual vectors; exact while small (new index only)."),
    ] = VisualKind.ivf,
    muvera_reps: Annotated[
        int,
        typer.Option(
            help="Late-interaction token vectors: repetitions of their MUVERA encoding, which finds the "
            "candidates MaxSim ranks; fewer: smaller and faster, lower recall (IRPAPERS: 10; new index only)."
        ),
    ] = Settings.muvera_reps,
    device: DeviceOption = "auto",
    trust_remote_code: TrustOption = False,
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
    phrases: Annotated[
        bool,
        typer.Option(
            help="BM25: pairs of neighbouring words are terms too, so phrases outrank scattered words "
            "(new index only)."
        ),
    ] = Settings.phrases,
    term_weights: Annotated[
        bool,
        typer.Option(
            help="BM25: weigh a question's words by how they cluster on the collection's pages, so "
            "its subject counts over its instructions (new index only)."
        ),
    ] = Settings.term_weights,
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
        "multi_vector_storage": ("multi_vector_storage", multi_vector_storage.value),
        "muvera_reps": ("muvera_reps", muvera_reps),
        "layout": ("layout", layout),
        "ocr_engine": ("ocr_engine", ocr_engine.value),
        "heading_weight": ("heading_weight", heading_weight),
        "period_years": ("period_years", period_years),
        "phrases": ("phrases", phrases),
        "term_weights": ("term_weights", term_weights),
        "thesaurus": ("thesaurus", None if thesaurus == "none" else thesaurus),
    }
    given = {name: value for name, (option, value) in chosen.items() if _given(ctx, option)}
    try:  # the options first: a bad one leaves no new index behind
        options = IngestOptions(
            ocr=ocr.value,
            jobs=jobs or None,
            timeout=timeout,
            page_timeout=page_timeout,
            max_memory=int(max_memory * (1 << 30)) if max_memory > 0 else None,
            web=RenderOptions(
                javascript=javascript,
                allow_network=allow_network,
                max_height=max_page_height,
                keep_images=keep_images,
                concurrency=max(1, tabs),
            ),
            meta=meta_fields(meta or []),
            language=language,
            ray=RayOptions(
                address=ray_address,
                readers=jobs or None,
                encoders=max(1, ray_encoders),
                gpus_per_encoder=ray_gpus,
                device=device,
                trust_remote_code=trust_remote_code,
            )
            if ray or ray_address
            else None,
        )
    except PagesightError as exc:
        _fail(str(exc))
    try:
        idx = _open(index, create=True, settings=given, device=device, trust_remote_code=trust_remote_code)
    except SettingsConflict as exc:
        flags = [_flag(ctx, chosen[name][0]) for name in exc.conflicts]
        made = ", ".join(f"{name}={stored!r}" for name, (stored, _) in exc.conflicts.items())
        named = flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} and {flags[-1]}"
        _fail(
            f"{index}: {named} {'is' if len(flags) == 1 else 'are'} chosen when an index is made "
            f"(it was made with {made}); make a new index for {flags[0] if len(flags) == 1 else 'them'}"
        )
    try:
        report = _add_with_progress(idx, paths, options, transient=as_json)
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


def _add_with_progress(idx: Index, paths, options: IngestOptions, transient: bool):
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

        return idx.add(paths, options, progress=on_file, on_planned=on_planned)
