"""What ``pagesight train`` is told, declared once and light to import (the command line derives
its options from it): ``TrainOptions``, which ``run.TrainConfig.of`` makes a configuration of."""

from __future__ import annotations

from dataclasses import dataclass

from pagesight.errors import PagesightError
from pagesight.request import MODES
from pagesight.spec import option


@dataclass(frozen=True)
class TrainOptions:
    """What ``pagesight train`` is told, each field one of its options (``cli.common.request_options``);
    ``TrainConfig.of`` makes the configuration of it."""

    sample: int = option(0, "Tiles to write queries for (0: every tile with text).")
    per_tile: int = option(2, "Queries per tile.")
    negatives_from: tuple[str, ...] = option(
        ("hybrid",), "Retrievers to mine hard negatives with: lexical, dense, visual, hybrid (repeatable)."
    )
    negatives: int = option(3, "Hard negatives per query.")
    depth: int = option(30, "Ranks searched for hard negatives.")
    margin: float = option(0.95, "Drop candidates scoring at least this fraction of the positive's score.")
    heldout: float = option(0.1, "Share of the tiles whose queries are held out.")
    dense: bool = option(True, "Train the index's dense text model.", flags=("--dense/--no-dense",))
    cross_encoder: bool = option(False, "Train a cross-encoder reranker from MiniLM's weights.")
    cross_passage_words: int | None = option(
        None, "Cross-encoder: words per passage (overlap a sixth); default the index's chunks."
    )
    visual: bool = option(False, "Train a LoRA adapter for the index's visual encoder.")
    lora: bool = option(False, "Dense model: LoRA instead of full fine-tuning.")
    lora_rank: int = option(16, "LoRA rank.")
    lora_vision: bool = option(False, "Visual encoder: adapt the vision tower too.")
    gradient_checkpointing: bool = option(
        False, "Visual encoder: recompute activations in backward (less memory, about a third slower)."
    )
    epochs: float = option(1.0, "Passes over the training queries.")
    batch_size: int = option(32, "Queries per optimiser step (the in-batch negatives).")
    cache_batch: int | None = option(
        None, "Gradient caching: encode this many at a time, the whole batch in-batch."
    )
    accumulation: int = option(1, "Micro-batches per step (without gradient caching).")
    learning_rate: float | None = option(None, "Default: 3e-5 (full), 1e-4 (LoRA).")
    temperature: float = option(0.05, "InfoNCE temperature.")
    max_steps: int | None = option(None, "Stop each training after this many steps.")
    seed: int = option(0, "Seed of the sampling, splits and training.")

    def __post_init__(self) -> None:
        unknown = [mode for mode in self.negatives_from if mode not in MODES]
        if unknown:
            raise PagesightError(f"negatives_from must be among {', '.join(MODES)}, got '{unknown[0]}'")


# its fields each trained model's contrastive.Options takes, and those TrainConfig takes as they are
TRAINING = (
    "epochs",
    "batch_size",
    "cache_batch",
    "accumulation",
    "temperature",
    "lora_rank",
    "max_steps",
    "seed",
)
CHOSEN = (
    "sample",
    "per_tile",
    "negatives",
    "depth",
    "margin",
    "heldout",
    "dense",
    "cross_encoder",
    "visual",
    "seed",
)
