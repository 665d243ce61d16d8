"""Uploaded files and the ingestion jobs that index them, one at a time, beside the searches.

An upload is saved under the uploads folder with a name made from the uploaded one (letters,
digits, ``.``, ``-`` and ``_``; the rest replaced), never a path a client chose, and then goes
through ``Index.add`` like any file: read in a worker process with time and memory limits, a
failure reported for that file alone. Its document id is the saved name's stem.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from pagesight.errors import PagesightError
from pagesight.ingest.options import IngestOptions
from pagesight.priority import BACKGROUND, lower_this_thread
from pagesight.render.sources import IMAGE_SUFFIXES, PDF_SUFFIXES, SUFFIXES
from pagesight.serve.pool import IndexPool, retry_locked
from pagesight.serve.tenants import FIELD

log = logging.getLogger(__name__)
KEPT_JOBS = 100  # finished jobs remembered for their progress endpoint
JOB_WAIT = 3600.0  # seconds a job waits for the store's writer (another process's ingestion)
_JOB_ID = re.compile(r"[0-9a-f]{32}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class UploadError(PagesightError):
    """An uploaded file refused before ingestion: ``status`` is the HTTP status it deserves."""

    def __init__(self, message: str, status: int = 415):
        super().__init__(message)
        self.status = status


def safe_name(filename: str) -> str:
    """A file name to save an upload under: its last path component, unsafe characters replaced,
    no leading dot; UploadError when nothing usable is left or its type is not ingested."""
    name = _UNSAFE.sub("-", filename.replace("\\", "/").rsplit("/", 1)[-1]).lstrip(".-")[:120]
    suffix = Path(name).suffix.lower()
    if suffix not in SUFFIXES:
        accepted = ", ".join(sorted(SUFFIXES))
        raise UploadError(f"{filename or 'upload'}: unsupported file type; accepted: {accepted}")
    if not Path(name).stem:
        raise UploadError(f"{filename}: the file name has no usable stem", status=422)
    return name


def check_content(name: str, data: bytes) -> None:
    """Refuse a file whose bytes are not of the type its name says (a damaged file of the right
    type passes, and fails in ingestion with its reason)."""
    suffix = Path(name).suffix.lower()
    if suffix in PDF_SUFFIXES and b"%PDF-" not in data[:1024]:
        raise UploadError(f"{name}: not a PDF (no %PDF- header)")
    if suffix in IMAGE_SUFFIXES:
        try:
            Image.open(io.BytesIO(data)).close()  # reads the header only
        except (OSError, ValueError, Image.DecompressionBombError):
            raise UploadError(f"{name}: not an image Pillow can read") from None


def save(folder: Path, name: str, data: bytes) -> Path:
    """``data`` written to ``folder/name`` all at once (a temporary file renamed into place)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".upload-", delete=False) as handle:
        handle.write(data)
    os.replace(handle.name, path)
    return path


@dataclass
class Job:
    """An ingestion of uploaded files: what the web page polls to show progress."""

    id: str
    files: list[str]
    state: str = "queued"  # queued, running, done, failed (the whole run; files fail alone in "failed")
    total: int | None = None  # inputs to read, known once planned
    done: int = 0
    pages: int = 0
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)  # {"file", "reason"}
    notes: list[dict] = field(default_factory=list)  # {"file", "note"}
    error: str | None = None
    tenant: str | None = None  # whose upload (serve.tenants); None: the operator's

    def to_dict(self) -> dict:
        return dict(vars(self))


class Jobs:
    """Ingestion jobs run one after another in a background thread, each job's record kept as a
    JSON file in ``folder``: every server process over the index (``serve --workers``) reads the
    same records, whichever of them took the upload. A job waits for another process's ingestion
    to end (the store's single writer), up to ``JOB_WAIT`` seconds."""

    def __init__(self, pool: IndexPool, folder: Path, ingest_options: IngestOptions | None = None):
        self.pool = pool
        self.folder = folder
        self.options = ingest_options
        self._lock = threading.Lock()
        self._runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pagesight-ingest")

    def submit(
        self,
        paths: list[Path],
        tenant: str | None = None,
        fields: dict | None = None,
        language: str | None = None,
    ) -> Job:
        """Ingest ``paths`` in the background, each document with ``fields`` and its pages in
        ``language`` (None: detected); a ``tenant``'s documents carry ``tenant = NAME`` over any
        ``fields`` of that name."""
        job = Job(uuid.uuid4().hex, [path.name for path in paths], tenant=tenant)
        self._save(job)
        finished = [kept for kept in self.all() if kept.state in ("done", "failed")]
        for kept in finished[: max(0, len(finished) - KEPT_JOBS)]:
            (self.folder / f"{kept.id}.json").unlink(missing_ok=True)
        # searches first: the job's thread and its reader processes run in the background
        options = IngestOptions.given(self.options, nice=BACKGROUND, language=language)
        owned = {FIELD: tenant} if tenant is not None else {}
        if fields or owned:
            options = IngestOptions.given(options, meta={**options.meta, **(fields or {}), **owned})
        self._runner.submit(self._run, job, paths, options)
        return job

    def get(self, job_id: str) -> Job | None:
        if not _JOB_ID.fullmatch(job_id):  # ids are looked up, never used as paths
            return None
        try:
            return Job(**json.loads((self.folder / f"{job_id}.json").read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return None

    def all(self) -> list[Job]:
        """The jobs kept, oldest first."""
        paths = sorted(
            self.folder.glob("*.json"), key=lambda path: path.stat().st_mtime_ns if path.exists() else 0
        )
        found = (self.get(path.stem) for path in paths)
        return [job for job in found if job is not None]

    def _save(self, job: Job) -> None:
        """The job's record written whole (a temporary file renamed into place)."""
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.folder, prefix=".job-", delete=False) as handle:
                json.dump(job.to_dict(), handle)
            os.replace(handle.name, self.folder / f"{job.id}.json")

    def _run(self, job: Job, paths: list[Path], options: IngestOptions) -> None:
        lower_this_thread()
        job.state = "running"
        self._save(job)

        def planned(n: int) -> None:
            job.total = n
            self._save(job)

        def progress(path: str, outcome: str, n_pages: int) -> None:
            job.done += 1
            job.pages += n_pages
            self._save(job)

        try:
            with self.pool.writing() as index:
                report = retry_locked(
                    lambda: index.add(paths, options, progress=progress, on_planned=planned), JOB_WAIT
                )
        except PagesightError as exc:
            job.error, job.state = str(exc), "failed"
        except Exception as exc:  # a bug: the job says so, the log has the traceback
            log.exception("ingestion job %s failed", job.id)
            job.error, job.state = f"{type(exc).__name__}: {exc}", "failed"
        else:
            job.added, job.replaced, job.unchanged = report.added, report.replaced, report.unchanged
            job.failed = [{"file": Path(path).name, "reason": reason} for path, reason in report.failed]
            job.notes = [{"file": Path(path).name, "note": note} for path, note in report.notes]
            job.state = "done"
        self._save(job)

    def close(self) -> None:
        self._runner.shutdown(wait=True, cancel_futures=True)
