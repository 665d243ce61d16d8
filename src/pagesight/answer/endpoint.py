"""Where model calls go: an OpenAI-compatible endpoint, the key sent to it and the model called when
a caller names none.

Every call pagesight makes to a model behind an endpoint goes through ``Endpoint.create``: the
``openai`` reader's answers and agent turns, its yes/no judgements as the ``vlm-openai`` reranker,
the LLM judge of eval and the question writer of ``pagesight train``. So the endpoint a caller
holds is the only one its calls can reach.

The command line and the library fill what they are not given from the environment
(``Endpoint.from_environment``: ``PAGESIGHT_OPENAI_BASE_URL`` then ``OPENAI_BASE_URL``,
``PAGESIGHT_OPENAI_API_KEY`` then ``OPENAI_API_KEY``, ``PAGESIGHT_OPENAI_MODEL``). A server builds
its one endpoint from the operator's offer when it starts (``serve.offer.Offer.endpoint``) and gives
it to every index, reader and reranker it builds, so no request of a running server makes
pagesight read those variables; a server that offers no model holds ``Endpoint.none()``, which
every call is refused by.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

from pagesight.endpoints import first_set
from pagesight.errors import PagesightError

BASE_URL_ENV = ("PAGESIGHT_OPENAI_BASE_URL", "OPENAI_BASE_URL")
KEY_ENV = ("PAGESIGHT_OPENAI_API_KEY", "OPENAI_API_KEY")
MODEL_ENV = "PAGESIGHT_OPENAI_MODEL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
NO_ENDPOINT = "no model endpoint is offered here"


@dataclass(frozen=True)
class Endpoint:
    """``base_url``: the API's root (None: none, every call refused); ``api_key``: the key sent
    (None: a placeholder, for a local server that needs none; never shown in a repr);
    ``model``: the model called when a caller names none."""

    base_url: str | None
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None

    @classmethod
    def from_environment(
        cls, base_url: str | None = None, api_key: str | None = None, model: str | None = None
    ) -> Endpoint:
        """The endpoint given, what is not given read from the environment (the module docstring),
        the public OpenAI API when no URL is given anywhere."""
        return cls(
            base_url or first_set(BASE_URL_ENV) or DEFAULT_BASE_URL,
            api_key or first_set(KEY_ENV),
            model or os.environ.get(MODEL_ENV) or None,
        )

    @classmethod
    def none(cls) -> Endpoint:
        """No endpoint: what a server that offers no model holds."""
        return cls(None)

    def create(self, body: dict[str, Any], timeout: float, max_retries: int):
        """The chat completion of ``body`` (its model, messages and options), within ``timeout``
        seconds a try and ``max_retries`` retries (the ``openai`` client's, with backoff): the one
        call to a model that pagesight makes. The client's own errors propagate."""
        if self.base_url is None:
            raise PagesightError(NO_ENDPOINT)
        return _client(self, timeout, max_retries).chat.completions.create(**body)


@functools.lru_cache(maxsize=32)
def _client(endpoint: Endpoint, timeout: float, max_retries: int):
    """One ``openai`` client (a connection pool) per endpoint and limits, shared by its readers."""
    try:
        import openai
    except ImportError:
        raise PagesightError(
            "the openai reader needs the openai package: pip install 'pagesight[openai]'"
        ) from None
    return openai.OpenAI(
        api_key=endpoint.api_key or "none",
        base_url=endpoint.base_url,
        timeout=timeout,
        max_retries=max_retries,
    )
