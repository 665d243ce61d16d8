"""DSE, Document Screenshot Embedding (Tevatron's MrLight/dse-qwen2-2b-mrl-v1): a Qwen2-VL whose
last token's final hidden state is the embedding.

Prompts follow the model card: a page is the image followed by "What is shown in this image?", a
query is "Query: <text>" after a black dummy image resized to 56x56 pixels (four vision tokens; the
model was trained with it there), both in Qwen2-VL's chat format with the generation cue and a
closing ``<|endoftext|>``, whose hidden state is taken. An image used as a query is embedded as a
page; a question about a picture is the query prompt with the picture in the dummy's place
(``encode_image_text_queries``). The model was trained with Matryoshka losses, so ``truncate_dim`` (e.g. 1024) is meaningful.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from PIL import Image

from pagesight.encode.visual.base import JointQueries
from pagesight.encode.visual.qwen_vl import IMAGE, QwenVLEmbedder, chat

if TYPE_CHECKING:
    import torch

SYSTEM = "You are a helpful assistant."  # Qwen2-VL's chat template adds it when none is given
PAGE_PROMPT = chat(f"{IMAGE}What is shown in this image?", SYSTEM) + "<|endoftext|>"
QUERY_PROMPT = chat(IMAGE + "Query: {query}", SYSTEM) + "<|endoftext|>"
DUMMY_SIDE = 56  # the blank image a text query carries, as DSE was trained


class DSEEncoder(JointQueries, QwenVLEmbedder):
    name: ClassVar[str] = "dse"
    default_model: ClassVar[str | None] = "MrLight/dse-qwen2-2b-mrl-v1"

    def _page_prompts(self, count: int) -> list[str]:
        return [PAGE_PROMPT] * count

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        dummies = [Image.new("RGB", (DUMMY_SIDE, DUMMY_SIDE)) for _ in texts]
        prompts = [QUERY_PROMPT.format(query=text) for text in texts]
        size = {"shortest_edge": DUMMY_SIDE**2, "longest_edge": DUMMY_SIDE**2}
        return self._pooled(prompts, dummies, size=size)

    def _embed_image_text_queries(self, pairs: list[tuple[Image.Image, str]]) -> list[torch.Tensor]:
        prompts = [QUERY_PROMPT.format(query=text) for _, text in pairs]
        return self._pooled(prompts, [image for image, _ in pairs])
