"""Uploaded files and the ingestion jobs that index them, beside the searches.

An upload is saved with a name made from the uploaded one (letters, digits, ``.``, ``-`` and
``_``; the rest replaced), never a path a client chose, first in a staging folder of its job
(``uploads/.staging/JOB/``). It goes through ``Index.add`` like any file: read in a worker process
with time and memory limits, a failure reported for that file alone. Only a file that was ingested
is swapped in under ``uploads/`` (its document's source moved there), so a damaged re-upload fails
alone and the good version stays listed, searchable and rendered. Its document id is its name's stem.

Jobs are fair between tenants: each tenant's jobs wait in a queue of its own, and the ingestion
thread takes a few files (``chunk``) of the first job of each queue in turn, so one tenant's twenty
slow files hold another's upload back by one turn, not twenty; each file has the ingestion's time
limit (``IngestOptions.timeout``).

A job's office files are converted to PDF beside the ingestion, as soon as it is queued
(``serve/conversions.py``): the ingestion thread passes over a job whose next files are still
converting and takes the other tenants' turns, so a file LibreOffice takes its whole time limit on
holds back its own job only.

A job's record (a JSON file in ``uploads/.jobs``) says which process runs it. A server takes over
the jobs whose process is gone (killed, crashed, or a zombie: killed and not yet collected by its
parent), when it starts and every ``RECOVER_EVERY`` seconds after: their files still to do are
queued again, or, when their staged files are gone, the job fails saying so; none stays ``queued``
or ``running`` for ever, and no server needs a restart to free them. What a kill leaves besides (a
swap file, a temporary, the staging folder of a job that ended or never was queued) is removed at
start and on each delete, never what a running process writes (``serve/leftovers.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from pagesight.errors import PagesightError
from pagesight.ingest.options import IngestOptions
from pagesight.priority import BACKGROUND, lower_this_thread
from pagesight.render.sources import IMAGE_SUFFIXES, PDF_SUFFIXES, SUFFIXES
from pagesight.serve import leftovers
from pagesight.serve.conversions import Conversions
from pagesight.serve.leftovers import STAGING, alive, mark_owner, temporary_prefix, this_process
from pagesight.serve.pool import IndexPool, retry_locked
from pagesight.serve.tenants import FIELD

log = logging.getLogger(__name__)
KEPT_JOBS = 100  # finished jobs remembered for their progress endpoint, a tenant's own
JOB_WAIT = 3600.0  # seconds a job waits for the store's writer (another process's ingestion)
_JOB_ID = re.compile(r"[0-9a-f]{32}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
PENDING = ("queued", "running")
MAX_WAITING_FILES = 200  # files one tenant may have waiting to be ingested (on disk, staged)
RECOVER_EVERY = 5.0  # seconds between looks for other servers' orphaned jobs, while idle


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
        raise UploadError(f"{filename[:200] or 'upload'}: unsupported file type; accepted: {accepted}")
    if not Path(name).stem:
        raise UploadError(f"{filename[:200]}: the file name has no usable stem", status=422)
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
    with tempfile.NamedTemporaryFile(dir=folder, prefix=temporary_prefix("upload"), delete=False) as handle:
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
    # what the server keeps to run it, or run it again after a crash (not shown to clients)
    remaining: list[str] = field(default_factory=list)  # files not ingested yet
    fields: dict = field(default_factory=dict)  # the documents' fields (an upload's meta, tenant)
    options: dict = field(default_factory=dict)  # the upload's other IngestOptions fields (language)
    worker: str | None = None  # the process running it (this_process)

    def to_dict(self) -> dict:
        """What a client is shown."""
        hidden = {"remaining", "fields", "options", "worker"}
        return {key: value for key, value in vars(self).items() if key not in hidden}


class Jobs:
    """Ingestion jobs, run by one background thread in turns between tenants (the module
    docstring), each job's record kept as a JSON file in ``uploads/.jobs``: every server process
    over the index (``serve --workers``) reads the same records, whichever of them took the upload.
    A job waits for another process's ingestion to end (the store's single writer), up to
    ``JOB_WAIT`` seconds. ``chunk``: files of one job ingested in one turn (default: the ingestion's
    worker processes, one per core). ``scrub``: what a job's reasons and notes are passed through
    before a client reads them (``frontends.Scrub``: no server folder named)."""

    def __init__(
        self,
        pool: IndexPool,
        uploads: Path,
        ingest_options: IngestOptions | None = None,
        chunk: int | None = None,
        scrub=None,
    ):
        self.pool = pool
        self.scrub = scrub or (lambda message: message)  # the server's folders out of what clients read
        self.uploads = uploads
        self.folder = uploads / ".jobs"
        self.options = ingest_options
        readers = ingest_options.jobs if ingest_options is not None else None
        self.chunk = max(1, chunk or readers or os.cpu_count() or 1)
        self._lock = threading.Lock()  # records written whole, one at a time
        self._turns: OrderedDict[str | None, deque[Job]] = OrderedDict()  # tenant -> its jobs, in turn
        self._wake = threading.Condition()
        self._closed = False
        self._started = time.time()  # what a server before this one left is older (leftovers.sweep)
        max_memory = (ingest_options or IngestOptions()).max_memory
        self.conversions = Conversions(self._converted, max_memory)  # office files, beside the turns
        self._thread = threading.Thread(target=self._loop, name="pagesight-ingest", daemon=True)
        self._thread.start()
        self.recover()

    # Submitting and following ------------------------------------------------------------------

    def stage(self, job_id: str, name: str, data: bytes) -> Path:
        """An uploaded file saved where job ``job_id`` will read it (not yet a document's source)."""
        return save(self._staging(job_id), name, data)

    def new_id(self, tenant: str | None, files: int) -> str:
        """A new job's id, once ``tenant`` may queue ``files`` more files: ``UploadError`` (429)
        past ``MAX_WAITING_FILES`` waiting (a tenant's; the operator's uploads are not counted). Its
        staging folder is made, marked as this process's."""
        with self._wake:
            waiting = sum(len(job.remaining) for job in self._turns.get(tenant, ()))
        if tenant is not None and waiting + files > MAX_WAITING_FILES:
            raise UploadError(
                f"{waiting} files are waiting to be ingested already; at most {MAX_WAITING_FILES}: "
                "upload again when they are done",
                status=429,
            )
        job_id = uuid.uuid4().hex
        mark_owner(self._staging(job_id))  # this process's until the job is queued (leftovers.sweep)
        return job_id

    def submit(
        self,
        job_id: str,
        names: list[str],
        tenant: str | None = None,
        fields: dict | None = None,
        options: dict | None = None,
    ) -> Job:
        """Ingest the files ``names`` staged for ``job_id``, each document with ``fields``, with the
        ``IngestOptions`` fields ``options`` (an upload's ``language``) over the server's; a
        ``tenant``'s documents carry ``tenant = NAME`` over any ``fields`` of that name."""
        owned = {FIELD: tenant} if tenant is not None else {}
        job = Job(
            job_id,
            list(names),
            tenant=tenant,
            remaining=list(names),
            fields={**(fields or {}), **owned},
            options=dict(options or {}),
            worker=this_process(),
        )
        self._save(job)
        finished = [kept for kept in self.all() if kept.state not in PENDING and kept.tenant == tenant]
        for kept in finished[: max(0, len(finished) - KEPT_JOBS)]:
            (self.folder / f"{kept.id}.json").unlink(missing_ok=True)
        self._queue(job)
        return job

    def get(self, job_id: str) -> Job | None:
        if not _JOB_ID.fullmatch(job_id):  # ids are looked up, never used as paths
            return None
        try:
            data = json.loads((self.folder / f"{job_id}.json").read_text(encoding="utf-8"))
            if "language" in data:  # a record of an earlier version: its language is an option
                language = data.pop("language")
                data["options"] = {**({"language": language} if language else {}), **data.get("options", {})}
            return Job(**data)
        except (OSError, ValueError, TypeError):
            return None

    def all(self) -> list[Job]:
        """The jobs kept, oldest first."""

        def written(path: Path) -> int:
            with contextlib.suppress(OSError):
                return path.stat().st_mtime_ns
            return 0

        found = (self.get(path.stem) for path in sorted(self.folder.glob("*.json"), key=written))
        return [job for job in found if job is not None]

    def recover(self, sweep: bool = True) -> None:
        """Take over the pending jobs whose process is gone: their files still to do are queued
        again here; a job whose staged files are all gone fails, saying so. Then what killed
        servers left is removed (``sweep``), with ``sweep`` or when a job was taken over (the
        periodic look passes False: the uploads folder is not read every few seconds for
        nothing). Several processes starting at once take each job once (a lock on the jobs
        folder)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            orphans = [job for job in self.all() if job.state in PENDING and not alive(job.worker)]
            for job in orphans:
                staged = self._staging(job.id)
                job.remaining = [name for name in job.remaining if (staged / name).exists()]
                job.worker = this_process()
                if job.remaining:
                    job.state = "queued"
                    self._save(job)
                    self._queue(job)
                    log.warning("ingestion job %s taken over after its server stopped", job.id)
                else:
                    job.state, job.error = "failed", "the server stopped before ingesting it; upload it again"
                    self._save(job)
                    shutil.rmtree(staged, ignore_errors=True)
            if sweep or orphans:
                self.sweep()

    def sweep(self) -> None:
        """Remove what killed servers left under ``uploads/``, and nothing a running process writes
        (``serve/leftovers.py``): at start and on each delete."""
        removed = leftovers.sweep(
            self.uploads, lambda job_id: getattr(self.get(job_id), "state", None), self._started
        )
        if removed:
            log.info("removed %d files and folders that stopped servers left in %s", removed, self.uploads)

    def _recover_quietly(self) -> None:
        """``recover``, a failure logged: the ingestion thread goes on."""
        try:
            self.recover(sweep=False)
        except Exception:
            log.exception("taking over orphaned ingestion jobs failed")

    def close(self) -> None:
        """Stop after the turn running now, and the conversions running; the jobs still waiting
        stay on disk, released to the next server that starts (``recover``)."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        self.conversions.close()
        self._thread.join()
        for waiting in self._turns.values():
            for job in waiting:
                job.worker = None
                self._save(job)

    # The ingestion thread ----------------------------------------------------------------------

    def _queue(self, job: Job) -> None:
        """``job`` waits for its turns, its office files converted meanwhile."""
        staged = self._staging(job.id)
        self.conversions.submit(job.tenant, [staged / name for name in job.remaining])
        with self._wake:
            self._turns.setdefault(job.tenant, deque()).append(job)
            self._wake.notify_all()

    def _next(self) -> Job | None:
        """The first job of the tenant whose turn it is, passing over a tenant whose first job's
        next files are still converting (it keeps its place); that tenant goes to the end. None
        when closed, or when ``RECOVER_EVERY`` seconds passed with nothing to do."""
        with self._wake:
            if not self._closed:
                for tenant, waiting in self._turns.items():
                    if waiting and self._ready(waiting[0]):
                        self._turns.move_to_end(tenant)
                        return waiting[0]
                self._wake.wait(RECOVER_EVERY)
            return None

    def _ready(self, job: Job) -> bool:
        """Whether none of the files of ``job``'s next turn is still converting."""
        staged = self._staging(job.id)
        return not any(self.conversions.pending(staged / name) for name in job.remaining[: self.chunk])

    def _converted(self) -> None:
        """A conversion ended: a job waiting for it may be ready."""
        with self._wake:
            self._wake.notify_all()

    def _loop(self) -> None:
        lower_this_thread()  # searches first: ingestion and its worker processes run in the background
        looked = time.monotonic()
        while not self._closed:
            if time.monotonic() - looked >= RECOVER_EVERY:  # busy or idle, orphans are looked for
                self._recover_quietly()
                looked = time.monotonic()
            job = self._next()
            if job is None:
                continue
            try:
                self._turn(job)
            except Exception as exc:  # a bug: the job says so, the log has the traceback
                log.exception("ingestion job %s failed", job.id)
                job.error, job.state, job.remaining = f"{type(exc).__name__}: {exc}", "failed", []
            if not job.remaining or job.state == "failed":
                with self._wake:
                    self._turns[job.tenant].popleft()
                self._finish(job)
            self._save(job)

    def _turn(self, job: Job) -> None:
        """Ingest the next ``chunk`` files of ``job``, each standing for its name under ``uploads/``
        (its document's id and source) and swapped in there as soon as it is committed; an office
        file whose conversion failed fails with its reason, not converted again."""
        names, staged = job.remaining[: self.chunk], self._staging(job.id)
        paths = [staged / name for name in names]
        job.state = "running"
        self._save(job)
        todo = self._unconverted_failed(job, paths)

        def planned(n: int) -> None:
            job.total = len(job.files)

        def progress(path: str, outcome: str, n_pages: int) -> None:
            job.done += 1
            job.pages += n_pages
            if outcome != "failed":
                self._swap_in(Path(path))
            self._save(job)

        stands_for = {str(path): str(self.uploads / path.name) for path in paths}
        options = IngestOptions.given(self.options, nice=BACKGROUND, stands_for=stands_for, **job.options)
        if job.fields:
            options = IngestOptions.given(options, meta={**options.meta, **job.fields})
        try:
            with self.pool.writing() as index:
                report = retry_locked(
                    lambda: index.add(todo, options, progress=progress, on_planned=planned), JOB_WAIT
                )
        except PagesightError as exc:
            job.error, job.state, job.remaining = self.scrub(str(exc)), "failed", []
            return
        job.remaining = job.remaining[len(names) :]
        job.added += report.added
        job.replaced += report.replaced
        job.unchanged += report.unchanged
        job.failed += [
            {"file": Path(path).name, "reason": self.scrub(reason)} for path, reason in report.failed
        ]
        job.notes += [{"file": Path(path).name, "note": self.scrub(note)} for path, note in report.notes]
        for path in paths:
            path.unlink(missing_ok=True)  # a failed file's staged copy: the good version stays

    def _unconverted_failed(self, job: Job, paths: list[Path]) -> list[Path]:
        """``paths`` but the office files whose conversion failed, which fail in ``job`` here."""
        todo = []
        for path in paths:
            if (reason := self.conversions.failure(path)) is None:
                todo.append(path)
                continue
            job.total = len(job.files)
            job.done += 1
            job.failed.append({"file": path.name, "reason": self.scrub(reason)})
        return todo

    def _swap_in(self, staged: Path) -> None:
        """A staged file whose document was just committed (its source already the path under
        ``uploads/``) put in place there, replacing an earlier version at once. A server taking over
        a killed one's job may find it in place already (a link of the staged file): renaming one
        link of a file over another of the same file does nothing, so the temporary link goes too."""
        final = self.uploads / staged.name
        temporary = self.uploads / f"{temporary_prefix('swap')}{uuid.uuid4().hex}"  # leftovers.sweep
        try:
            os.link(staged, temporary)
        except OSError:  # a file system without hard links: a copy, renamed into place all the same
            shutil.copy2(staged, temporary)
        os.replace(temporary, final)
        temporary.unlink(missing_ok=True)  # still there when final was a link of the same file

    def _finish(self, job: Job) -> None:
        if job.state != "failed":
            job.state = "done"
        staged = self._staging(job.id)
        self.conversions.forget([staged / name for name in job.files])
        shutil.rmtree(staged, ignore_errors=True)

    # Records -----------------------------------------------------------------------------------

    def _staging(self, job_id: str) -> Path:
        return self.uploads / STAGING / job_id

    def _save(self, job: Job) -> None:
        """The job's record written whole (a temporary file renamed into place)."""
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            prefix = temporary_prefix("job")
            with tempfile.NamedTemporaryFile("w", dir=self.folder, prefix=prefix, delete=False) as handle:
                json.dump(vars(job), handle)
            os.replace(handle.name, self.folder / f"{job.id}.json")
