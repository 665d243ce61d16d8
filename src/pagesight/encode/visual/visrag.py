"""VisRAG-Ret: a page is the image alone, a query is "Represent this query for retrieving relevant
documents: <text>", and the embedding is the position-weighted mean of the last hidden states (the
i-th token weighs i, the paper's pooling for a causal model, ``pooling.position_weighted_mean_pool``).

The published checkpoint (openbmb/VisRAG-Ret, the default) is MiniCPM-V 2.0 (SigLIP + MiniCPM-2B)
with its own code: ``VisRAGRetRemoteEncoder`` calls its forward pass as the model card does
(``model(text=..., image=..., tokenizer=...)``, giving the hidden states and their attention mask)
and pools them, which needs ``trust_remote_code``. ``VisRAGRetEncoder`` is the same recipe over a
transformers-native Qwen2-VL, for a Qwen2-VL checkpoint trained this way; ``visrag_ret`` picks the
one a checkpoint is (``remote.by_checkpoint``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from PIL import Image

from pagesight.encode.visual.pooling import position_weighted_mean_pool
from pagesight.encode.visual.qwen_vl import IMAGE, QwenVLEmbedder
from pagesight.encode.visual.remote import RemoteCodeEncoder, by_checkpoint

if TYPE_CHECKING:
    import torch

QUERY_INSTRUCTION = "Represent this query for retrieving relevant documents: "


class VisRAGRetEncoder(QwenVLEmbedder):
    """VisRAG-Ret's recipe over a Qwen2-VL checkpoint."""

    name: ClassVar[str] = "visrag-ret"
    default_model: ClassVar[str | None] = None  # the published checkpoint is VisRAGRetRemoteEncoder's

    pool: ClassVar[Callable] = staticmethod(position_weighted_mean_pool)

    def _page_prompts(self, count: int) -> list[str]:
        return [IMAGE] * count

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        return self._pooled([QUERY_INSTRUCTION + text for text in texts])


class VisRAGRetRemoteEncoder(RemoteCodeEncoder):
    """openbmb/VisRAG-Ret through its own code: a page is the image with empty text, a query the
    instruction and its text with no image."""

    name: ClassVar[str] = "visrag-ret"
    default_model: ClassVar[str | None] = "openbmb/VisRAG-Ret"
    multi_vector: ClassVar[bool] = False
    max_pixels: ClassVar[int] = 1344 * 1344  # MiniCPM-V 2.0 slices images of up to 1.8 Mpx

    def _load_more(self) -> None:
        self.tokenizer = self._remote("tokenizer", self.transformers.AutoTokenizer)

    def _embed_images(self, images: list[Image.Image]) -> list[torch.Tensor]:
        return self._pooled([""] * len(images), images)

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        return self._pooled([QUERY_INSTRUCTION + text for text in texts], [None] * len(texts))

    def _pooled(self, texts: list[str], images: list[Image.Image | None]) -> list[torch.Tensor]:
        output = self.model(text=texts, image=images, tokenizer=self.tokenizer)
        return list(position_weighted_mean_pool(output.last_hidden_state, output.attention_mask))


visrag_ret = by_checkpoint(VisRAGRetEncoder, VisRAGRetRemoteEncoder)
