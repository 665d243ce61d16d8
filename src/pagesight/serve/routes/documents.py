"""The documents and their ingestion: list, look up, delete, upload (a background job), follow jobs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile

from pagesight.errors import PagesightError
from pagesight.ingest.options import meta_fields
from pagesight.read.language import check_language
from pagesight.serve.jobs import check_content, safe_name, save
from pagesight.serve.pool import retry_locked
from pagesight.serve.routes.common import ApiError, Caller, Server, lookup, writable
from pagesight.serve.tenants import Tenant

router = APIRouter(tags=["documents"])
MAX_FILES = 20  # files in one upload


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
        return {"documents": idx.document_list(tenant.within(where))}


@router.get("/api/documents/{doc_id:path}")
def document_info(server: Server, tenant: Caller, doc_id: str) -> dict:
    with server.pool.reading() as idx:
        lookup(idx, doc_id, tenant)
        return next(row for row in idx.document_list() if row["id"] == doc_id)


@router.delete("/api/documents/{doc_id:path}", dependencies=[Depends(writable)])
def delete(server: Server, tenant: Caller, doc_id: str) -> dict:
    """Remove a document and its pages (and its file, when it was uploaded here)."""
    with server.pool.writing(wait=5.0) as idx:
        source = lookup(idx, doc_id, tenant).source
        retry_locked(lambda: idx.delete(doc_id))
    if source.resolve().parent == server.uploads.resolve():
        source.unlink(missing_ok=True)
    return {"deleted": doc_id}


@router.post("/api/documents", status_code=202, dependencies=[Depends(writable)])
def upload(
    server: Server,
    tenant: Caller,
    files: Annotated[list[UploadFile], File(description="PDFs and images.")],
    meta: Annotated[
        list[str] | None,
        Form(description="KEY=VALUE fields every file carries, for where filters (repeatable)."),
    ] = None,
    language: Annotated[
        str | None,
        Form(description="Every page's language (en, fr, de, es, it, pt); default: detected a page."),
    ] = None,
) -> dict:
    """Save the files and ingest them in the background; poll ``/api/jobs/{id}`` for progress.

    A file of a type not ingested is refused (415) before anything is saved; a file that
    cannot be read fails alone in the job's ``failed``. ``meta`` fields go with every file, as
    ``ingest --meta`` does. A tenant's files are saved as ``NAME--file`` and carry ``tenant =
    NAME`` (``serve.tenants``), whatever ``meta`` says."""
    if len(files) > MAX_FILES:
        raise ApiError(413, f"at most {MAX_FILES} files in one upload")
    try:
        fields = meta_fields([item for item in meta or [] if item.strip()], "meta")
        if language:
            check_language(language)
    except PagesightError as exc:
        raise ApiError(422, str(exc)) from None
    received = []
    for upload in files:
        name = safe_name(upload.filename or "")
        if tenant.where is not None:
            name = f"{tenant.name}--{name}"  # never over another tenant's document
        data = upload.file.read()
        check_content(name, data)
        received.append((name, data))
    if len({name for name, _ in received}) < len(received):
        raise ApiError(422, "two uploaded files have the same name")
    paths = [save(server.uploads, name, data) for name, data in received]
    owner = tenant.name if tenant.where is not None else None
    return {"job": server.jobs.submit(paths, owner, fields, language or None).to_dict()}


@router.get("/api/jobs")
def job_list(server: Server, tenant: Caller) -> dict:
    return {"jobs": [job.to_dict() for job in server.jobs.all() if _owns(tenant, job)]}


@router.get("/api/jobs/{job_id}")
def job_progress(server: Server, tenant: Caller, job_id: str) -> dict:
    found = server.jobs.get(job_id)
    if found is None or not _owns(tenant, found):
        raise ApiError(404, f"no job '{job_id}'")
    return found.to_dict()


def _owns(tenant: Tenant, job) -> bool:
    """Whether ``tenant`` may follow ``job``: its own, or any for a key that sees everything."""
    return tenant.where is None or job.tenant == tenant.name
