"""The ingestion run: expand inputs, read files in a worker pool, encode, commit one by one.

Workers are separate processes (pebble) with a per-file timeout and an address-space cap, so a file
that hangs, crashes PDFium or eats memory fails alone with a one-line reason; the main process
encodes dense vectors and commits each document in its own transaction.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pagesight.encode.dense import chunk_words, dense_model
from pagesight.encode.visual import VisualEncoder
from pagesight.errors import InputError
from pagesight.ingest import web as web_pages
from pagesight.ingest.distributed import RayOptions
from pagesight.ingest.extract import UNCHANGED
from pagesight.ingest.visual import encode_tiles
from pagesight.ingest.workers import Crashed, Job, read_files
from pagesight.records import Document
from pagesight.render.sources import SUFFIXES
from pagesight.render.web.browser import RenderOptions
from pagesight.settings import OCR_MODES
from pagesight.store.base import Catalog


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)  # document ids new to the index
    replaced: list[str] = field(default_factory=list)  # changed files whose pages were replaced
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    pages: int = 0  # pages read in this run
    notes: list[tuple[str, str]] = field(default_factory=list)  # (path, note): ingested, with a caveat

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


def plan(catalog: Catalog, files: list[Path], report: IngestReport, progress: Progress | None) -> list[Job]:
    """Jobs for the files that may have changed; unchanged files (same path, size, mtime) are skipped."""
    jobs: list[Job] = []
    claimed: dict[str, Path] = {}
    for path in files:
        doc_id = path.stem
        if path.suffix.lower() not in SUFFIXES:
            _fail(report, progress, path, f"unsupported file type '{path.suffix or path.name}'")
            continue
        if doc_id in claimed:
            _fail(report, progress, path, f"document id '{doc_id}' is also the id of {claimed[doc_id]}")
            continue
        claimed[doc_id] = path
        known = catalog.document(doc_id)
        if known is not None and known.source.resolve() != path.resolve() and known.source.exists():
            _fail(report, progress, path, f"document id '{doc_id}' is already taken by {known.source}")
            continue
        try:
            stat = path.stat()
        except OSError as exc:
            _fail(report, progress, path, f"cannot read file ({exc.strerror or exc})")
            continue
        if (
            known is not None
            and known.source.resolve() == path.resolve()
            and (known.size, known.mtime_ns) == (stat.st_size, stat.st_mtime_ns)
        ):
            report.unchanged.append(doc_id)
            if progress:
                progress(str(path), "unchanged", 0)
            continue
        jobs.append(Job(path, doc_id, known.sha256 if known else None))
    return jobs


def run(
    catalog: Catalog,
    paths: Iterable[str | os.PathLike],
    *,
    ocr: str = "auto",
    jobs: int | None = None,
    timeout: float = 120.0,
    max_memory: int | None = 4 << 30,
    progress: Progress | None = None,
    on_planned: Callable[[int], None] | None = None,
    web: dict | None = None,
    visual: Callable[[], VisualEncoder] | None = None,
    ray: RayOptions | str | bool | None = None,
) -> IngestReport:
    """Ingest ``paths``: PDFs and images in worker processes, then web pages in one browser.

    ``web`` holds web rendering options (see ``render.web.browser.RenderOptions``: javascript,
    allow_network, max_height, keep_images, concurrency, ...); width and tile height come from
    the index settings, the per-page timeout from ``timeout``. ``visual`` loads the index's
    visual encoder, which encodes every tile image stored; it is called only when some input is
    new or changed, so an unchanged re-ingest loads no model.

    ``ray`` reads and encodes the files on a Ray cluster instead (``ingest/distributed.py``), with
    the same limits, failure reasons and commits; web pages are then refused. ``True`` starts a
    local Ray, a string is a cluster's address, ``RayOptions`` says more (encoder actors, GPUs).
    """
    if ray is True or isinstance(ray, str):
        ray = RayOptions(address=None if ray is True else ray)
    elif ray is False:
        ray = None
    if ocr not in OCR_MODES:
        raise ValueError(f"ocr must be one of {', '.join(OCR_MODES)}, got '{ocr}'")
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
    todo = plan(catalog, files, report, progress)
    settings = catalog.settings
    web_options = RenderOptions(
        width=settings.viewport_width, tile_height=settings.tile_height, timeout=timeout, **(web or {})
    )
    keep_images = web_options.keep_images
    text = "ocr" if ocr == "always" else "dom"  # web pages: their text from the DOM or their tiles
    if visual or text == "ocr":  # both read the screenshots; unkept ones are dropped after
        web_options = dataclasses.replace(web_options, keep_images=True)
    web_todo = web_pages.plan(
        catalog,
        web_inputs,
        web_options,
        fail=lambda label, reason: _fail(report, progress, label, reason),
        unchanged=lambda label, doc_id: _unchanged(report, progress, label, doc_id),
        claimed={job.doc_id: str(job.path) for job in todo},
        text=text,
    )
    if on_planned:
        on_planned(len(todo) + len(web_todo))
    if not todo and not web_todo:
        return report
    if ray is not None:
        _read_files_on_ray(catalog, todo, report, ocr, timeout, max_memory, progress, ray)
        return report
    encoder = dense_model(settings.dense_model) if settings.dense_model else None
    visual = visual() if visual else None
    if todo:
        _read_files(catalog, todo, report, encoder, visual, ocr, jobs, timeout, max_memory, progress)
    if web_todo:

        def stored(page, document: Document) -> None:
            (report.replaced if page.doc_id in replacing else report.added).append(page.doc_id)
            report.pages += 1
            report.notes.extend((page.label, note) for note in document.meta.get("notes", []))
            if progress:
                progress(page.label, "replaced" if page.doc_id in replacing else "added", 1)

        replacing = {page.doc_id for page in web_todo if catalog.document(page.doc_id) is not None}
        web_pages.render(
            catalog,
            web_todo,
            web_options,
            encode=lambda document: _encode_web(document, encoder, visual, settings, keep_images, ocr),
            stored=stored,
            fail=lambda label, reason: _fail(report, progress, label, reason),
            text=text,
        )
    return report


def _encode_web(
    document: Document, encoder, visual, settings, keep_images: bool, ocr: str
) -> tuple[dict, dict]:
    """Dense and visual vectors of a rendered web page; its screenshots dropped unless kept.

    Its text is the DOM's, or with ``ocr="always"`` what OCR reads in the screenshots (``auto``
    needs no OCR here: the DOM always gives a web page's text).
    """
    if ocr == "always":
        web_pages.read_tiles_by_ocr(document)
    images = encode_tiles(document, visual, settings)
    if not keep_images:
        for page in document.pages:
            for tile in page.tiles:
                tile.image = None
    return encode_text(document, encoder, settings.chunk_words, settings.chunk_overlap), images


def _read_files(catalog, todo, report, encoder, visual, ocr, jobs, timeout, max_memory, progress) -> None:
    """PDFs and images, read by worker processes, encoded here and committed one by one."""
    settings = catalog.settings
    workers = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
    outcomes = read_files(todo, settings, ocr, workers=workers, timeout=timeout, max_memory=max_memory)
    for job, outcome in outcomes:
        if not isinstance(outcome, Document):
            _settle(catalog, job, outcome, report, progress, timeout, max_memory)
            continue
        try:
            images = encode_tiles(outcome, visual, settings)
        except InputError as exc:  # the file changed since it was read: it fails alone
            _settle(catalog, job, exc, report, progress, timeout, max_memory)
            continue
        vectors = encode_text(outcome, encoder, settings.chunk_words, settings.chunk_overlap)
        _commit(catalog, job, outcome, vectors, images, report, progress)


def _read_files_on_ray(catalog, todo, report, ocr, timeout, max_memory, progress, options) -> None:
    """The same, read and encoded on Ray; the visual encoder's spec comes back from its actors."""
    from pagesight.ingest import distributed

    with distributed.cluster(options.address):
        found = distributed.read_and_encode(
            todo, catalog.settings, ocr, timeout=timeout, max_memory=max_memory, options=options
        )
        for job, outcome, vectors, images, spec in found:
            if not isinstance(outcome, Document):
                _settle(catalog, job, outcome, report, progress, timeout, max_memory)
                continue
            if spec is not None:
                _record_spec(catalog, spec)
            _commit(catalog, job, outcome, vectors, images, report, progress)


def _record_spec(catalog: Catalog, spec: dict) -> None:
    """The visual encoder's spec, recorded by the first document and checked against after."""
    from pagesight.encode.visual.base import check_spec

    recorded = catalog.visual_spec()
    if recorded is None:
        catalog.set_visual_spec(spec)
    else:
        check_spec(recorded, spec)


def _commit(catalog, job, document: Document, vectors, images, report, progress) -> None:
    catalog.put_document(document, vectors, images)
    report.notes.extend((str(job.path), note) for note in document.meta.get("notes", []))
    kind = "replaced" if job.known_sha256 else "added"
    (report.replaced if job.known_sha256 else report.added).append(job.doc_id)
    report.pages += len(document.pages)
    if progress:
        progress(str(job.path), kind, len(document.pages))


def _settle(catalog, job, outcome, report, progress, timeout, max_memory) -> None:
    """A file not committed: unchanged (its new mtime noted), or failed with its reason."""
    if outcome == UNCHANGED:
        catalog.touch_document(job.doc_id, str(job.path), job.path.stat().st_mtime_ns)
        report.unchanged.append(job.doc_id)
        if progress:
            progress(str(job.path), "unchanged", 0)
    else:
        _fail(report, progress, job.path, _reason(outcome, timeout, max_memory))


def encode_text(document: Document, encoder, size: int, overlap: int) -> dict[tuple[int, int], np.ndarray]:
    if encoder is None:
        return {}
    keys, chunks, owners = [], [], []
    for page in document.pages:
        for tile in page.tiles:
            pieces = chunk_words(tile.text, size, overlap)
            if pieces:
                keys.append((page.number, tile.index))
                owners.extend([len(keys) - 1] * len(pieces))
                chunks.extend(pieces)
    if not chunks:
        return {}
    matrix = encoder.encode(chunks)
    owners_array = np.array(owners)
    return {key: matrix[owners_array == i] for i, key in enumerate(keys)}


def _reason(exc: Exception, timeout: float, max_memory: int | None) -> str:
    if isinstance(exc, (InputError, Crashed)):
        return str(exc)
    if isinstance(exc, FutureTimeout):
        return f"timed out after {timeout:g} s"
    if isinstance(exc, MemoryError):
        limit = f" (limit {max_memory / (1 << 30):.1f} GiB)" if max_memory else ""
        return f"ran out of memory{limit}"
    message = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _unchanged(report: IngestReport, progress: Progress | None, label: str, doc_id: str) -> None:
    report.unchanged.append(doc_id)
    if progress:
        progress(label, "unchanged", 0)


def _fail(report: IngestReport, progress: Progress | None, path: Path | str, reason: str) -> None:
    report.failed.append((str(path), reason))
    if progress:
        progress(str(path), "failed", 0)
