"""GET /api/health and /api/status."""

from __future__ import annotations

import os

from fastapi import APIRouter

from pagesight import __version__
from pagesight.serve.routes.common import Caller, Server

router = APIRouter(tags=["status"])


@router.get("/api/health")
def health() -> dict:
    """Liveness; needs no key."""
    return {"status": "ok", "version": __version__}


@router.get("/api/status")
def status(server: Server, tenant: Caller) -> dict:
    """The index's counts, settings and size, whether writes are on, the jobs in progress; a
    tenant's key is told of its own documents and jobs only."""
    with server.pool.reading() as idx:
        if tenant.where is None:
            info = idx.info()
        else:
            own = idx.document_list(tenant.within(None))
            info = {"documents": len(own), "pages": sum(row["pages"] for row in own)}
    jobs = server.jobs.all()
    pending = [
        job.to_dict()
        for job in jobs
        if job.state in ("queued", "running") and (tenant.where is None or job.tenant == tenant.name)
    ]
    return {
        "index": info,
        "writable": tenant.write,
        "readers": server.pool.readers,
        "worker": os.getpid(),  # the server process that answered (serve --workers)
        "jobs": pending,
    }
