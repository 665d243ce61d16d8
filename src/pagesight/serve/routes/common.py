"""What every route shares: the server's state as a dependency (``Server``), the errors answered as
JSON, the write guard, documents looked up, and boxes parsed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request
from starlette.exceptions import HTTPException

from pagesight.errors import PagesightError
from pagesight.index import Index
from pagesight.records import Box
from pagesight.serve.jobs import Jobs
from pagesight.serve.pool import IndexPool
from pagesight.service import MAX_BOXES, Readers, parse_boxes

API_KEY_ENV = "PAGESIGHT_API_KEY"
NO_WRITES = (
    "writing is off: start the server with --api-key KEY (or the environment variable "
    f"{API_KEY_ENV}) to upload and delete documents"
)


class ApiError(HTTPException):
    """An error answered as ``{"error": message}`` with its status."""


@dataclass
class Served:
    """What the routes serve from: the index pool, the ingestion jobs, the readers built so far,
    the uploads folder and the API key (None: reads open, writes refused)."""

    pool: IndexPool
    jobs: Jobs
    readers: Readers
    uploads: Path
    api_key: str | None


def served(request: Request) -> Served:
    return request.app.state.served


Server = Annotated[Served, Depends(served)]


def writable(server: Server) -> None:
    """A route that writes: refused unless the server has an API key."""
    if not server.api_key:
        raise ApiError(403, NO_WRITES)


def lookup(index: Index, doc_id: str):
    """The catalog row of ``doc_id``: ids are looked up, never used as paths."""
    found = index.catalog.document(doc_id)
    if found is None:
        raise ApiError(404, f"no document '{doc_id}'")
    return found


def check_documents(index: Index, doc_ids) -> None:
    for doc_id in doc_ids or ():
        lookup(index, doc_id)


def given_boxes(text: str, name: str, limit: int = MAX_BOXES) -> list[Box]:
    """``service.parse_boxes``, its refusal a 422."""
    try:
        return parse_boxes(text, name, limit)
    except PagesightError as exc:
        raise ApiError(422, str(exc)) from None
