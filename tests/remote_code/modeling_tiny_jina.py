"""A tiny jina-embeddings-v4: ``encode_text`` and ``encode_image`` as jinaai/jina-embeddings-v4's,
single unit vectors (the mean of the token states), a task and a Matryoshka ``truncate_dim`` checked
as the real model checks them; queries read "Query: <text>"."""

from __future__ import annotations

import torch

from .tiny_core import TinyConfig, TinyModel, bytes_of

TASKS = ("retrieval", "text-matching", "code")
PREFIXES = {"query": "Query", "passage": "Passage"}


class Config(TinyConfig):
    model_type = "tiny-jina"

    matryoshka_dims: tuple[int, ...] = (8, 16)


class Model(TinyModel):
    config_class = Config

    def _vectors(self, states: list[torch.Tensor], task, truncate_dim) -> list[torch.Tensor]:
        if task not in TASKS:
            raise ValueError(f"Invalid task: {task}. Must be one of {TASKS}.")
        if truncate_dim is not None and truncate_dim not in self.config.matryoshka_dims:
            raise ValueError(f"Invalid truncate_dim: {truncate_dim}.")
        vectors = [s.mean(dim=0)[:truncate_dim] for s in states]
        return [torch.nn.functional.normalize(v, dim=-1) for v in vectors]

    @torch.no_grad()
    def encode_text(
        self, texts, task=None, max_length=32768, batch_size=8, return_multivector=False,
        return_numpy=False, truncate_dim=None, prompt_name=None,
    ):  # fmt: skip
        prefix = PREFIXES[prompt_name or "query"]
        states = [self.states(self.text_states(bytes_of(f"{prefix}: {text}"))) for text in texts]
        return self._vectors(states, task, truncate_dim)

    @torch.no_grad()
    def encode_image(
        self, images, task=None, batch_size=8, return_multivector=False, return_numpy=False,
        truncate_dim=None, max_pixels=None,
    ):  # fmt: skip
        states = [self.states(self.image_states(image)) for image in images]
        return self._vectors(states, task, truncate_dim)
