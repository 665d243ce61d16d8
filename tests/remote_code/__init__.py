"""Tiny models whose code ships with them, as published retrievers, rerankers and readers do: each
``modeling_tiny_*`` module defines a config and a model with the API of the real one (VisRAG-Ret's
forward pass, jina-embeddings-v4's ``encode_text``/``encode_image``, Nemotron ColEmbed's
``forward_queries``/``forward_passages``, jina-reranker-m0's ``compute_score``, a causal language
model), over random weights. ``save`` writes one to a folder with ``save_pretrained``, which copies
the module beside the weights and names its classes in ``config.json``'s ``auto_map``: transformers
then loads the folder only with ``trust_remote_code=True``.
"""

from __future__ import annotations

from pathlib import Path

import torch


def save(folder: Path, module, auto_class: str = "AutoModel", seed: int = 0, tokenizer=None, **config):
    """A random-weight ``module.Model`` of ``module.Config(**config)`` saved to ``folder`` as a
    remote-code checkpoint loaded by ``auto_class`` (with ``tokenizer``, when given); returns it."""
    module.Config.register_for_auto_class()
    module.Model.register_for_auto_class(auto_class)
    torch.manual_seed(seed)
    model = module.Model(module.Config(**config)).eval()
    model.save_pretrained(folder)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return model
