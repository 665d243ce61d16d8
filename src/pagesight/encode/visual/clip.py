"""CLIP and SigLIP dual encoders: the projected image and text features of ``CLIPModel`` /
``SiglipModel`` (``get_image_features``, ``get_text_features``).

They resize every image to one square (224 or 384 pixels), so a page keeps little legible text;
they are the natural-image baselines of the papers and the cheapest image-to-image search for
region queries. SigLIP's text tower was trained on text padded to the full ``max_length`` (64)
without an attention mask (it pools the last position), so queries are fed that way too.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from PIL import Image

from pagesight.encode.models import require
from pagesight.encode.visual.base import TorchEncoder

if TYPE_CHECKING:
    import torch


class DualEncoder(TorchEncoder):
    """A CLIP-style model's image and text towers, each pooled to one projected vector."""

    name: ClassVar[str] = "clip"
    multi_vector: ClassVar[bool] = False
    default_model: ClassVar[str | None] = "openai/clip-vit-base-patch32"
    model_class: ClassVar[str] = "CLIPModel"
    processor_class: ClassVar[str] = "CLIPProcessor"
    text_padding: ClassVar[dict[str, Any]] = {"padding": True, "truncation": True}
    text_inputs: ClassVar[tuple[str, ...]] = ("input_ids", "attention_mask")

    def __init__(
        self,
        model: str | None = None,
        device: str = "auto",
        adapter: str | None = None,
        batch_size: int = 16,
        dtype: str = "auto",
        revision: str | None = None,
    ):
        super().__init__(model, device, adapter, batch_size, dtype, revision)
        transformers = require("transformers", self.extra)
        self.processor = self._from_pretrained(
            "processor", getattr(transformers, self.processor_class).from_pretrained
        )
        self.model = self._load_model(getattr(transformers, self.model_class))
        config = self.model.config
        # CLIP projects both towers to projection_dim; SigLIP's towers share the text width instead.
        self.dim = int(getattr(config, "projection_dim", None) or config.text_config.hidden_size)
        side = int(config.vision_config.image_size)
        self.image_size = (side, side)
        self.max_pixels = side * side

    def _prepare_images(self, images: list[Image.Image]) -> Any:
        return self.processor.image_processor(images=images, return_tensors="pt")

    def _embed_prepared(self, prepared: Any) -> list[torch.Tensor]:
        pixels = self._to_device(prepared)
        return list(self.model.get_image_features(pixel_values=pixels["pixel_values"]).pooler_output)

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        tokens = self._to_device(self.processor.tokenizer(texts, return_tensors="pt", **self.text_padding))
        tokens = {name: tokens[name] for name in self.text_inputs}
        return list(self.model.get_text_features(**tokens).pooler_output)


class CLIPEncoder(DualEncoder):
    """CLIP: its image vector is the projection of its class token, so its patches, projected
    alike, are in the same space (similarity maps)."""

    def patch_similarity(self, image: Image.Image, query: str) -> np.ndarray:
        """Each patch's similarity to the query's vector (``search.explain``): the vision tower's
        patch states through the same final norm and projection as its class token, whose
        projection is the image's vector, as a (rows, columns) grid over ``patch_box``."""
        pixels = self._to_device(
            self.processor.image_processor(images=[image.convert("RGB")], return_tensors="pt")
        )
        with self.torch.inference_mode():
            states = self.model.vision_model(pixel_values=pixels["pixel_values"]).last_hidden_state[0, 1:]
            patches = self.model.visual_projection(self.model.vision_model.post_layernorm(states))
        patches = patches.float().cpu().numpy()
        patches /= np.maximum(np.linalg.norm(patches, axis=1, keepdims=True), 1e-12)
        side = math.isqrt(len(patches))
        (vector,) = self.encode_queries([query])
        return (patches @ vector).reshape(side, side)

    def patch_box(self, image: Image.Image) -> tuple[float, float, float, float]:
        """The part of ``image`` the patches cover: the square the processor crops from its centre
        after scaling its shortest side to the crop's."""
        processor = self.processor.image_processor
        width, height = image.size
        if not getattr(processor, "do_center_crop", False):
            return (0.0, 0.0, float(width), float(height))
        crop = processor.crop_size
        shortest = (
            (processor.size or {}).get("shortest_edge") if getattr(processor, "do_resize", True) else None
        )
        scale = shortest / min(width, height) if shortest else 1.0
        crop_width, crop_height = crop["width"] / scale, crop["height"] / scale
        left, top = (width - crop_width) / 2, (height - crop_height) / 2
        return (max(0.0, left), max(0.0, top), min(width, left + crop_width), min(height, top + crop_height))


class SigLIPEncoder(DualEncoder):
    """SigLIP pools its patches through an attention head, not the projection of one token: its
    patches are not in the space of its vectors, so it draws no similarity maps."""

    name: ClassVar[str] = "siglip"
    default_model: ClassVar[str | None] = "google/siglip-so400m-patch14-384"
    model_class: ClassVar[str] = "SiglipModel"
    processor_class: ClassVar[str] = "SiglipProcessor"
    text_padding: ClassVar[dict[str, Any]] = {"padding": "max_length", "max_length": 64, "truncation": True}
    text_inputs: ClassVar[tuple[str, ...]] = ("input_ids",)  # trained without an attention mask
