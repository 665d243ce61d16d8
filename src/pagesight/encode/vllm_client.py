"""The client of vLLM's pooling and embeddings APIs, as a visual encoder behind a server calls them.

What was read (vLLM's repository, the commits named): the request shapes of
``vllm/entrypoints/pooling/base/protocol.py`` (020638a): a request names its ``model`` and gives
either ``input`` (texts, tokenized as a completion) or ``messages`` (one chat conversation, whose
``image_url`` parts may be data URLs), with ``chat_template``, ``add_special_tokens`` and
``encoding_format``; ``pooling/protocol.py`` (01cfbaf): ``/pooling`` takes a ``task``
(``token_embed``: one vector a token) and answers ``data: [{index, data}]``, ``data`` a list of
vectors for ``token_embed``; ``/v1/embeddings`` answers ``data: [{index, embedding}]``;
``docs/models/pooling_models/token_embed.md`` (16d2969) and
``examples/pooling/token_embed/colqwen3_token_embed_online.py`` (344c27b): a page goes as one user
message holding the image as a ``data:image/png;base64`` URL; a request's own ``chat_template`` is
refused unless the server runs with ``--trust-request-chat-template``
(``entrypoints/openai/engine/serving.py``); an error is a JSON body, ``{"error": {"message",
"type", "code"}}`` (older servers: the same fields at the top level).

Every request goes to the endpoint's URL with its key, and nowhere else: a redirect is an error,
never followed. At most ``concurrency`` requests of this process are in flight; more wait for a
free one (backpressure on the caller). A 429, a 5xx, a timeout or a refused connection is tried
again after a backoff (doubling, with jitter; a ``Retry-After`` the server sends is honoured), at
most ``retries`` times; any other answer is an error naming the endpoint, the model and vLLM's
message. The first answer (the encoder's probe) comes as JSON numbers, which give the model's
width; every later one as base64 little-endian float32 (``encoding_format``, ``embed_dtype``,
``endianness``; each output's values flattened: ``vllm/utils/serial_utils.py``, 07dfb38), a
fraction of the numbers' cost to write and read, laid out by that width and checked against it by
the request's token count (``usage.prompt_tokens``).
"""

from __future__ import annotations

import base64
import binascii
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pagesight.encode.models import require
from pagesight.endpoints import MAX_BACKOFF, VisualEndpoint
from pagesight.errors import PagesightError

POOLING = "/pooling"
EMBEDDINGS = "/v1/embeddings"
MODELS = "/v1/models"
RETRIED = frozenset({429, 500, 502, 503, 504})
# vectors as base64 float32, little-endian: each output's values flattened
# (vllm/utils/serial_utils.py, tensor2binary, at 07dfb38)
BINARY = {"encoding_format": "base64", "embed_dtype": "float32", "endianness": "little"}

Conversation = list[dict]  # chat messages: one input of ``messages``


class EndpointError(PagesightError):
    """The visual endpoint could not give the vectors asked for (the message names it)."""


class VllmClient:
    """Calls ``model`` at ``endpoint``: ``pool`` (``/pooling``, task ``token_embed``: one vector a
    token) and ``embed`` (``/v1/embeddings``: one vector an input), each input a text or a
    conversation. Thread-safe: a server's request threads and an ingestion share one."""

    def __init__(self, endpoint: VisualEndpoint, model: str):
        httpx = require("httpx", "served")
        self.endpoint, self.model = endpoint, model
        self.where = f"visual endpoint {endpoint.base_url} (model {model})"
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        self._httpx = httpx
        self._http = httpx.Client(
            base_url=endpoint.base_url,
            headers=headers,
            timeout=endpoint.timeout,
            follow_redirects=False,  # the key goes to this URL alone
            limits=httpx.Limits(
                max_connections=endpoint.concurrency, max_keepalive_connections=endpoint.concurrency
            ),
            trust_env=False,  # no proxy from the environment sees the key or the pages
        )
        self._slots = threading.BoundedSemaphore(endpoint.concurrency)
        self._fan = ThreadPoolExecutor(endpoint.concurrency, thread_name_prefix="pagesight-endpoint")

    def close(self) -> None:
        self._fan.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    def served(self) -> list[dict]:
        """The models the server serves (``/v1/models``'s ``data``: each its ``id``, ``root``,
        ``max_model_len``)."""
        body = self._call("GET", MODELS, None)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise EndpointError(f"the {self.where} answered {MODELS} without a list of models")
        return [model for model in data if isinstance(model, dict)]

    def check_served(self) -> dict:
        """The entry of ``/v1/models`` for this client's model; an error naming the ones served."""
        models = self.served()
        for model in models:
            if model.get("id") == self.model:
                return model
        names = ", ".join(str(model.get("id")) for model in models) or "none"
        raise EndpointError(
            f"the {self.where} does not serve {self.model} (it serves {names}): start vLLM with that model, "
            "or name it by --served-model-name"
        )

    def pool(
        self, inputs: Sequence[str | Conversation], dim: int | None = None, **fields: Any
    ) -> list[np.ndarray]:
        """One ``(tokens, dim)`` array an input, by ``/pooling`` with task ``token_embed``."""
        return self._vectors(POOLING, inputs, {"task": "token_embed", **fields}, "data", 2, dim)

    def embed(
        self, inputs: Sequence[str | Conversation], dim: int | None = None, **fields: Any
    ) -> list[np.ndarray]:
        """One ``(dim,)`` array an input, by ``/v1/embeddings``."""
        return self._vectors(EMBEDDINGS, inputs, fields, "embedding", 1, dim)

    def _vectors(
        self,
        path: str,
        inputs: Sequence[str | Conversation],
        fields: dict,
        key: str,
        ndim: int,
        dim: int | None,
    ) -> list[np.ndarray]:
        """The vectors of ``inputs``: the texts in one request, each conversation in its own (a
        request holds one), in flight together up to the endpoint's bound. With the width ``dim``
        known, they come as base64 float32 (a fraction of the JSON numbers' cost), each request's
        checked against it by its token count."""
        if not inputs:
            return []
        found: list[np.ndarray | None] = [None] * len(inputs)
        texts = [number for number, item in enumerate(inputs) if isinstance(item, str)]
        conversations = [number for number, item in enumerate(inputs) if not isinstance(item, str)]
        shape = {"encoding_format": "float"} if dim is None else BINARY
        base = {"model": self.model, **shape, **fields}
        read = (path, key, ndim, dim)
        pending = [
            (
                [number],
                self._fan.submit(
                    self._request, read, {**base, "messages": inputs[number], "add_special_tokens": True}, 1
                ),
            )
            for number in conversations
        ]
        if texts:
            body = {**base, "input": [inputs[number] for number in texts]}
            for number, vectors in zip(texts, self._request(read, body, len(texts))):
                found[number] = vectors
        for numbers, future in pending:
            for number, vectors in zip(numbers, future.result()):
                found[number] = vectors
        return found

    def _request(self, read: tuple, body: dict, count: int) -> list[np.ndarray]:
        """The ``count`` outputs of one request, in their inputs' order, as arrays."""
        path, key, ndim, dim = read
        answer = self._call("POST", path, body)
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != count:
            raise EndpointError(
                f"the {self.where} answered {path} with {len(data) if isinstance(data, list) else 'no'} "
                f"outputs for {count} inputs"
            )
        ordered = sorted(data, key=lambda item: item.get("index", 0) if isinstance(item, dict) else 0)
        values = [self._values(item, key) for item in ordered]
        tokens = (answer.get("usage") or {}).get("prompt_tokens") if isinstance(answer, dict) else None
        flat = dim is not None and ndim == 2 and all(found.ndim == 1 for found in values)
        if flat and isinstance(tokens, int) and tokens > 0:
            given = sum(found.size for found in values)  # tokens x width values, all of them
            if given != tokens * dim:
                raise EndpointError(
                    f"the {self.where} gave vectors of {given / tokens:g} dimensions, where it gave {dim} "
                    "before: it is serving another model"
                )
        return [self._shaped(found, ndim, dim if flat else None) for found in values]

    def _values(self, item: Any, key: str) -> np.ndarray:
        """An output's values: JSON numbers as they are, base64 little-endian float32 flattened."""
        try:
            given = item[key]
            if isinstance(given, str):
                return np.frombuffer(base64.b64decode(given), dtype="<f4").astype(np.float32)
            return np.asarray(given, dtype=np.float32)
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise EndpointError(f"the {self.where} gave an output without '{key}' vectors") from None

    def _shaped(self, vectors: np.ndarray, ndim: int, dim: int | None) -> np.ndarray:
        """``vectors`` laid out as ``(-1, dim)`` when they came flat, checked for their shape."""
        if dim is not None:
            if vectors.size % dim:
                raise EndpointError(
                    f"the {self.where} gave {vectors.size} values, not vectors of {dim} dimensions: it is "
                    "serving another model"
                )
            vectors = vectors.reshape(-1, dim)
        if vectors.ndim != ndim or vectors.shape[-1] == 0 or (ndim == 2 and vectors.shape[0] == 0):
            kind = "a list of token vectors" if ndim == 2 else "one vector"
            raise EndpointError(
                f"the {self.where} gave an output of shape {vectors.shape}, not {kind}: serve it with the "
                f"pooling runner (--runner pooling)"
            )
        return vectors

    def _call(self, method: str, path: str, body: dict | None) -> Any:
        """The JSON answer of one request, tried again on a 429, a 5xx, a timeout or a refused
        connection (``VisualEndpoint.retries``), holding one of the ``concurrency`` slots while in
        flight and none while it waits to try again."""
        httpx = self._httpx
        endpoint = self.endpoint
        url = f"{endpoint.base_url}{path}"
        for attempt in range(endpoint.retries + 1):
            wait = None
            with self._slots:
                try:
                    response = self._http.request(method, path, json=body)
                except httpx.TimeoutException:
                    failure = f"did not answer {path} within {endpoint.timeout:g} s"
                except httpx.TransportError as exc:
                    failure = f"cannot be reached ({type(exc).__name__}: {exc})"
                else:
                    status = response.status_code
                    if status < 300:
                        try:
                            return response.json()
                        except ValueError:
                            raise EndpointError(f"the {self.where} answered {path} with no JSON") from None
                    if 300 <= status < 400:
                        raise EndpointError(
                            f"the {self.where} redirects {path} to {response.headers.get('location', '?')}: "
                            "give the URL it redirects to (the key is sent to the URL given alone)"
                        )
                    message = _message(response)
                    if status not in RETRIED:
                        raise EndpointError(f"the {self.where} refused {path}: {status} {message}")
                    failure = f"answered {status} {message}"
                    wait = _retry_after(response)
            if attempt < endpoint.retries:
                backoff = min(MAX_BACKOFF, endpoint.backoff * 2**attempt) * random.uniform(0.5, 1.0)
                time.sleep(min(MAX_BACKOFF, wait) if wait is not None else backoff)
        raise EndpointError(f"the visual endpoint {url} {failure} ({endpoint.retries + 1} tries)")


def _message(response: Any) -> str:
    """vLLM's error message in ``response`` (``{"error": {"message"}}``, or ``message`` at the top
    of an older server's), else the start of its text."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:200] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):  # vLLM's answer to a missing or wrong key: {"error": "Unauthorized"}
            return error
        if body.get("message"):
            return str(body["message"])
        if body.get("detail"):
            return str(body["detail"])
    return str(body)[:200]


def _retry_after(response: Any) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number of seconds), if any."""
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None
