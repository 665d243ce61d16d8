"""Pooling of a language model's last hidden states into one vector per sequence.

Each takes ``hidden`` ``(batch, seq, hidden)`` and ``attention_mask`` ``(batch, seq)`` (1 on real
tokens, 0 on padding, padding on either side) and returns ``(batch, hidden)``, not normalised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: loading an encoder's class (info, checks) needs no torch
    import torch


def last_token_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The hidden state of each sequence's last real token (DSE, Qwen3-VL-Embedding)."""
    import torch

    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    last = (positions * attention_mask.long()).argmax(dim=1)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of the hidden states where ``mask`` is 1 (jina-embeddings-v4)."""
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)


def position_weighted_mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """VisRAG-Ret's weighted mean: the i-th real token (from 1) weighs ``i / sum_j j``, so later
    tokens, which have attended to more of the sequence in a causal model, count more."""
    mask = attention_mask.to(hidden.dtype)
    weights = (mask * mask.cumsum(dim=1)).unsqueeze(-1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1)


def span_mask(input_ids: torch.Tensor, start_id: int, end_id: int) -> torch.Tensor:
    """1 from each sequence's first ``start_id`` token to its first ``end_id`` token, both included
    (the image span jina-embeddings-v4 mean-pools); all 0 in a sequence without the span."""
    starts = (input_ids == start_id).int().cumsum(dim=1) > 0
    ended = (input_ids == end_id).int().cumsum(dim=1)
    before_end = (ended - (input_ids == end_id).int()) == 0
    return (starts & before_end).long()
