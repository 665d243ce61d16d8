"""A tiny jina-reranker-m0: ``compute_score(pairs, ..., doc_type)`` as jinaai/jina-reranker-m0's,
a sigmoid score for each (query, document) pair, a float alone for a single pair."""

from __future__ import annotations

import torch

from .tiny_core import TinyConfig, TinyModel, bytes_of


class Config(TinyConfig):
    model_type = "tiny-m0"


class Model(TinyModel):
    config_class = Config

    @torch.no_grad()
    def score_pair(self, query: str, image) -> float:
        together = self.states(self.text_states(bytes_of(query)), self.image_states(image))
        return float(torch.sigmoid(together[-1].sum()))

    def compute_score(
        self, pairs, batch_size=8, max_length=10240, query_type="text", doc_type="text",
        normalize_scores=True,
    ):  # fmt: skip
        if doc_type != "image":
            raise ValueError(f"this tiny reranker reads image documents, not {doc_type}")
        scores = [self.score_pair(query, image) for query, image in pairs]
        return scores[0] if len(scores) == 1 else scores
