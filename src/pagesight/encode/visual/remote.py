"""Visual encoders that run a model's own code: published checkpoints whose modeling code ships beside
their weights (VisRAG-Ret's MiniCPM-V, jina-embeddings-v4, Nemotron ColEmbed), named by an
``auto_map`` in their config and loaded through transformers' ``AutoModel`` with
``trust_remote_code=True``.

That code runs in this process with its rights, so it runs only when the caller says so each time
(``trust_remote_code``: ``Index.open``, ``--trust-remote-code``); it is never recorded in an index,
and without it such an encoder is refused in one line naming the model and the flag. Each encoder
calls the API the model's card documents (``encode_text``/``encode_image``, ``forward_queries``/
``forward_passages``, or the forward pass and its pooling), so a page is embedded as its authors do.

``by_checkpoint`` lets one registry name serve both a published checkpoint and a transformers-native
one trained the same way (``visrag-ret``, ``jina-v4``): the checkpoint's config says which it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pagesight.encode.models import first_line, load_pretrained, remote_code_refused, require
from pagesight.encode.visual.base import TorchEncoder, VisualEncoder
from pagesight.errors import PagesightError


class RemoteCodeEncoder(TorchEncoder):
    """A model loaded with ``AutoModel`` and its own code, refused unless ``trust_remote_code``.

    Subclasses call the model's documented API in ``_embed_images`` and ``_embed_queries``; ``dim``
    is the size of what that API returns, measured on one query once loaded (the configs of these
    models name their width each in their own way). ``max_pixels`` is the largest image the model
    reads at full resolution, from its card."""

    max_pixels: ClassVar[int]

    def __init__(
        self,
        model: str | None = None,
        device: str = "auto",
        adapter: str | None = None,
        batch_size: int = 4,
        dtype: str = "auto",
        revision: str | None = None,
        trust_remote_code: bool = False,
    ):
        super().__init__(model, device, adapter, batch_size, dtype, revision)
        if not trust_remote_code:
            raise remote_code_refused(f"visual encoder '{self.name}': model", self.model_id)
        self.transformers = require("transformers", self.extra)
        self.model = self._finish_loading(
            self._remote("model", self.transformers.AutoModel, dtype=self.dtype)
        )
        self._load_more()
        try:
            with self.torch.inference_mode():
                (probe,) = self._embed_queries(["dimension"])
        except Exception as error:  # the model's own code: what it raises means it cannot encode
            raise PagesightError(
                f"visual encoder '{self.name}': model '{self.model_id}' cannot encode a query "
                f"with {self.options() or 'its defaults'}: {first_line(error)}"
            ) from None
        self.dim = int(probe.shape[-1])

    def _remote(self, what: str, auto_class: Any, **kwargs: Any) -> Any:
        """``auto_class.from_pretrained`` on this encoder's model, its own code allowed."""
        return self._from_pretrained(what, auto_class.from_pretrained, trust_remote_code=True, **kwargs)

    def _load_more(self) -> None:
        """What the model needs beside its weights to encode (VisRAG-Ret: its tokenizer)."""


def runs_own_code(model: str, revision: str | None = None) -> bool:
    """Whether the checkpoint ``model`` (hub id or folder) maps transformers' classes to code of its
    own: an ``auto_map`` in its ``config.json``, read as data (nothing of it runs)."""
    transformers = require("transformers", "visual")
    config, _ = load_pretrained(
        "config", model, transformers.PretrainedConfig.get_config_dict, revision=revision
    )
    return "auto_map" in config


def by_checkpoint(
    native: type[TorchEncoder], published: type[RemoteCodeEncoder]
) -> Callable[..., VisualEncoder]:
    """A factory giving, for the checkpoint it is asked for, ``published`` (the model's own code:
    its published checkpoint, the default) or ``native`` (a transformers-native checkpoint trained
    the same way)."""

    def factory(model: str | None = None, trust_remote_code: bool = False, **options: Any) -> VisualEncoder:
        if model is None or runs_own_code(model, options.get("revision")):
            return published(model, trust_remote_code=trust_remote_code, **options)
        return native(model, **options)

    factory.name = published.name  # what the encoders it gives are called, as a class's name says
    return factory
