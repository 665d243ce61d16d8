"""Nemotron ColEmbed (nvidia/llama-nemoretriever-colembed-3b-v1, the default, and its successors):
a late-interaction retriever, one vector per token of a page or a query, scored by MaxSim.

The checkpoints are NVIDIA's own code (an Eagle 2 VLM with bidirectional attention): the encoder
calls the API of their model cards, ``forward_passages(images, batch_size)`` and
``forward_queries(queries, batch_size)``, which add the models' "passage: " and "query: " prompts and
cut pages into tiles themselves; it needs ``trust_remote_code``. They return a batch as one tensor
``(inputs, tokens, dim)`` whose padding rows are zero (the hidden states are masked before being
normalised); those rows are dropped, so each array holds the input's real tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from PIL import Image

from pagesight.encode.visual.remote import RemoteCodeEncoder

if TYPE_CHECKING:
    import torch


class NemotronColEmbedEncoder(RemoteCodeEncoder):
    name: ClassVar[str] = "nemotron-colembed"
    default_model: ClassVar[str | None] = "nvidia/llama-nemoretriever-colembed-3b-v1"
    multi_vector: ClassVar[bool] = True
    max_pixels: ClassVar[int] = 6 * 448 * 448  # up to 6 tiles of 448 x 448 pixels a page

    def _embed_images(self, images: list[Image.Image]) -> list[torch.Tensor]:
        return real_tokens(self.model.forward_passages(images, batch_size=len(images)))

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        return real_tokens(self.model.forward_queries(texts, batch_size=len(texts)))


def real_tokens(padded: torch.Tensor) -> list[torch.Tensor]:
    """Each input's token vectors without the all-zero rows that pad a batch of them."""
    return [vectors[vectors.abs().sum(dim=-1) > 0] for vectors in padded]
