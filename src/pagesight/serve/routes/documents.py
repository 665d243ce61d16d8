"""The documents and their ingestion: list, look up, delete, upload (a background job), follow jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile

from pagesight.errors import PagesightError
from pagesight.ingest.options import IngestOptions
from pagesight.render.office import OFFICE_SUFFIXES, sandbox_problem
from pagesight.serve.fields import form_model, form_values
from pagesight.serve.jobs import check_content, safe_name
from pagesight.serve.pool import retry_locked
from pagesight.serve.routes.common import ApiError, Caller, Server, lookup, writable
from pagesight.serve.tenants import Tenant, shown, upload_name

router = APIRouter(tags=["documents"])
MAX_FILES = 20  # files in one upload
MAX_FIELDS = 50  # meta fields of one upload
MAX_FIELD = 1000  # characters of a meta field
# the ingestion options an upload may give: the fields of IngestOptions offered a form (spec.Spec)
UploadForm = form_model(IngestOptions, "UploadForm")


@router.get("/api/documents")
def documents(
    server: Server,
    tenant: Caller,
    where: Annotated[
        str | None, Query(max_length=4000, description="Only documents whose fields pass.")
    ] = None,
) -> dict:
    """Each document: id, type, pages, source, bytes, notes, and the fields ``where`` reads."""
    with server.pool.reading() as idx:
        return {"documents": shown(idx.document_list(tenant.within(where)), tenant)}


@router.get("/api/documents/{doc_id:path}")
def document_info(server: Server, tenant: Caller, doc_id: str) -> dict:
    """One document as ``/api/documents`` lists it."""
    with server.pool.reading() as idx:
        lookup(idx, doc_id, tenant)
        return shown([row for row in idx.document_list() if row["id"] == doc_id], tenant)[0]


@router.delete("/api/documents/{doc_id:path}", dependencies=[Depends(writable)])
def delete(server: Server, tenant: Caller, doc_id: str) -> dict:
    """Remove a document and its pages (and its file, when it was uploaded here, and an office
    file's converted PDF: ``Index.delete``); what stopped servers left under the uploads goes too
    (``serve/leftovers.py``)."""
    with server.pool.writing(wait=5.0) as idx:
        source = lookup(idx, doc_id, tenant).source
        retry_locked(lambda: idx.delete(doc_id))
    if source.resolve().parent == server.uploads.resolve():
        source.unlink(missing_ok=True)
    server.jobs.sweep()
    return {"deleted": doc_id}


@router.post("/api/documents", status_code=202, dependencies=[Depends(writable)])
def upload(
    server: Server,
    tenant: Caller,
    files: Annotated[list[UploadFile], File(description="PDFs and images.")],
    form: Annotated[UploadForm, Form()],  # type: ignore[valid-type]
) -> dict:
    """Save the files and ingest them in the background; poll ``/api/jobs/{id}`` for progress.

    A file of a type not ingested is refused (415) before anything is saved; a file that
    cannot be read fails alone in the job's ``failed``, and an earlier version of it stays.
    The form's other fields are the ingestion options an upload may choose (``IngestOptions``'
    fields offered a form: ``language``, ``meta``); ``meta`` fields go with every file, as
    ``ingest --meta`` does (the built-in fields are the
    catalog's: ``id``, ``path``, ``type``, ... cannot be given). A tenant's files are saved as
    ``NAME--file`` and carry ``tenant = NAME`` (``serve.tenants``), whatever ``meta`` says; a name
    that is another tenant's document is refused (409)."""
    if len(files) > MAX_FILES:
        raise ApiError(413, f"at most {MAX_FILES} files in one upload")
    given = [item for item in form.meta or [] if item.strip()]
    if len(given) > MAX_FIELDS or any(len(item) > MAX_FIELD for item in given):
        raise ApiError(422, f"meta: at most {MAX_FIELDS} fields of at most {MAX_FIELD} characters")
    try:
        options = form_values(IngestOptions, form.model_copy(update={"meta": given}))
        IngestOptions(**options)  # refused here, before any file is saved
    except PagesightError as exc:
        raise ApiError(422, str(exc)) from None
    fields = options.pop("meta", {})
    received = []
    for upload in files:
        name = upload_name(tenant, safe_name(upload.filename or ""))
        if Path(name).suffix.lower() in OFFICE_SUFFIXES and (problem := sandbox_problem()):
            raise ApiError(415, f"{name}: {problem}")
        data = upload.file.read()
        check_content(name, data)
        received.append((name, data))
    if len({name for name, _ in received}) < len(received):
        raise ApiError(422, "two uploaded files have the same name")
    with server.pool.reading() as idx:
        for name, _ in received:
            found = idx.catalog.document(Path(name).stem)
            if found is not None and not tenant.sees(found):  # an id the operator gave another
                raise ApiError(409, f"{name}: the name is taken; upload it under another name")
    owner = tenant.name if tenant.where is not None else None
    job_id = server.jobs.new_id(owner, len(received))
    for name, data in received:
        server.jobs.stage(job_id, name, data)
    job = server.jobs.submit(job_id, [name for name, _ in received], owner, fields, options)
    return {"job": job.to_dict()}


@router.get("/api/jobs")
def job_list(server: Server, tenant: Caller) -> dict:
    """The ingestion jobs of uploads (a tenant's own), with their progress."""
    return {"jobs": [job.to_dict() for job in server.jobs.all() if _owns(tenant, job)]}


@router.get("/api/jobs/{job_id}")
def job_progress(server: Server, tenant: Caller, job_id: str) -> dict:
    """One ingestion job: its state (queued, running, done, failed), its files added, replaced,
    unchanged and failed, its notes and pages."""
    found = server.jobs.get(job_id)
    if found is None or not _owns(tenant, found):
        raise ApiError(404, f"no job '{job_id}'")
    return found.to_dict()


def _owns(tenant: Tenant, job) -> bool:
    """Whether ``tenant`` may follow ``job``: its own, or any for a key that sees everything."""
    return tenant.where is None or job.tenant == tenant.name
