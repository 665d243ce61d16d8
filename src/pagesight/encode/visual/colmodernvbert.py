"""ColModernVBERT (ModernVBERT/colmodernvbert): a SigLIP vision tower and a bidirectional ModernBERT
text encoder with a 128-dim projection per token, through colpali-engine (``ColModernVBert``, on
transformers' ``ModernVBertModel``).

Its processor is Idefics3's: pages are tiled as for ColSmol, and ``max_pixels`` bounds the longest
edge the same way. Attention is bidirectional over the real tokens with padding masked, and positions
are rotary (relative), so a padded query's vectors do not depend on its batch.
"""

from __future__ import annotations

from typing import ClassVar

from pagesight.encode.visual.colsmol import ColSmolEncoder


class ColModernVBertEncoder(ColSmolEncoder):
    """ColSmol's page handling (the same processor) on the ModernVBERT model."""

    name: ClassVar[str] = "colmodernvbert"
    default_model: ClassVar[str | None] = "ModernVBERT/colmodernvbert"
    model_class: ClassVar[str] = "ColModernVBert"
    processor_class: ClassVar[str] = "ColModernVBertProcessor"
