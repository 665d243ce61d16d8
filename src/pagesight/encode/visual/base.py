"""What every visual encoder shares: the protocol, the registry, compatibility checks, the torch
encoder's batching (the helpers that load any model are ``encode.models``).

A visual encoder turns page images and queries into vectors. Single-vector models (DSE,
Qwen3-VL-Embedding, VisRAG-Ret, jina-embeddings-v4, CLIP, SigLIP) give one array of shape ``(dim,)``
per input; late-interaction models (ColPali and its kin, Nemotron ColEmbed) give ``(n_tokens, dim)``,
scored by MaxSim. Those whose published checkpoints run their own code load through ``remote.py``.
Every vector is L2-normalised and float32, whatever dtype the model ran in.

``spec()`` describes the vector space an encoder produces; an index records it, and
``check_compatible`` refuses to search that index with an encoder of another space.

An encoder whose model takes an image and a text in one input (Qwen3-VL-Embedding's and DSE's chat
message) also embeds a question about a picture as one query, the picture with its question
(``JointQueries.encode_image_text_queries``); others embed such a picture alone
(``joint_queries`` tells which).

Heavy libraries (torch, transformers, peft, colpali-engine) are imported only when an encoder is
built, and their absence is reported with the extra to install.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from PIL import Image

from pagesight.devices import import_torch, resolve_device, resolve_dtype
from pagesight.encode.models import apply_adapter, hub_revision, load_pretrained
from pagesight.errors import PagesightError
from pagesight.registry import Registry, lent
from pagesight.spec import model_reference

if TYPE_CHECKING:
    import torch

Progress = Callable[[int], None]
"""Called after each batch with the number of inputs it encoded (a progress bar's ``advance``)."""

# The fields of a spec that define the vector space; the others (resolution, batch size) do not.
SPACE_FIELDS = ("name", "model", "adapter", "revision", "dim", "multi_vector")


@runtime_checkable
class VisualEncoder(Protocol):
    """Encodes page images, text queries and image queries into L2-normalised float32 vectors.

    ``max_pixels`` is the largest image the model looks at without downscaling (render tiles no
    larger); ``image_size`` is ``(width, height)`` when the model resizes every image to one size,
    None when its resolution is dynamic.
    """

    name: str
    multi_vector: bool
    dim: int
    max_pixels: int
    image_size: tuple[int, int] | None
    batch_size: int
    device: str

    def encode_images(
        self, images: Sequence[Image.Image], progress: Progress | None = None
    ) -> list[np.ndarray]:
        """One array per image: ``(dim,)``, or ``(n_tokens, dim)`` for a multi-vector model."""
        ...

    def encode_queries(self, texts: Sequence[str], progress: Progress | None = None) -> list[np.ndarray]:
        """One array per text query, shaped as ``encode_images``'s."""
        ...

    def encode_image_queries(
        self, images: Sequence[Image.Image], progress: Progress | None = None
    ) -> list[np.ndarray]:
        """One array per image (or image region) used as a query."""
        ...

    def spec(self) -> dict:
        """What an index records about the encoder that built it (see ``check_compatible``)."""
        ...


def joint_queries(encoder: object) -> bool:
    """Whether ``encoder`` (an encoder, or its class) embeds an image and a text together as one
    query (``encode_image_text_queries``); one that does not embeds a query image alone."""
    return hasattr(encoder, "encode_image_text_queries")


# name -> "module:factory"; modules load on first use, so heavy backends cost nothing until chosen.
# Every entry has run on a tiny random-weight model in tests/encode/visual.

ENCODERS = Registry(
    "visual encoder",
    "pagesight.encoders",
    {
        "colpali": "pagesight.encode.visual.colpali:ColPaliEncoder",
        "colqwen2": "pagesight.encode.visual.colqwen:ColQwen2Encoder",
        "colqwen2.5": "pagesight.encode.visual.colqwen:ColQwen25Encoder",
        "colqwen3": "pagesight.encode.visual.colqwen:ColQwen3Encoder",
        "colqwen3.5": "pagesight.encode.visual.colqwen:ColQwen35Encoder",
        "colsmol": "pagesight.encode.visual.colsmol:ColSmolEncoder",
        "colmodernvbert": "pagesight.encode.visual.colmodernvbert:ColModernVBertEncoder",
        "qwen3-vl-embedding": "pagesight.encode.visual.qwen3vl_embedding:Qwen3VLEmbeddingEncoder",
        "dse": "pagesight.encode.visual.dse:DSEEncoder",
        "visrag-ret": "pagesight.encode.visual.visrag:visrag_ret",
        "jina-v4": "pagesight.encode.visual.jina_v4:jina_v4",
        "nemotron-colembed": "pagesight.encode.visual.nemotron:NemotronColEmbedEncoder",
        "clip": "pagesight.encode.visual.clip:CLIPEncoder",
        "siglip": "pagesight.encode.visual.clip:SigLIPEncoder",
    },
)


def register(name: str, target: str) -> None:
    """Make a visual encoder available by name; ``target`` is ``"module:factory"``."""
    ENCODERS.register(name, target)


def make_encoder(
    name: str,
    model: str | None = None,
    device: str = "auto",
    adapter: str | None = None,
    trust_remote_code: bool = False,
    **options: Any,
) -> VisualEncoder:
    """The encoder registered as ``name``, loaded from ``model`` (a hub id or a local folder; the
    family's published checkpoint when None) on ``device``, with an optional PEFT ``adapter``.
    ``trust_remote_code`` lets an encoder that takes it run the model's own code (VisRAG-Ret,
    jina-embeddings-v4, Nemotron ColEmbed); off, such a model is refused (``remote_code_refused``).
    ``options`` go to the factory (``batch_size``, ``dtype``, ``max_pixels``, ``revision``, ...)."""
    factory = ENCODERS.load(name)
    lending = lent(factory, trust_remote_code=trust_remote_code)
    return factory(model=model, device=device, adapter=adapter, **lending, **options)


def describe_spec(spec: dict) -> str:
    """A one-line human description of an encoder spec."""
    parts = [f"model {spec.get('model')}"]
    if spec.get("adapter"):
        parts.append(f"adapter {spec['adapter']}")
    if spec.get("revision"):
        parts.append(f"revision {spec['revision']}")
    kind = "multi-vector" if spec.get("multi_vector") else "single-vector"
    parts.append(f"{kind}, dim {spec.get('dim')}")
    return f"'{spec.get('name')}' ({', '.join(parts)})"


def check_compatible(recorded_spec: dict, encoder: VisualEncoder) -> None:
    """Raise ``PagesightError`` unless ``encoder`` produces the vector space ``recorded_spec`` (the
    spec of the encoder that built an index) describes. A revision is compared only when both
    sides know theirs (a hub load records its commit; a local folder has none)."""
    check_spec(recorded_spec, encoder.spec())


def spec_differences(recorded_spec: dict, current: dict) -> list[str]:
    """The fields of the vector space in which two encoders' specs differ (none: same vectors)."""
    return [
        field
        for field in SPACE_FIELDS
        if recorded_spec.get(field) != current.get(field)
        and not (field == "revision" and (recorded_spec.get(field) is None or current.get(field) is None))
    ]


def check_spec(recorded_spec: dict, current: dict) -> None:
    """``check_compatible`` for the spec of an encoder loaded elsewhere (a Ray actor's)."""
    differs = spec_differences(recorded_spec, current)
    if differs:
        raise PagesightError(
            f"the index was built with visual encoder {describe_spec(recorded_spec)}, but this search uses "
            f"{describe_spec(current)} ({', '.join(differs)} differ): search with the recorded encoder "
            "or re-index with this one"
        )


class TorchEncoder:
    """Shared machinery of the torch backends: device and dtype, batching with progress, float32
    L2-normalised numpy output, the spec.

    Subclasses load their model in ``__init__`` (so ``dim`` is known once built) and implement
    ``_embed_queries`` and, for pages, either ``_embed_images`` or its two halves:
    ``_prepare_images`` (the processor's work on the CPU, which ingestion runs in another thread,
    ahead of the model) and ``_embed_prepared`` (the model on what it prepared); each gives one
    tensor per input (``(dim,)`` or ``(n_tokens, dim)``). ``_embed_image_queries`` defaults to
    ``_embed_images``. ``prepare_images`` and ``encode_prepared`` are those halves for one batch,
    as ingestion calls them (``ingest/feeding.py``); ``encode_images`` is both, batch after batch.
    """

    name: ClassVar[str]
    multi_vector: ClassVar[bool]
    default_model: ClassVar[str | None]
    extra: ClassVar[str] = "visual"
    # Renames applied to an adapter's weights (None: peft's default, the model's own conversion map).
    adapter_key_mapping: ClassVar[dict[str, str] | None] = None

    dim: int
    max_pixels: int
    image_size: tuple[int, int] | None = None

    def __init__(
        self,
        model: str | None,
        device: str,
        adapter: str | None,
        batch_size: int,
        dtype: str,
        revision: str | None,
    ):
        if model is None:
            if self.default_model is None:
                raise PagesightError(
                    f"visual encoder '{self.name}' needs a model: pass model=<hub id or folder>"
                )
            model = self.default_model
        if batch_size < 1:
            raise PagesightError(f"batch_size must be at least 1, got {batch_size}")
        self.torch = import_torch()
        self.model_id = model
        self.adapter = adapter
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.batch_size = batch_size
        self.revision = revision
        self.loaded_revision: str | None = None

    def _from_pretrained(self, what: str, loader: Callable[..., Any], **kwargs: Any) -> Any:
        """``loader`` applied to this encoder's model at its revision, errors made readable."""
        if self.revision is not None:
            kwargs["revision"] = self.revision
        return load_pretrained(what, self.model_id, loader, **kwargs)

    def _load_model(self, model_class: Any, **kwargs: Any) -> Any:
        """``model_class.from_pretrained`` on this encoder's model in its dtype, refused when the
        checkpoint lacks weights the class needs (they would be random), then ``_finish_loading``."""
        model, info = self._from_pretrained(
            "model", model_class.from_pretrained, dtype=self.dtype, output_loading_info=True, **kwargs
        )
        missing = sorted(info.get("missing_keys") or [])
        if missing:
            shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            raise PagesightError(
                f"cannot load the model from '{self.model_id}': it is not a {model_class.__name__} checkpoint "
                f"for visual encoder '{self.name}' (missing weights: {shown})"
            )
        return self._finish_loading(model)

    def _finish_loading(self, model: Any) -> Any:
        """``model`` with the adapter merged, on the device, in eval mode; records its revision."""
        self.loaded_revision = hub_revision(model.config)
        return apply_adapter(model, self.adapter, self.adapter_key_mapping).to(self.device).eval()

    def _to_device(self, batch: Any) -> dict:
        """Tensors of a processor's output moved to the device (from pinned memory without waiting,
        ``prepare_images``); floating ones cast to the model dtype there."""
        moved = {}
        for key, value in dict(batch).items():
            if isinstance(value, self.torch.Tensor):
                value = value.to(self.device, non_blocking=value.is_pinned())
                if value.is_floating_point():
                    value = value.to(self.dtype)
            moved[key] = value
        return moved

    def encode_images(
        self, images: Sequence[Image.Image], progress: Progress | None = None
    ) -> list[np.ndarray]:
        return self._batched(_rgb(images), self._embed_images, progress)

    def prepare_images(self, images: Sequence[Image.Image]) -> Any:
        """The CPU half of encoding one batch of page images (the processor's resizing and
        patching), safe to run in a thread of its own beside ``encode_prepared`` (not beside another
        ``prepare_images`` of this encoder: its tokenizer is not); on CUDA its tensors are in pinned
        memory, so the copy to the device does not wait for them."""
        prepared = self._prepare_images(_rgb(images))
        if self.device.startswith("cuda") and hasattr(prepared, "keys"):
            for key in list(prepared.keys()):
                if isinstance(prepared[key], self.torch.Tensor):
                    prepared[key] = prepared[key].pin_memory()
        return prepared

    def encode_prepared(self, prepared: Any) -> list[np.ndarray]:
        """The vectors of a batch ``prepare_images`` prepared: the same as ``encode_images`` gives
        for those images in one batch."""
        with self.torch.inference_mode():
            return [normalize(tensor.float().cpu().numpy()) for tensor in self._embed_prepared(prepared)]

    def encode_queries(self, texts: Sequence[str], progress: Progress | None = None) -> list[np.ndarray]:
        return self._batched(list(texts), self._embed_queries, progress)

    def encode_image_queries(
        self, images: Sequence[Image.Image], progress: Progress | None = None
    ) -> list[np.ndarray]:
        return self._batched(_rgb(images), self._embed_image_queries, progress)

    def _embed_images(self, images: list[Image.Image]) -> list[torch.Tensor]:
        if type(self)._prepare_images is TorchEncoder._prepare_images:
            raise NotImplementedError
        return self._embed_prepared(self._prepare_images(images))

    def _prepare_images(self, images: list[Image.Image]) -> Any:
        """A batch of page images as the model takes them (here: the images, for an encoder that
        implements ``_embed_images`` alone)."""
        return images

    def _embed_prepared(self, prepared: Any) -> list[torch.Tensor]:
        return self._embed_images(prepared)

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        raise NotImplementedError

    def _embed_image_queries(self, images: list[Image.Image]) -> list[torch.Tensor]:
        return self._embed_images(images)

    def _batched(
        self, items: list, embed: Callable[[list], list], progress: Progress | None
    ) -> list[np.ndarray]:
        vectors: list[np.ndarray] = []
        with self.torch.inference_mode():
            for start in range(0, len(items), self.batch_size):
                batch = items[start : start + self.batch_size]
                vectors.extend(normalize(tensor.float().cpu().numpy()) for tensor in embed(batch))
                if progress is not None:
                    progress(len(batch))
        return vectors

    def options(self) -> dict:
        """Settings that shape the vectors beyond the model (prompts, pooling); recorded in the spec."""
        return {}

    def spec(self) -> dict:
        return {
            "name": self.name,
            "model": model_reference(self.model_id),
            "adapter": model_reference(self.adapter) if self.adapter else None,
            "revision": self.loaded_revision,
            "dim": self.dim,
            "multi_vector": self.multi_vector,
            "max_pixels": self.max_pixels,
            "image_size": list(self.image_size) if self.image_size else None,
            "options": self.options(),
        }


class JointQueries:
    """For a ``TorchEncoder`` whose model takes an image and a text in one input: a question about a
    picture embedded as one query, the picture with the question (``_embed_image_text_queries``
    embeds a batch of pairs)."""

    def encode_image_text_queries(
        self, images: Sequence[Image.Image], texts: Sequence[str], progress: Progress | None = None
    ) -> list[np.ndarray]:
        """One array per image and its text, embedded together as one query."""
        if len(images) != len(texts):
            raise PagesightError(f"{len(images)} query images for {len(texts)} texts: give one text an image")
        return self._batched(list(zip(_rgb(images), texts)), self._embed_image_text_queries, progress)


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Each vector (the last axis) scaled to unit L2 norm, as float32; zero vectors stay zero."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, np.finfo(np.float32).tiny)


def _rgb(images: Sequence[Image.Image]) -> list[Image.Image]:
    """The images in RGB; those already RGB as they are (a document's tiles are not copied twice)."""
    return [image if image.mode == "RGB" else image.convert("RGB") for image in images]
