"""jina-embeddings-v4's single-vector retrieval.

The published checkpoint (jinaai/jina-embeddings-v4, the default) is a Qwen2.5-VL-3B with task
LoRA adapters and a multi-vector head, in its own code: ``JinaV4RemoteEncoder`` calls the API of its
model card, ``encode_image(images, task="retrieval")`` for pages and image queries and
``encode_text(texts, task="retrieval", prompt_name="query")`` for queries, which needs
``trust_remote_code``. ``JinaV4Encoder`` reproduces that single-vector path on a transformers-native
``Qwen2_5_VLModel`` (the retrieval adapter merged, or given as ``adapter=``): a page is "Describe the
image." after the image in the chat format, pooled by the mean of the hidden states from
``<|vision_start|>`` to ``<|vision_end|>``; a query is "Query: <text>", pooled by the mean over all
its tokens. ``jina_v4`` picks the one a checkpoint is (``remote.by_checkpoint``). The model was
trained with Matryoshka losses (128 to 2048 dimensions): see ``truncate_dim``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from PIL import Image

from pagesight.encode.visual.pooling import mean_pool, span_mask
from pagesight.encode.visual.qwen_vl import IMAGE, QwenVLEmbedder, chat
from pagesight.encode.visual.remote import RemoteCodeEncoder, by_checkpoint

if TYPE_CHECKING:
    import torch

PAGE_PROMPT = chat(f"{IMAGE}Describe the image.", generation_prompt=False)
QUERY_PREFIX = "Query: "
TASK = "retrieval"  # the adapter the published model applies for query-to-page search


class JinaV4Encoder(QwenVLEmbedder):
    """jina-embeddings-v4's single-vector path over a Qwen2.5-VL checkpoint."""

    name: ClassVar[str] = "jina-v4"
    default_model: ClassVar[str | None] = None  # the published checkpoint is JinaV4RemoteEncoder's
    backbone_class: ClassVar[str] = "Qwen2_5_VLModel"
    processor_class: ClassVar[str] = "Qwen2_5_VLProcessor"

    def _page_prompts(self, count: int) -> list[str]:
        return [PAGE_PROMPT] * count

    def _page_vectors(self, hidden: torch.Tensor, batch: dict) -> list[torch.Tensor]:
        config = self.model.config
        mask = span_mask(batch["input_ids"], config.vision_start_token_id, config.vision_end_token_id)
        return self._vectors(mean_pool(hidden, mask))

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        hidden, batch = self._forward([QUERY_PREFIX + text for text in texts])
        return self._vectors(mean_pool(hidden, batch["attention_mask"]))


class JinaV4RemoteEncoder(RemoteCodeEncoder):
    """jinaai/jina-embeddings-v4 through its own code, its retrieval adapter, single vectors of
    ``truncate_dim`` dimensions (one of the model's Matryoshka sizes; None: all 2048)."""

    name: ClassVar[str] = "jina-v4"
    default_model: ClassVar[str | None] = "jinaai/jina-embeddings-v4"
    multi_vector: ClassVar[bool] = False
    max_pixels: ClassVar[int] = 768 * 28 * 28  # its image processor's budget: 768 patches of 28 px

    def __init__(self, model: str | None = None, truncate_dim: int | None = None, **options: Any):
        self.truncate_dim = truncate_dim  # before loading: the width is measured on a query
        super().__init__(model, **options)

    def _embed_images(self, images: list[Image.Image]) -> list[torch.Tensor]:
        return self.model.encode_image(
            images=images, task=TASK, batch_size=len(images), truncate_dim=self.truncate_dim
        )

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        return self.model.encode_text(
            texts=texts, task=TASK, prompt_name="query", batch_size=len(texts), truncate_dim=self.truncate_dim
        )

    def options(self) -> dict:
        return {"truncate_dim": self.truncate_dim} if self.truncate_dim else {}


jina_v4 = by_checkpoint(JinaV4Encoder, JinaV4RemoteEncoder)
