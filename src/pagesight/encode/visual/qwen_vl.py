"""Single-vector embedders over a transformers-native Qwen-VL backbone (Qwen2-VL, Qwen2.5-VL, Qwen3-VL).

DSE, Qwen3-VL-Embedding, VisRAG-Ret (as built here) and jina-embeddings-v4 share this machinery and
differ only in their prompts and their pooling. The backbone is the bare ``Qwen*VLModel`` (no LM
head): its ``last_hidden_state`` is the final, normed hidden state that each family pools. The
prompts are written out in the Qwen chat format, character for character what the models' chat
templates produce, so a checkpoint without a chat template embeds the same way.

Images keep their aspect ratio and are resized within ``[min_pixels, max_pixels]`` (multiples of
28 pixels, 32 for Qwen3-VL); each such block is one vision token. ``truncate_dim`` keeps the first
dimensions of the pooled vector before normalising (Matryoshka-trained models: DSE, jina-v4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from PIL import Image

from pagesight.encode.models import require
from pagesight.encode.visual.base import TorchEncoder
from pagesight.encode.visual.pooling import last_token_pool
from pagesight.encode.visual.processors import image_only, set_pixel_budget
from pagesight.errors import PagesightError

if TYPE_CHECKING:
    import torch

IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"


def chat(user: str, system: str | None = None, generation_prompt: bool = True) -> str:
    """One Qwen chat turn: an optional system message, the user message, the assistant's cue."""
    text = f"<|im_start|>system\n{system}<|im_end|>\n" if system is not None else ""
    text += f"<|im_start|>user\n{user}<|im_end|>\n"
    return text + ("<|im_start|>assistant\n" if generation_prompt else "")


class QwenVLEmbedder(TorchEncoder):
    """Loads a Qwen-VL backbone and processor; subclasses build prompts and pool hidden states."""

    multi_vector: ClassVar[bool] = False
    backbone_class: ClassVar[str] = "Qwen2VLModel"
    processor_class: ClassVar[str] = "Qwen2VLProcessor"
    # Adapters are usually trained on the *ForConditionalGeneration model, which nests this backbone
    # as ``model``; an adapter trained on the bare backbone has no such prefix and is left as is.
    adapter_key_mapping: ClassVar[dict[str, str] | None] = {r"^model\.": ""}
    pool: ClassVar[Callable] = staticmethod(last_token_pool)  # hidden states, mask -> vectors

    def __init__(
        self,
        model: str | None = None,
        device: str = "auto",
        adapter: str | None = None,
        batch_size: int = 4,
        dtype: str = "auto",
        revision: str | None = None,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        truncate_dim: int | None = None,
    ):
        super().__init__(model, device, adapter, batch_size, dtype, revision)
        transformers = require("transformers", self.extra)
        processor_class = image_only(getattr(transformers, self.processor_class))
        self.processor = self._from_pretrained("processor", processor_class.from_pretrained)
        self.processor.tokenizer.padding_side = "left"
        self.max_pixels = set_pixel_budget(self.processor.image_processor, min_pixels, max_pixels)
        self.model = self._load_model(getattr(transformers, self.backbone_class))
        hidden_size = int(self.model.config.text_config.hidden_size)
        if truncate_dim is not None and not 1 <= truncate_dim <= hidden_size:
            raise PagesightError(f"truncate_dim must be between 1 and {hidden_size} for '{self.model_id}'")
        self.truncate_dim = truncate_dim
        self.dim = truncate_dim or hidden_size

    def _inputs(self, texts: list[str], images: list[Image.Image] | None = None, **images_kwargs: Any):
        """The processor's inputs for ``texts`` (and ``images``), on the CPU."""
        return self.processor(
            text=texts, images=images or None, padding=True, return_tensors="pt", **images_kwargs
        )

    def _run(self, inputs: Any):
        """The backbone's last hidden states ``(batch, seq, hidden)`` and the model inputs on its device."""
        batch = self._to_device(inputs)
        return self.model(**batch).last_hidden_state, batch

    def _forward(self, texts: list[str], images: list[Image.Image] | None = None, **images_kwargs: Any):
        """The backbone's last hidden states ``(batch, seq, hidden)`` and the model inputs."""
        return self._run(self._inputs(texts, images, **images_kwargs))

    def _page_prompts(self, count: int) -> list[str]:
        """The prompts of ``count`` pages, each holding its image."""
        raise NotImplementedError

    def _page_vectors(self, hidden: torch.Tensor, batch: dict) -> list[torch.Tensor]:
        """The pages' vectors from their hidden states (by default ``pool``'s)."""
        return self._vectors(self.pool(hidden, batch["attention_mask"]))

    def _prepare_images(self, images: list[Image.Image]) -> Any:
        return self._inputs(self._page_prompts(len(images)), images)

    def _embed_prepared(self, prepared: Any) -> list[torch.Tensor]:
        return self._page_vectors(*self._run(prepared))

    def _pooled(
        self, prompts: list[str], images: list[Image.Image] | None = None, **images_kwargs: Any
    ) -> list[torch.Tensor]:
        """One vector per prompt: the last hidden states pooled by ``pool``."""
        hidden, batch = self._forward(prompts, images, **images_kwargs)
        return self._vectors(self.pool(hidden, batch["attention_mask"]))

    def _vectors(self, pooled: torch.Tensor) -> list[torch.Tensor]:
        """One vector per row of ``pooled``, truncated to ``truncate_dim`` (normalised later)."""
        if self.truncate_dim is not None:
            pooled = pooled[:, : self.truncate_dim]
        return list(pooled)

    def options(self) -> dict:
        return {"truncate_dim": self.truncate_dim} if self.truncate_dim else {}
