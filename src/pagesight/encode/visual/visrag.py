"""VisRAG-Ret's retrieval recipe over a transformers-native Qwen2-VL backbone.

The published VisRAG-Ret (openbmb/VisRAG-Ret) is MiniCPM-V 2.0 (SigLIP + MiniCPM-2B) loaded as
remote code, which cannot be checked here and is not loaded. What makes VisRAG-Ret a retriever is
kept exactly, on a Qwen2-VL: a page is the image alone, a query is "Represent this query for
retrieving relevant documents: <text>", and the embedding is the position-weighted mean of the
last hidden states (the i-th token weighs i, the paper's pooling for a causal model, see
``pooling.position_weighted_mean_pool``). Load any Qwen2-VL checkpoint trained this way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from PIL import Image

from pagesight.encode.visual.pooling import position_weighted_mean_pool
from pagesight.encode.visual.qwen_vl import IMAGE, QwenVLEmbedder

if TYPE_CHECKING:
    import torch

QUERY_INSTRUCTION = "Represent this query for retrieving relevant documents: "


class VisRAGRetEncoder(QwenVLEmbedder):
    name: ClassVar[str] = "visrag-ret"
    default_model: ClassVar[str | None] = None  # the published checkpoint is MiniCPM-V remote code

    pool: ClassVar[Callable] = staticmethod(position_weighted_mean_pool)

    def _embed_images(self, images: list[Image.Image]) -> list[torch.Tensor]:
        return self._pooled([IMAGE] * len(images), images)

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        return self._pooled([QUERY_INSTRUCTION + text for text in texts])
