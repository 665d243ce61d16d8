"""GET /api/health and /api/status."""

from __future__ import annotations

import os

from fastapi import APIRouter

from pagesight import __version__
from pagesight.serve.routes.common import Server

router = APIRouter(tags=["status"])


@router.get("/api/health")
def health() -> dict:
    """Liveness; needs no key."""
    return {"status": "ok", "version": __version__}


@router.get("/api/status")
def status(server: Server) -> dict:
    """The index's counts, settings and size, whether writes are on, the jobs in progress."""
    with server.pool.reading() as idx:
        info = idx.info()
    pending = [job.to_dict() for job in server.jobs.all() if job.state in ("queued", "running")]
    return {
        "index": info,
        "writable": bool(server.api_key),
        "readers": server.pool.readers,
        "worker": os.getpid(),  # the server process that answered (serve --workers)
        "jobs": pending,
    }
