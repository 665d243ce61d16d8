"""The ColQwen family through colpali-engine: a Qwen vision-language backbone with a projection per
token, each vector L2-normalised, padding dropped.

- ColQwen2 and ColQwen2.5 (vidore/colqwen2-v1.0, vidore/colqwen2.5-v0.2): Qwen2-VL / Qwen2.5-VL, 128
  dimensions; images resized to at most ``max_pixels`` in multiples of 28 pixels, each 28x28 block
  one vector.
- ColQwen3 (TomoroAI/tomoro-colqwen3-embed-4b, -8b): Qwen3-VL, 320 dimensions; ColQwen3.5
  (athrael-soju/colqwen3.5-4.5B-v3, vultr/VultronRetrieverPrime-Qwen3.5-8B): Qwen3.5, the hybrid of
  Gated DeltaNet and full attention, its width from the checkpoint's ``dim`` (320 for both). Blocks
  of 32x32 pixels (16-pixel patches merged 2x2), one vector each.

Every family's prompts are its colpali-engine processor's, the ones it was trained with: a page is
``<|im_start|>user\n<image>Describe the image.<|im_end|><|endoftext|>``, a query its text followed by
ten ``<|endoftext|>`` (the query augmentation tokens). colpali-engine 0.3.14 added ColQwen3, 0.3.18
ColQwen3.5; transformers 5 holds both backbones (``qwen3_vl``, ``qwen3_5``).
"""

from __future__ import annotations

from typing import ClassVar

from PIL import Image

from pagesight.encode.visual.late_interaction import LateInteractionEncoder
from pagesight.encode.visual.processors import set_pixel_budget


class ColQwen2Encoder(LateInteractionEncoder):
    name: ClassVar[str] = "colqwen2"
    default_model: ClassVar[str | None] = "vidore/colqwen2-v1.0"
    model_class: ClassVar[str] = "ColQwen2"
    processor_class: ClassVar[str] = "ColQwen2Processor"

    def _configure_images(self, max_pixels: int | None) -> int:
        return set_pixel_budget(self.processor.image_processor, None, max_pixels)

    def _patch_grid(self, image: Image.Image) -> tuple[int, int]:
        return self.processor.get_n_patches(image.size, spatial_merge_size=self.model.spatial_merge_size)


class ColQwen25Encoder(ColQwen2Encoder):
    name: ClassVar[str] = "colqwen2.5"
    default_model: ClassVar[str | None] = "vidore/colqwen2.5-v0.2"
    model_class: ClassVar[str] = "ColQwen2_5"
    processor_class: ClassVar[str] = "ColQwen2_5_Processor"


class ColQwen3Encoder(ColQwen2Encoder):
    name: ClassVar[str] = "colqwen3"
    default_model: ClassVar[str | None] = "TomoroAI/tomoro-colqwen3-embed-4b"
    model_class: ClassVar[str] = "ColQwen3"
    processor_class: ClassVar[str] = "ColQwen3Processor"
    backbone: ClassVar[str | None] = "qwen3_vl"


class ColQwen35Encoder(ColQwen2Encoder):
    name: ClassVar[str] = "colqwen3.5"
    default_model: ClassVar[str | None] = "athrael-soju/colqwen3.5-4.5B-v3"
    model_class: ClassVar[str] = "ColQwen3_5"
    processor_class: ClassVar[str] = "ColQwen3_5Processor"
    backbone: ClassVar[str | None] = "qwen3_5"
