"""What the tiny remote-code models share: a config, and a model turning text (its UTF-8 bytes, or
a tokenizer's ids) and images (one vector per 28-pixel patch) into token states."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

PATCH = 28  # pixels a side of one image token


class TinyConfig(PretrainedConfig):
    model_type = "tiny-remote"

    vocab_size: int = 256
    hidden_size: int = 32


class TinyModel(PreTrainedModel):
    config_class = TinyConfig
    base_model_prefix = "tiny"

    def __init__(self, config: TinyConfig):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.patch = nn.Linear(3 * 4 * 4, config.hidden_size)
        self.mix = nn.Linear(config.hidden_size, config.hidden_size)
        self.post_init()

    def text_states(self, ids: list[int]) -> torch.Tensor:
        return self.embed(torch.tensor(ids, dtype=torch.long, device=self.device))

    def image_states(self, image: Image.Image) -> torch.Tensor:
        """One state per 28-pixel patch of ``image`` (at least one), each patch seen at 4 x 4."""
        columns, rows = max(1, image.width // PATCH), max(1, image.height // PATCH)
        small = image.convert("RGB").resize((columns * 4, rows * 4))
        pixels = torch.from_numpy(np.asarray(small, dtype=np.float32)).view(rows, 4, columns, 4, 3)
        patches = pixels.permute(0, 2, 4, 1, 3).reshape(rows * columns, 3 * 16) / 255.0
        return self.patch(patches.to(self.device, self.dtype))

    def states(self, *parts: torch.Tensor) -> torch.Tensor:
        """The token states of ``parts`` in order, each token mixed with the mean of those before it."""
        tokens = torch.cat(parts)
        seen = tokens.cumsum(dim=0) / torch.arange(1, len(tokens) + 1, device=tokens.device)[:, None]
        return torch.tanh(self.mix(tokens + seen))


def bytes_of(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def padded(sequences: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``sequences`` of ``(tokens, hidden)`` right-padded with zeros into one batch, and its mask."""
    longest = max(len(s) for s in sequences)
    batch = torch.zeros(len(sequences), longest, sequences[0].shape[-1], dtype=sequences[0].dtype)
    mask = torch.zeros(len(sequences), longest, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        batch[row, : len(sequence)] = sequence
        mask[row, : len(sequence)] = 1
    return batch, mask
