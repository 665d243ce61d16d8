"""A tiny VisRAG-Ret: ``forward(text, image, tokenizer)`` as openbmb/VisRAG-Ret's, each input its
image's patch states (when it has one) then its text's tokens, returning the last hidden states and
their attention mask (right padding) for the caller to pool."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.utils import ModelOutput

from .tiny_core import TinyConfig, TinyModel, padded


class Config(TinyConfig):
    model_type = "tiny-visrag"


@dataclass
class Output(ModelOutput):
    last_hidden_state: torch.Tensor | None = None
    attention_mask: torch.Tensor | None = None


class Model(TinyModel):
    config_class = Config

    def forward(self, text: list[str], image: list, tokenizer) -> Output:
        sequences = []
        for words, picture in zip(text, image):
            parts = [self.image_states(picture)] if picture is not None else []
            ids = tokenizer(words, add_special_tokens=False)["input_ids"]
            if ids:
                parts.append(self.text_states(ids))
            sequences.append(self.states(*parts))
        hidden, mask = padded(sequences)
        return Output(last_hidden_state=hidden, attention_mask=mask)
