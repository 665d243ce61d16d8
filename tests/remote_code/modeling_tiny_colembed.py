"""A tiny Nemotron ColEmbed: ``forward_queries`` and ``forward_passages`` as NVIDIA's, one unit
vector per token ("query: " and "passage: " prompts added here), a call's inputs returned as one
tensor padded with zero rows."""

from __future__ import annotations

import torch

from .tiny_core import TinyConfig, TinyModel, bytes_of, padded


class Config(TinyConfig):
    model_type = "tiny-colembed"


class Model(TinyModel):
    config_class = Config

    def _batch(self, sequences: list[torch.Tensor]) -> torch.Tensor:
        batch, mask = padded([torch.nn.functional.normalize(s, dim=-1) for s in sequences])
        return batch * mask[..., None]

    @torch.no_grad()
    def forward_queries(self, queries: list[str], batch_size: int = 8) -> torch.Tensor:
        return self._batch([self.states(self.text_states(bytes_of(f"query: {q}"))) for q in queries])

    @torch.no_grad()
    def forward_passages(self, passages: list, batch_size: int = 8) -> torch.Tensor:
        prompt = self.text_states(bytes_of("passage: "))
        return self._batch([self.states(prompt, self.image_states(image)) for image in passages])
