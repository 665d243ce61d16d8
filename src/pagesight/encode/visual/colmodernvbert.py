"""ColModernVBERT (ModernVBERT/colmodernvbert): a SigLIP vision tower and a bidirectional ModernBERT
text encoder with a 128-dim projection per token, through colpali-engine (``ColModernVBert``, on
transformers' ``ModernVBertModel``).

Its processor is Idefics3's: pages are tiled as for ColSmol, and ``max_pixels`` bounds the longest
edge the same way. Attention is bidirectional over the real tokens with padding masked, and positions
are rotary (relative), so a padded query's vectors do not depend on its batch.
"""

from __future__ import annotations

from typing import ClassVar

from pagesight.encode.visual.colsmol import set_longest_edge
from pagesight.encode.visual.late_interaction import LateInteractionEncoder


class ColModernVBertEncoder(LateInteractionEncoder):
    name: ClassVar[str] = "colmodernvbert"
    default_model: ClassVar[str | None] = "ModernVBERT/colmodernvbert"
    model_class: ClassVar[str] = "ColModernVBert"
    processor_class: ClassVar[str] = "ColModernVBertProcessor"

    def _configure_images(self, max_pixels: int | None) -> int:
        return set_longest_edge(self.processor.image_processor, max_pixels)
