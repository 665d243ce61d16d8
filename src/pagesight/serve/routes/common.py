"""What every route shares: the server's state and the caller's tenant as dependencies (``Server``,
``Caller``), the errors answered as JSON, the write guard, documents looked up (another tenant's
answer 404, as if absent), and boxes parsed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request
from starlette.exceptions import HTTPException

from pagesight.errors import PagesightError
from pagesight.frontends import MAX_BOXES, parse_boxes
from pagesight.index import Index
from pagesight.records import Box
from pagesight.serve.jobs import Jobs
from pagesight.serve.offer import Asks, Offer, OfferedReaders
from pagesight.serve.pool import IndexPool
from pagesight.serve.tenants import PUBLIC, Tenant

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
    the uploads folder, what requests may choose (``serve.offer``), the scrub of the server's
    folders from messages (``frontends.Scrub``) and the answers in progress (``offer.Asks``)."""

    pool: IndexPool
    jobs: Jobs
    readers: OfferedReaders
    uploads: Path
    offer: Offer
    scrub: Callable[[str], str]
    asks: Asks = field(default_factory=Asks)


# The two are async, so FastAPI calls them on the event loop: a plain ``def`` dependency is a trip
# through the thread pool, two more per request for what reads an attribute.
async def served(request: Request) -> Served:
    return request.app.state.served


async def caller(request: Request) -> Tenant:
    """The tenant the guard found for the request's key (``serve.tenants``)."""
    return getattr(request.state, "tenant", PUBLIC)


Server = Annotated[Served, Depends(served)]
Caller = Annotated[Tenant, Depends(caller)]


async def writable(tenant: Caller) -> None:
    """A route that writes: refused to a key that may not write (and to all without a key)."""
    if not tenant.write:
        raise ApiError(403, NO_WRITES if tenant is PUBLIC else f"the key of '{tenant.name}' may not write")


def lookup(index: Index, doc_id: str, tenant: Tenant):
    """The catalog row of ``doc_id`` when ``tenant`` may see it: ids are looked up, never used as
    paths, and another tenant's document is answered as absent."""
    found = index.catalog.document(doc_id)
    if found is None or not tenant.sees(found):
        raise ApiError(404, f"no document '{doc_id}'")
    return found


def check_documents(index: Index, doc_ids, tenant: Tenant) -> None:
    for doc_id in doc_ids or ():
        lookup(index, doc_id, tenant)


def given_boxes(text: str, name: str, limit: int = MAX_BOXES) -> list[Box]:
    """``frontends.parse_boxes``, its refusal a 422."""
    try:
        return parse_boxes(text, name, limit)
    except PagesightError as exc:
        raise ApiError(422, str(exc)) from None
