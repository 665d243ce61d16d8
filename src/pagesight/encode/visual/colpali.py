"""ColPali (vidore/colpali-v1.3): PaliGemma with a 128-dim projection per token, through colpali-engine.

Every page is resized to one square (448 pixels for the published checkpoints); each 14x14 patch
becomes one vector, followed by the vectors of the short text prompt.

Attention. ColPali was trained with PaliGemma attending bidirectionally over the whole input
(transformers 4.4x built a full, padding-masked mask whenever no ``labels`` were given), for pages and
queries alike. transformers 5 expresses that prefix-LM attention through ``token_type_ids`` (0 marks the
prefix); colpali-engine's ``process_queries`` returns none, and then PaliGemma's mask is inconsistent:
its Gemma layers are marked non-causal (``use_bidirectional_attention``), so under SDPA an unpadded input
(no mask built) attends bidirectionally while a padded batch gets a causal mask, and a query's vectors
depend on what it is batched with. The encoder therefore passes ``token_type_ids`` of zeros for every
input: every real token is in the prefix, attention is bidirectional over the real tokens with padding
masked, the same under eager and SDPA attention and whatever the batch.

LM head. The checkpoints omit PaliGemma's LM head (it is tied to the token embeddings), and
``ColPali.from_pretrained`` leaves it on the meta device (``ColPali.tie_weights`` ties only the
nested language model); the encoder ties it through ``PaliGemmaForConditionalGeneration.tie_weights``.
The LM head's logits are never used, so only one position's are computed (``logits_to_keep=1``)
instead of a vocabulary-wide row per token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from PIL import Image

from pagesight.encode.visual.late_interaction import LateInteractionEncoder
from pagesight.errors import PagesightError

if TYPE_CHECKING:
    import torch


class ColPaliEncoder(LateInteractionEncoder):
    name: ClassVar[str] = "colpali"
    default_model: ClassVar[str | None] = "vidore/colpali-v1.3"
    model_class: ClassVar[str] = "ColPali"
    processor_class: ClassVar[str] = "ColPaliProcessor"

    def _configure_images(self, max_pixels: int | None) -> int:
        size = self.processor.image_processor.size
        self.image_size = (int(size["width"]), int(size["height"]))
        pixels = self.image_size[0] * self.image_size[1]
        if max_pixels is not None and max_pixels != pixels:
            raise PagesightError(
                f"visual encoder '{self.name}' resizes every image to {self.image_size[0]}x{self.image_size[1]} "
                f"pixels ({pixels}); max_pixels={max_pixels} cannot change that"
            )
        return pixels

    def _patch_grid(self, image: Image.Image) -> tuple[int, int]:
        # the config's: ColPali.patch_size reads a vision tower transformers 5 has moved
        return self.processor.get_n_patches(image.size, patch_size=self.model.config.vision_config.patch_size)

    def _finish_loading(self, model: Any) -> Any:
        model.model.tie_weights()  # the LM head (tied to the embeddings) is left on the meta device
        if model.model.lm_head.weight.is_meta:
            raise PagesightError(
                f"cannot load the model from '{self.model_id}': its LM head is neither stored nor tied to "
                "the token embeddings"
            )
        return super()._finish_loading(model)

    def _embed(self, batch: Any) -> list[torch.Tensor]:
        batch = {key: value for key, value in dict(batch).items() if key != "labels"}
        # Every real token in PaliGemma's bidirectional prefix, as ColPali was trained (module docstring).
        batch["token_type_ids"] = self.torch.zeros_like(batch["input_ids"])
        batch["logits_to_keep"] = 1
        return super()._embed(batch)
