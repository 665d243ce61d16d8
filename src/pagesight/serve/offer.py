"""What a server lets a request choose: readers, their models, rerankers, answer length.

A request names a reader, a model, a reranker and a token budget; on a server each is something
the operator pays for (an endpoint's key, a model in memory, minutes of CPU), so a request may
choose only among what the operator offered when starting it (``pagesight serve --reader openai
--model M --base-url URL --model-key KEY --rerank vlm-openai --max-tokens N``). By default a server
offers the extractive reader and no reranker.

A model behind an endpoint (the ``openai`` reader, the ``vlm-openai`` reranker) needs the endpoint
named by the operator: the offer's ``endpoint()`` (``answer.endpoint``: its URL, its key, its first
model) is the one every index, reader and reranker of the server calls, given to them when the
server starts. Nothing a server runs reads ``OPENAI_*`` or ``PAGESIGHT_OPENAI_*`` variables after
that (the command line reads them once, as the defaults of ``--base-url`` and ``--model-key``), so a
stray variable never chooses where tiles go or which model a request runs. The readers built for
requests are kept, at most ``KEPT_READERS`` of them, the least recently used going first.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pagesight.answer import base
from pagesight.answer.endpoint import Endpoint
from pagesight.errors import PagesightError
from pagesight.request import AskRequest, SearchRequest
from pagesight.serve.reading import PooledReader, ReadingPool

LOCAL_READER = "extractive"  # reads the tiles' text: nothing to pay, nothing to load
MODEL_READERS = ("openai",)  # readers a server may offer: their model runs behind an endpoint
ENDPOINT_RERANKERS = ("vlm-openai",)  # rerankers whose model runs behind the offer's endpoint
DEFAULT_MAX_TOKENS = 1024
DEFAULT_RERANK_CANDIDATES = 100  # tiles one search may have reranked: a model call each, for vlm-openai
KEPT_READERS = 16
ASKS_PER_TENANT = 2  # answers one key may have in progress at once (each may wait on a model)
ASKS = 16  # answers in progress at once over all keys: the request threads (40) stay mostly free


class NotOffered(PagesightError):
    """A request that chose what this server does not offer (answered 403)."""


class TooManyAsks(PagesightError):
    """An ask past the bound of answers in progress (answered 429, to be tried again)."""


@dataclass(frozen=True)
class Offer:
    """``readers``: model readers offered beside the extractive one; ``models``: the models a
    request may name for them and for an endpoint's reranker (the first is the default);
    ``base_url`` and ``api_key``: their endpoint and the key sent to it; ``rerankers``: the
    rerankers a request may name; ``max_tokens``: the longest answer a request may ask for;
    ``rerank_candidates``: the most tiles a request may have reranked (each a model call for an
    endpoint's reranker)."""

    readers: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    base_url: str | None = None
    rerankers: tuple[str, ...] = ()
    max_tokens: int = DEFAULT_MAX_TOKENS
    api_key: str | None = field(default=None, repr=False)
    rerank_candidates: int = DEFAULT_RERANK_CANDIDATES

    def __post_init__(self) -> None:
        for reader in self.readers:
            if reader not in MODEL_READERS:
                raise PagesightError(
                    f"--reader {reader}: a server offers the extractive reader and {', '.join(MODEL_READERS)} "
                    "(a model behind an endpoint); a local model reader runs with pagesight ask"
                )
        called = [*self.readers, *(name for name in self.rerankers if name in ENDPOINT_RERANKERS)]
        if called and not self.models:
            raise PagesightError(
                f"--reader openai and --rerank vlm-openai need the models requests may name: "
                f"--model M (repeatable); offered: {', '.join(called)}"
            )
        if self.models and not called:
            raise PagesightError("--model names the models behind --base-url: give --reader openai too")
        if called and not self.base_url:
            raise PagesightError(
                f"{', '.join(called)}: needs its endpoint: --base-url URL (or PAGESIGHT_OPENAI_BASE_URL); "
                "a server never sends tiles to a default endpoint"
            )
        if self.max_tokens < 1:
            raise PagesightError("--max-tokens must be 1 or more")
        if self.rerank_candidates < 1:
            raise PagesightError("--rerank-candidates must be 1 or more")

    def endpoint(self) -> Endpoint:
        """Where every model call of the server goes: the offered endpoint with its key and first
        model, or none (every call refused) when no model is offered."""
        if not self.base_url:
            return Endpoint.none()
        return Endpoint(self.base_url, self.api_key, self.models[0] if self.models else None)

    def check(self, request: SearchRequest) -> SearchRequest:
        """``request`` if this server offers what it chose (an ask's model defaulted to the
        first offered), else ``NotOffered`` saying what is."""
        if request.rerank is not None and request.rerank not in self.rerankers:
            offered = ", ".join(self.rerankers) or "none (serve --rerank NAME)"
            raise NotOffered(f"reranker '{request.rerank}' is not offered here; offered: {offered}")
        if request.rerank is not None and request.rerank_candidates > self.rerank_candidates:
            raise NotOffered(
                f"rerank_candidates is at most {self.rerank_candidates} here, got {request.rerank_candidates}"
            )
        if not isinstance(request, AskRequest):
            return request
        if request.reader == LOCAL_READER:
            if request.model is not None:
                raise NotOffered(f"reader '{LOCAL_READER}' runs here: its model is the server's to choose")
            return request
        if request.reader not in self.readers:
            offered = ", ".join((LOCAL_READER, *self.readers))
            raise NotOffered(f"reader '{request.reader}' is not offered here; offered: {offered}")
        if request.model is not None and request.model not in self.models:
            raise NotOffered(
                f"model '{request.model}' is not offered here; offered: {', '.join(self.models)}"
            )
        if request.max_tokens is not None and request.max_tokens > self.max_tokens:
            raise NotOffered(f"max_tokens is at most {self.max_tokens} here, got {request.max_tokens}")
        return request.replace(
            model=request.model or self.models[0], max_tokens=request.max_tokens or self.max_tokens
        )


class OfferedReaders(base.Readers):
    """The readers a server built for requests, by reader and options, at most ``KEPT_READERS``
    (a model reader holds a connection pool, a model in memory): built on a request's first use,
    a model reader calling the offer's endpoint; the extractive reader reading in ``pool``'s
    processes when given (``serve.reading``: its CPU work never holds the request threads)."""

    def __init__(self, offer: Offer, pool: ReadingPool | None = None):
        super().__init__(local={"endpoint": offer.endpoint()} if offer.readers else {}, kept=KEPT_READERS)
        self.pool = pool

    def get(self, request: AskRequest) -> base.Reader:
        if self.pool is not None and request.reader == LOCAL_READER and self.given is None:
            return self.pool.reader(base.reader_options(request, {}))
        return super().get(request)

    def local_options(self, request: AskRequest) -> dict[str, Any]:
        return self.local if request.reader != LOCAL_READER else {}


def for_tenant(reader: base.Reader, tenant: Any) -> base.Reader:
    """``reader``, its work counted as ``tenant``'s where it reads in a pool (``serve.reading``)."""
    return reader.for_tenant(tenant) if isinstance(reader, PooledReader) else reader


class Asks:
    """The answers in progress, at most ``per_tenant`` for one tenant and ``total`` in all: an
    answer may wait seconds on a model, so one tenant's asks are bounded before they can hold the
    server's request threads; one past a bound is refused at once (``TooManyAsks``), never queued."""

    def __init__(self, per_tenant: int = ASKS_PER_TENANT, total: int = ASKS):
        self.per_tenant, self.total = per_tenant, total
        self._running: Counter[Any] = Counter()
        self._lock = threading.Lock()

    def take(self, tenant: Any) -> Slot:
        """A slot for ``tenant``'s answer (a ``serve.tenants.Tenant``), or ``TooManyAsks``."""
        with self._lock:
            if self._running[tenant] >= self.per_tenant:
                raise TooManyAsks(
                    f"{self.per_tenant} answers of this key are in progress already; ask again when one ends"
                )
            if sum(self._running.values()) >= self.total:
                raise TooManyAsks(f"{self.total} answers are in progress already; ask again shortly")
            self._running[tenant] += 1
        return Slot(self, tenant)

    def running(self) -> int:
        """The answers in progress now."""
        with self._lock:
            return sum(self._running.values())

    def _give_back(self, tenant: Any) -> None:
        with self._lock:
            self._running[tenant] -= 1
            if self._running[tenant] <= 0:
                del self._running[tenant]


class Slot:
    """One answer's place among ``Asks``, given back once however often ``release`` is called
    (when the answer is sent, and again when its stream is dropped unread)."""

    def __init__(self, asks: Asks, tenant: Any):
        self._asks, self._tenant = asks, tenant
        self._held = True
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            held, self._held = self._held, False
        if held:
            self._asks._give_back(self._tenant)

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
