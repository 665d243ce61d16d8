"""Qwen3-VL-Embedding (Qwen/Qwen3-VL-Embedding-2B, -8B), the retriever PixelRAG fine-tunes (with a
LoRA adapter: pass ``adapter=``): a Qwen3-VL whose last token's final hidden state is the embedding.

Every input is one chat turn: a system message carrying the instruction, the user message holding
the image and/or text, and the assistant cue, whose last token is pooled. Pages use the model's
default instruction; text queries, image queries and a question with its picture (one user message,
the image then the text: ``encode_image_text_queries``) use the retrieval instruction of its
examples. Both are options, recorded in the spec.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from PIL import Image

from pagesight.encode.visual.base import JointQueries
from pagesight.encode.visual.qwen_vl import IMAGE, QwenVLEmbedder, chat

if TYPE_CHECKING:
    import torch

PAGE_INSTRUCTION = "Represent the user's input."
QUERY_INSTRUCTION = "Retrieve images or text relevant to the user's query."


class Qwen3VLEmbeddingEncoder(JointQueries, QwenVLEmbedder):
    name: ClassVar[str] = "qwen3-vl-embedding"
    default_model: ClassVar[str | None] = "Qwen/Qwen3-VL-Embedding-2B"
    backbone_class: ClassVar[str] = "Qwen3VLModel"
    processor_class: ClassVar[str] = "Qwen3VLProcessor"

    def __init__(
        self,
        model: str | None = None,
        page_instruction: str = PAGE_INSTRUCTION,
        query_instruction: str = QUERY_INSTRUCTION,
        **options: Any,
    ):
        super().__init__(model, **options)
        self.page_instruction = page_instruction
        self.query_instruction = query_instruction

    def _page_prompts(self, count: int) -> list[str]:
        return [chat(IMAGE, self.page_instruction)] * count

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        return self._pooled([chat(text, self.query_instruction) for text in texts])

    def _embed_image_queries(self, images: list[Image.Image]) -> list[torch.Tensor]:
        return self._pooled([chat(IMAGE, self.query_instruction)] * len(images), images)

    def _embed_image_text_queries(self, pairs: list[tuple[Image.Image, str]]) -> list[torch.Tensor]:
        prompts = [chat(IMAGE + text, self.query_instruction) for _, text in pairs]
        return self._pooled(prompts, [image for image, _ in pairs])

    def options(self) -> dict:
        return {
            **super().options(),
            "page_instruction": self.page_instruction,
            "query_instruction": self.query_instruction,
        }
