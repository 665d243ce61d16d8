"""What a server lets a request choose: readers, their models, rerankers, answer length.

A request names a reader, a model, a reranker and a token budget; on a server each is something
the operator pays for (an endpoint's key, a model in memory, minutes of CPU), so a request may
choose only among what the operator offered when starting it (``pagesight serve --reader openai
--model M --base-url URL --rerank cross-encoder --max-tokens N``). By default a server offers the
extractive reader and no reranker. A model reader needs its endpoint named by the operator: a
server never sends tiles to an endpoint a library default or a stray ``OPENAI_*`` variable chose.
The readers built for requests are kept, at most ``KEPT_READERS`` of them, the least recently used
going first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pagesight.answer import base
from pagesight.errors import PagesightError
from pagesight.request import AskRequest, SearchRequest

LOCAL_READER = "extractive"  # reads the tiles' text: nothing to pay, nothing to load
MODEL_READERS = ("openai",)  # readers a server may offer: their model runs behind an endpoint
ENDPOINT_ENV = ("PAGESIGHT_OPENAI_BASE_URL", "OPENAI_BASE_URL")
DEFAULT_MAX_TOKENS = 1024
KEPT_READERS = 16


class NotOffered(PagesightError):
    """A request that chose what this server does not offer (answered 403)."""


@dataclass(frozen=True)
class Offer:
    """``readers``: model readers offered beside the extractive one; ``models``: the models a
    request may name for them (the first is the default); ``base_url``: their endpoint;
    ``rerankers``: the rerankers a request may name; ``max_tokens``: the longest answer a request
    may ask for."""

    readers: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    base_url: str | None = None
    rerankers: tuple[str, ...] = ()
    max_tokens: int = DEFAULT_MAX_TOKENS

    def __post_init__(self) -> None:
        for reader in self.readers:
            if reader not in MODEL_READERS:
                raise PagesightError(
                    f"--reader {reader}: a server offers the extractive reader and {', '.join(MODEL_READERS)} "
                    "(a model behind an endpoint); a local model reader runs with pagesight ask"
                )
        if self.readers and not self.models:
            raise PagesightError("--reader needs the models requests may name: --model M (repeatable)")
        if self.models and not self.readers:
            raise PagesightError("--model names a model reader's models: give --reader openai too")
        if self.readers and not self.endpoint():
            raise PagesightError(
                "--reader openai needs its endpoint: --base-url URL (or PAGESIGHT_OPENAI_BASE_URL); "
                "a server never sends tiles to a default endpoint"
            )
        if self.max_tokens < 1:
            raise PagesightError("--max-tokens must be 1 or more")

    def endpoint(self) -> str | None:
        return self.base_url or next(
            (os.environ[name] for name in ENDPOINT_ENV if os.environ.get(name)), None
        )

    def check(self, request: SearchRequest) -> SearchRequest:
        """``request`` if this server offers what it chose (an ask's model defaulted to the
        first offered), else ``NotOffered`` saying what is."""
        if request.rerank is not None and request.rerank not in self.rerankers:
            offered = ", ".join(self.rerankers) or "none (serve --rerank NAME)"
            raise NotOffered(f"reranker '{request.rerank}' is not offered here; offered: {offered}")
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


class Readers(base.Readers):
    """The readers a server built for requests, by reader and options, at most ``KEPT_READERS``
    (a model reader holds a connection pool, a model in memory): built on a request's first use,
    a model reader with the offer's endpoint."""

    def __init__(self, offer: Offer):
        super().__init__(local={"base_url": offer.endpoint()} if offer.readers else {}, kept=KEPT_READERS)

    def local_options(self, request: AskRequest) -> dict[str, Any]:
        return self.local if request.reader != LOCAL_READER else {}
