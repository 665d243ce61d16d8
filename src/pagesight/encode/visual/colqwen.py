"""ColQwen2 and ColQwen2.5 (vidore/colqwen2-v1.0, vidore/colqwen2.5-v0.2): Qwen2-VL / Qwen2.5-VL
with a 128-dim projection per token, through colpali-engine.

Images keep their aspect ratio and are resized to at most ``max_pixels`` (multiples of 28 pixels);
each 28x28 block becomes one vector.
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
