"""A tiny causal language model with its own code, loaded by ``AutoModelForCausalLM``: next-token
logits from each token's state (its embedding mixed with the mean of those before it)."""

from __future__ import annotations

import torch
from torch import nn
from transformers import GenerationMixin
from transformers.modeling_outputs import CausalLMOutputWithPast

from .tiny_core import TinyConfig, TinyModel


class Config(TinyConfig):
    model_type = "tiny-lm"

    use_cache: bool = False  # every step reads the whole sequence again


class Model(TinyModel, GenerationMixin):
    config_class = Config

    def __init__(self, config: Config):
        super().__init__(config)
        self.head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask=None, **kwargs) -> CausalLMOutputWithPast:
        states = torch.stack([self.states(self.embed(row)) for row in input_ids])
        return CausalLMOutputWithPast(logits=self.head(states))
