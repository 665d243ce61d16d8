"""jina-embeddings-v4's single-vector retrieval over a transformers-native Qwen2.5-VL backbone.

The published jinaai/jina-embeddings-v4 is remote code: a Qwen2.5-VL-3B with task LoRA adapters
(retrieval, text-matching, code) and a multi-vector head. Its single-vector path is reproduced
here on ``Qwen2_5_VLModel``: a page is "Describe the image." after the image in the chat format,
pooled by the mean of the hidden states from ``<|vision_start|>`` to ``<|vision_end|>``; a query is
"Query: <text>", pooled by the mean over all its tokens. Load a Qwen2.5-VL checkpoint with the
retrieval adapter merged, or the base weights with ``adapter=`` pointing at the retrieval LoRA.
The model was trained with Matryoshka losses (128 to 2048 dimensions): see ``truncate_dim``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from PIL import Image

from pagesight.encode.visual.pooling import mean_pool, span_mask
from pagesight.encode.visual.qwen_vl import IMAGE, QwenVLEmbedder, chat

if TYPE_CHECKING:
    import torch

PAGE_PROMPT = chat(f"{IMAGE}Describe the image.", generation_prompt=False)
QUERY_PREFIX = "Query: "


class JinaV4Encoder(QwenVLEmbedder):
    name: ClassVar[str] = "jina-v4"
    default_model: ClassVar[str | None] = None  # the published checkpoint is remote code
    backbone_class: ClassVar[str] = "Qwen2_5_VLModel"
    processor_class: ClassVar[str] = "Qwen2_5_VLProcessor"

    def _embed_images(self, images: list[Image.Image]) -> list[torch.Tensor]:
        hidden, batch = self._forward([PAGE_PROMPT] * len(images), images)
        config = self.model.config
        mask = span_mask(batch["input_ids"], config.vision_start_token_id, config.vision_end_token_id)
        return self._vectors(mean_pool(hidden, mask))

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        hidden, batch = self._forward([QUERY_PREFIX + text for text in texts])
        return self._vectors(mean_pool(hidden, batch["attention_mask"]))
