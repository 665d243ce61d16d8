"""Where a model behind an inference server is reached, and the key sent there: what the readers'
endpoint (``answer.endpoint``) and the visual encoder's (``VisualEndpoint``) share, read once by
whoever opens the index (the command line, the library, a server at start), never by a request.

A visual encoder's endpoint is a vLLM server (or a router in front of several) that runs the
encoder's model: vLLM's pooling API for late-interaction models, its embeddings API for
single-vector ones (``encode.visual.served``). It is not an index setting: an index records the
encoder that made its vectors (its name, model and width), and is searched with that model
in-process or through an endpoint alike. The key goes to the endpoint's URL and nowhere else: no
redirect is followed (``encode.vllm``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pagesight.errors import PagesightError

VISUAL_KEY_ENV = "PAGESIGHT_VISUAL_API_KEY"
CONCURRENCY = 8  # requests in flight to a visual endpoint from one process
TIMEOUT = 120.0  # seconds a request may take (a page of a large model on a busy server)
RETRIES = 5  # tries again after a 429, a 5xx, a timeout or a refused connection
BACKOFF = 0.5  # seconds before the first retry, doubled each time (with jitter), at most MAX_BACKOFF
MAX_BACKOFF = 20.0


def first_set(names: Iterable[str], environ: Mapping[str, str] | None = None) -> str | None:
    """The value of the first of ``names`` set (and not empty) in the environment."""
    environ = os.environ if environ is None else environ
    return next((environ[name] for name in names if environ.get(name)), None)


def read_key_file(path: str | os.PathLike) -> str:
    """The key held in the file ``path`` (its first line, spaces around it dropped); a missing,
    unreadable or empty file is an error naming it."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise PagesightError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
    key = lines[0].strip() if lines else ""
    if not key:
        raise PagesightError(f"the key file {path} is empty")
    return key


@dataclass(frozen=True)
class VisualEndpoint:
    """A server running the index's visual encoder: ``base_url``, its root (``http://host:8000``,
    or a router's prefix; a trailing ``/v1`` is dropped, as vLLM's pooling API is beside it, not
    under it); ``api_key``, sent as a bearer token to that URL alone (None: none sent; never in a
    repr); ``concurrency``, the requests in flight at once from this process (more wait for a
    free one); ``timeout``, seconds a request may take; ``retries`` and ``backoff``, how often and
    after how long a 429, a 5xx, a timeout or a refused connection is tried again; ``max_pixels``,
    the pixel budget of the server's image processor (vLLM's ``--mm-processor-kwargs
    '{"max_pixels": N}'``, else the checkpoint's ``preprocessor_config.json``): pages are resized
    to it here as that processor resizes them, so the server decodes no more pixels than its model
    reads and resizes none (None: pages over ``served.MAX_PIXELS`` are shrunk, the server resizes)."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    concurrency: int = CONCURRENCY
    timeout: float = TIMEOUT
    retries: int = RETRIES
    backoff: float = BACKOFF
    max_pixels: int | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PagesightError(
                f"visual endpoint '{self.base_url}': give the server's URL, http://HOST:PORT or https://..."
            )
        if parts.username or parts.password or parts.query or parts.fragment:
            raise PagesightError(
                "visual endpoint: give the URL alone, without user, query or fragment (the key goes in "
                f"--visual-endpoint-key-file or ${VISUAL_KEY_ENV})"
            )
        if self.concurrency < 1 or self.timeout <= 0 or self.retries < 0 or self.backoff < 0:
            raise PagesightError(
                "visual endpoint: concurrency must be at least 1, timeout positive, retries and backoff "
                "not negative"
            )
        if self.max_pixels is not None and self.max_pixels < 1024:
            raise PagesightError(
                f"visual endpoint: max_pixels is the server processor's pixel budget, at least 1024, got "
                f"{self.max_pixels}"
            )
        root = self.base_url.rstrip("/")
        object.__setattr__(self, "base_url", root[: -len("/v1")] if root.endswith("/v1") else root)

    @classmethod
    def given(
        cls,
        url: str | None,
        key_file: str | os.PathLike | None = None,
        environ: Mapping[str, str] | None = None,
        **limits,
    ) -> VisualEndpoint | None:
        """The endpoint at ``url`` (None: none, the encoder runs in-process), its key read from
        ``key_file`` or else ``$PAGESIGHT_VISUAL_API_KEY``, once, when the index is opened."""
        if url is None:
            if key_file is not None:
                raise PagesightError("--visual-endpoint-key-file needs --visual-endpoint URL")
            return None
        key = read_key_file(key_file) if key_file is not None else first_set([VISUAL_KEY_ENV], environ)
        return cls(url, api_key=key, **limits)
