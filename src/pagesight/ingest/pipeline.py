"""The ingestion run: expand inputs, read files in a worker pool, encode, commit one by one.

Workers are separate processes (pebble) with a per-file time limit (a base plus seconds for each
page read) and an address-space cap, so a file that hangs, crashes PDFium or eats memory fails alone with a one-line reason;
with a visual encoder they also render each page for it. The main process encodes the tiles of
several documents together on every device (``feeding.VisualFeed``, its threads), then dense
vectors, and commits each document in its own transaction.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pagesight.encode.dense import dense_model
from pagesight.encode.visual import VisualEncoder
from pagesight.errors import InputError
from pagesight.ingest import web as web_pages
from pagesight.ingest.encoding import encode_text
from pagesight.ingest.extract import UNCHANGED
from pagesight.ingest.feeding import VisualFeed
from pagesight.ingest.options import IngestOptions, RayOptions, TextOptions
from pagesight.ingest.outcome import Extracted, Rendered, Unchanged
from pagesight.ingest.workers import Crashed, FileTask, TimedOut, TimeLimit, read_files
from pagesight.records import Document
from pagesight.render.sources import SUFFIXES
from pagesight.store.base import Catalog
from pagesight.text.language import label_pages


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)  # document ids new to the index
    replaced: list[str] = field(default_factory=list)  # changed files whose pages were replaced
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    pages: int = 0  # pages read in this run
    notes: list[tuple[str, str]] = field(default_factory=list)  # (path, note): ingested, with a caveat
    # the visual encoding when the run had one (feeding.VisualFeed.summary: tiles, calls, batch,
    # devices, seconds encoding, the devices' wall time and their idle share of it)
    visual: dict | None = None

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict:
        return {
            "added": len(self.added),
            "replaced": len(self.replaced),
            "unchanged": len(self.unchanged),
            "failed": [{"path": p, "reason": r} for p, r in self.failed],
            "pages": self.pages,
            "notes": [{"path": p, "note": n} for p, n in self.notes],
            **({"visual": self.visual} if self.visual is not None else {}),
        }


# Called after each input: (path, outcome, pages) where outcome is added/replaced/unchanged/failed.
Progress = Callable[[str, str, int], None]


def expand(paths: Iterable[str | os.PathLike], report: IngestReport) -> list[Path]:
    """Files named directly, and every supported file below named directories (sorted)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = (
                p
                for p in path.rglob("*")
                if p.is_file() and p.suffix.lower() in SUFFIXES and not p.name.startswith(".")
            )
            files.extend(sorted(found))
        elif path.exists():
            files.append(path)
        else:
            report.failed.append((str(path), "no such file or directory"))
    return files


def plan(
    catalog: Catalog, files: list[Path], stands_for: Mapping[str, str] | None = None
) -> tuple[list[FileTask], list[Extracted]]:
    """Tasks for the files that may have changed, and what the plan settles already: unchanged
    files (same path, size, mtime) and files that cannot be taken. A file of ``stands_for`` is
    read where it is and planned as the path it stands for: its id, its owner, its source."""
    tasks: list[FileTask] = []
    settled: list[Extracted] = []
    claimed: dict[str, Path] = {}
    for path in files:
        recorded = Path(stands_for[str(path)]) if stands_for and str(path) in stands_for else None
        planned = _plan_file(catalog, path, claimed, recorded)
        (tasks if isinstance(planned, FileTask) else settled).append(planned)
    return tasks, settled


def _plan_file(
    catalog: Catalog, path: Path, claimed: dict[str, Path], recorded: Path | None = None
) -> FileTask | Extracted:
    """``path``'s task, or what settles it; with ``recorded``, the file is that one's new content."""
    named = recorded or path  # its id, its source
    label, doc_id = str(path), named.stem
    if path.suffix.lower() not in SUFFIXES:
        return Extracted(label, doc_id, InputError(f"unsupported file type '{path.suffix or path.name}'"))
    if doc_id in claimed:
        return Extracted(
            label, doc_id, InputError(f"document id '{doc_id}' is also the id of {claimed[doc_id]}")
        )
    claimed[doc_id] = named
    known = catalog.document(doc_id)
    if known is not None and known.source.resolve() != named.resolve() and known.source.exists():
        return Extracted(
            label, doc_id, InputError(f"document id '{doc_id}' is already taken by {known.source}")
        )
    try:
        stat = path.stat()
    except OSError as exc:
        return Extracted(label, doc_id, InputError(f"cannot read file ({exc.strerror or exc})"))
    if (
        recorded is None
        and known is not None
        and known.source.resolve() == path.resolve()
        and (known.size, known.mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    ):
        return Extracted(label, doc_id, Unchanged(str(path)))
    return FileTask(path, doc_id, known.sha256 if known else None, recorded)


def run(
    catalog: Catalog,
    paths: Iterable[str | os.PathLike],
    options: IngestOptions | None = None,
    *,
    progress: Progress | None = None,
    on_planned: Callable[[int], None] | None = None,
    visual: Callable[[], VisualEncoder | list[VisualEncoder]] | None = None,
) -> IngestReport:
    """Ingest ``paths`` with ``options`` (``IngestOptions``): PDFs and images in worker processes,
    then web pages in one browser, or both read and encoded on Ray.

    ``visual`` loads the index's visual encoder (or a copy of it on each device to encode on), which
    encodes every tile image stored, ``options.visual_batch`` tiles a call; it is called only when
    some input is new or changed, so an unchanged re-ingest loads no model.
    ``progress(path, outcome, pages)`` is told of each input as it ends; ``on_planned(n)`` of how
    many inputs are to be read.
    """
    options = options or IngestOptions()
    ocr, ray, timeout, max_memory = options.ocr, options.ray, options.timeout, options.max_memory
    report = IngestReport()
    web_inputs, paths = web_pages.split_inputs(paths)
    files = expand(paths, report)
    for path, _ in report.failed:
        if progress:
            progress(path, "failed", 0)
    if ray is not None and web_inputs:
        raise InputError(
            f"web pages are rendered in one local browser, not on Ray: ingest {web_inputs[0]} without --ray"
        )
    settings = catalog.settings
    limit = TimeLimit(timeout, options.page_timeout)
    todo, settled = plan(catalog, files, options.stands_for)
    web_options = dataclasses.replace(
        options.web, width=settings.viewport_width, tile_height=settings.tile_height, timeout=timeout
    )
    keep_images = web_options.keep_images
    text = "ocr" if ocr == "always" else "dom"  # web pages: their text from the DOM or their tiles
    if visual or text == "ocr":  # both read the screenshots; unkept ones are dropped after
        web_options = dataclasses.replace(web_options, keep_images=True)
    web_todo, web_settled = web_pages.plan(
        catalog, web_inputs, web_options, claimed={task.doc_id: str(task.path) for task in todo}, text=text
    )
    store = Storing(catalog, report, progress, max_memory, options.meta, options.language)
    for extracted in settled + web_settled:
        store(extracted)
    text_options = TextOptions(ocr, options.language, options.transcripts)
    if on_planned:
        on_planned(len(todo) + len(web_todo))
    if not todo and not web_todo:
        return report
    if ray is not None:
        _store_from_ray(store, todo, text_options, limit, options)
        return report
    store.text = dense_model(settings.dense_model) if settings.dense_model else None
    loaded = visual() if visual else []
    encoders = loaded if isinstance(loaded, list) else [loaded]
    if encoders:  # the workers render the pages for the visual encoder, from the file they read
        text_options = dataclasses.replace(text_options, pages=True)
    outcomes: Iterable[Extracted] = itertools.chain(
        _read_files(todo, settings, text_options, options.jobs, limit, max_memory, options.nice),
        web_pages.render(
            catalog, web_todo, web_options, text=text, keep_images=keep_images, language=options.language
        ),
    )
    _store_all(store, outcomes, encoders, options.visual_batch)
    return report


def _store_all(store: Storing, outcomes: Iterable[Extracted], encoders: list, batch: int | None) -> None:
    """Every outcome stored, the documents' tiles first encoded by ``encoders`` (one a device)."""
    if not encoders:
        for extracted in outcomes:
            store(extracted)
        return
    feed = VisualFeed(encoders, store.catalog.settings, batch)
    for extracted in feed(outcomes):
        store(extracted)
    store.report.visual = feed.summary()


def _store_from_ray(
    store: Storing, todo: list[FileTask], text_options: TextOptions, limit: TimeLimit, options: IngestOptions
) -> None:
    """The files read and encoded on Ray (``options.ray``), each stored here as it comes back."""
    from pagesight.ingest import distributed

    devices: set[str] = set()
    with distributed.cluster(options.ray.address):
        found = _read_on_ray(
            todo, store.catalog.settings, text_options, limit, options.max_memory, options.ray,
            options.visual_batch, devices,
        )  # fmt: skip
        for extracted in found:
            store(extracted)
    if devices:  # where the visual encoder's actors ran
        store.report.visual = {"devices": sorted(devices)}


def _read_files(
    todo: list[FileTask],
    settings,
    text_options: TextOptions,
    jobs,
    limit: TimeLimit,
    max_memory,
    nice: int = 0,
) -> Iterator[Extracted]:
    """PDFs, images and office files, read by worker processes (at niceness ``nice``)."""
    if not todo:
        return
    workers = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
    outcomes = read_files(
        todo, settings, text_options, workers=workers, limit=limit, max_memory=max_memory, nice=nice
    )
    for task, outcome in outcomes:
        yield _task_extracted(task, outcome)


def _read_on_ray(
    todo: list[FileTask],
    settings,
    text_options: TextOptions,
    limit: TimeLimit,
    max_memory,
    options: RayOptions,
    visual_batch: int | None = None,
    devices: set[str] | None = None,
) -> Iterator[Extracted]:
    """The same files read and encoded on Ray; the visual encoder's spec comes back from its actors."""
    from pagesight.ingest import distributed

    found = distributed.read_and_encode(
        todo,
        settings,
        text_options,
        limit=limit,
        max_memory=max_memory,
        options=options,
        batch=visual_batch,
        devices=devices,
    )
    for task, outcome, vectors, images, spec in found:
        yield _task_extracted(task, outcome, vectors=vectors, images=images, spec=spec)


def _task_extracted(task: FileTask, outcome, **encoded) -> Extracted:
    """What a file's worker gave, as the loop takes it; the same content under a new mtime is unchanged, the
    mtime noted so the next run skips it."""
    if isinstance(outcome, Rendered):  # the pages its worker rendered for the visual encoder
        encoded["pages"] = outcome.pages
        outcome = outcome.document
    if outcome == UNCHANGED:
        recorded = task.recorded or task.path
        outcome = Unchanged(str(recorded), recorded.stat().st_mtime_ns)
    elif task.recorded is not None and isinstance(outcome, Document):
        outcome.source = str(task.recorded)
        encoded["read_from"] = str(task.path)
    return Extracted(str(task.path), task.doc_id, outcome, replacing=task.known_sha256 is not None, **encoded)


class Storing:
    """The one place every input ends: a document encoded and committed in its own transaction,
    an unchanged input noted, a failure reported with its reason."""

    def __init__(
        self, catalog: Catalog, report: IngestReport, progress, max_memory, fields=None, language=None
    ):
        self.catalog, self.report, self.progress = catalog, report, progress
        self.max_memory = max_memory
        self.fields = dict(fields or {})  # the run's own fields (IngestOptions.meta) for every document
        self.language = language  # the run's language for every page (None: detected a page)
        self.text = None  # the dense text model, when the index has one

    def __call__(self, extracted: Extracted) -> None:
        outcome = extracted.outcome
        if isinstance(outcome, Unchanged):
            if outcome.mtime_ns is not None:
                self.catalog.touch_document(extracted.doc_id, outcome.source, outcome.mtime_ns)
            self._note(extracted.label, "unchanged", self.report.unchanged, extracted.doc_id, 0)
        elif not isinstance(outcome, Document):
            _fail(self.report, self.progress, extracted.label, _reason(outcome, self.max_memory))
        else:
            try:
                self._commit(extracted, outcome)
            except InputError as exc:  # the file changed since it was read: it fails alone
                _fail(self.report, self.progress, extracted.label, str(exc))

    def _commit(self, extracted: Extracted, document: Document) -> None:
        settings = self.catalog.settings
        if self.fields:  # a file's own fields (its .meta.json) over the run's
            document.meta["fields"] = {**self.fields, **document.meta.get("fields", {})}
        label_pages(document.pages, self.language)
        document.meta["languages"] = dict(Counter(page.language for page in document.pages))
        if extracted.spec is not None:
            _record_spec(self.catalog, extracted.spec)
        images = extracted.images if extracted.images is not None else {}  # no visual encoder: none
        if not extracted.keep_images:
            for page in document.pages:
                for tile in page.tiles:
                    tile.image = None
        vectors = extracted.vectors
        if vectors is None:
            vectors = encode_text(document, self.text, settings)
        self.catalog.put_document(document, vectors, images)
        self.report.notes.extend((extracted.label, note) for note in document.meta.get("notes", []))
        self.report.pages += len(document.pages)
        kind = "replaced" if extracted.replacing else "added"
        self._note(
            extracted.label,
            kind,
            self.report.replaced if extracted.replacing else self.report.added,
            extracted.doc_id,
            len(document.pages),
        )

    def _note(self, label: str, kind: str, into: list, doc_id: str, pages: int) -> None:
        into.append(doc_id)
        if self.progress:
            self.progress(label, kind, pages)


def _record_spec(catalog: Catalog, spec: dict) -> None:
    """The visual encoder's spec, recorded by the first document and checked against after."""
    from pagesight.encode.visual.base import check_spec

    recorded = catalog.visual_spec()
    if recorded is None:
        catalog.set_visual_spec(spec)
    else:
        check_spec(recorded, spec)


def _reason(exc: Exception, max_memory: int | None) -> str:
    if isinstance(exc, (InputError, Crashed, TimedOut)):
        return str(exc)
    if isinstance(exc, MemoryError):
        limit = f" (limit {max_memory / (1 << 30):.1f} GiB)" if max_memory else ""
        return f"ran out of memory{limit}"
    message = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _fail(report: IngestReport, progress: Progress | None, path: Path | str, reason: str) -> None:
    report.failed.append((str(path), reason))
    if progress:
        progress(str(path), "failed", 0)
