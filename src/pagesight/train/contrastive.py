"""Contrastive training on synthetic pairs: InfoNCE with in-batch and hard negatives.

Three models learn from the same examples (a query, the passage of its tile, the passages of its
mined hard negatives):

- **the dense text model** (``train_dense``): sentence-transformers' ``MultipleNegativesRankingLoss``
  (InfoNCE over cosine similarities, ``scale = 1 / temperature``, every other positive and every
  hard negative of the batch a negative), or its GradCache version
  ``CachedMultipleNegativesRankingLoss`` for large batches in little memory (``cache_batch``);
  full fine-tuning or LoRA (peft) on the attention and feed-forward layers, merged when saved;
- **the cross-encoder reranker** (``train_cross_encoder``): a ``CrossEncoder`` started from the
  dense model's weights with a fresh one-logit head, trained by the cross-encoder
  ``MultipleNegativesRankingLoss`` (softmax over the positive, its hard negatives and in-batch ones);
- **visual encoders** (``train_visual``): LoRA on the language model (and, as an option, the vision
  tower) of any ``TorchEncoder``, InfoNCE between text queries and tile images, saved as a peft
  adapter that ``--encoder-adapter`` loads.

The losses are the library's; the loop is written here because sentence-transformers' trainers
need the ``datasets`` package (not a dependency) and the visual encoders are no
sentence-transformers models. The loop is plain: batches of examples, gradient accumulation,
AdamW with linear warm-up and decay, one progress callback per step with the loss.
"""

from __future__ import annotations

import json
import math
import random
import resource
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pagesight.encode.dense import best_chunk, quiet_offline
from pagesight.errors import PagesightError
from pagesight.search.rerank import PASSAGE_FILE
from pagesight.train.corpus import TrainingTile
from pagesight.train.queries import SyntheticQuery

# LoRA targets: BERT-style text models (MiniLM) and the projections of Qwen, SigLIP, CLIP and
# PaliGemma layers.
TEXT_LORA_TARGETS = ("query", "key", "value", "dense")
VISUAL_LORA_TARGETS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
    "qkv",
    "proj",
)
VISION_TOWER = ("visual", "vision")  # module path parts of vision towers


@dataclass
class Example:
    """A query with the passage of its tile and of each hard negative (the text a model sees)."""

    query: str
    positive: str
    negatives: list[str]
    tile_id: int = -1  # of the positive; the visual trainer renders it
    negative_ids: list[int] = field(default_factory=list)


@dataclass
class Options:
    epochs: float = 1.0
    batch_size: int = 32  # examples per optimiser step (the effective batch)
    accumulation: int = 1  # micro-batches per step, without gradient caching
    cache_batch: int | None = None  # gradient caching: encode this many at once, the whole batch in-batch
    learning_rate: float = 3e-5
    warmup: float = 0.1  # share of the steps
    temperature: float = 0.05
    lora: bool = False
    lora_rank: int = 16
    lora_vision: bool = False  # visual encoders: adapt the vision tower too
    max_steps: int | None = None
    bf16: bool = True  # bfloat16 autocast where the device supports it
    gradient_checkpointing: bool = False  # visual encoders: recompute activations in backward
    seed: int = 0

    def steps(self, n_examples: int) -> int:
        per_epoch = max(1, n_examples // self.batch_size)
        steps = max(1, math.ceil(per_epoch * self.epochs))
        return min(steps, self.max_steps) if self.max_steps else steps


@dataclass
class TrainReport:
    model: str
    saved: dict[str, str]
    steps: int
    examples: int
    seconds: float
    steps_per_second: float
    losses: list[float]
    peak_rss_mb: float
    options: dict

    @property
    def first_loss(self) -> float:
        return sum(self.losses[:5]) / max(1, len(self.losses[:5]))

    @property
    def last_loss(self) -> float:
        return sum(self.losses[-5:]) / max(1, len(self.losses[-5:]))

    def to_dict(self) -> dict:
        return {
            **{k: v for k, v in asdict(self).items() if k != "losses"},
            "loss_first_steps": round(self.first_loss, 4),
            "loss_last_steps": round(self.last_loss, 4),
        }


Progress = Callable[[int, float], None]  # (steps done, loss of the last step)


def make_examples(
    queries: Sequence[SyntheticQuery],
    negatives: Sequence[Sequence[int]],
    tiles: dict[int, TrainingTile],
    n_negatives: int,
    chunk_words: int,
    chunk_overlap: int,
    seed: int = 0,
) -> list[Example]:
    """An example per query with exactly ``n_negatives`` negatives: its mined ones, topped up with
    random tiles of other pages (every column of the loss must be full)."""
    rng = random.Random(seed)
    ids = list(tiles)
    found = []
    for query, mined in zip(queries, negatives):
        chosen = list(mined[:n_negatives])
        while len(chosen) < n_negatives:
            other = tiles[rng.choice(ids)]
            if (other.doc_id, other.page) != (query.doc_id, query.page) and other.id not in chosen:
                chosen.append(other.id)
        passages = [best_chunk(tiles[i].text, query.text, chunk_words, chunk_overlap) for i in chosen]
        positive = best_chunk(tiles[query.tile_id].text, query.text, chunk_words, chunk_overlap)
        found.append(Example(query.text, positive, passages, query.tile_id, chosen))
    return found


def _batches(examples: Sequence[Example], options: Options):
    """Shuffled batches of up to ``batch_size``, epoch after epoch, ``steps`` of them, in which no
    example's positive is another's positive or hard negative: two queries of one tile, or a
    tile that is one query's answer and another's negative, would be false in-batch negatives.
    An example that does not fit waits for the next batch."""
    rng = random.Random(options.seed)
    queue: deque[int] = deque()
    for _ in range(options.steps(len(examples))):
        batch: list[Example] = []
        positives: set = set()
        negatives: set = set()
        waiting: list[int] = []
        while len(batch) < options.batch_size and len(waiting) <= len(examples):
            if not queue:
                fresh = list(range(len(examples)))
                rng.shuffle(fresh)
                queue.extend(fresh)
            index = queue.popleft()
            positive, hard = _keys(examples[index])
            if positive in positives or positive in negatives or hard & positives:
                waiting.append(index)
                continue
            batch.append(examples[index])
            positives.add(positive)
            negatives |= hard
        queue.extendleft(reversed(waiting))
        yield batch


def _keys(example: Example) -> tuple[object, set]:
    """What identifies an example's positive and negatives: tile ids, else the passages."""
    if example.tile_id >= 0:
        return example.tile_id, set(example.negative_ids)
    return example.positive, set(example.negatives)


def _optimiser(parameters, options: Options, steps: int):
    import torch
    from transformers import get_linear_schedule_with_warmup

    optimiser = torch.optim.AdamW([p for p in parameters if p.requires_grad], lr=options.learning_rate)
    schedule = get_linear_schedule_with_warmup(optimiser, int(options.warmup * steps), steps)
    return optimiser, schedule


def _loop(
    model, step_loss, examples, options: Options, progress: Progress | None
) -> tuple[list[float], float]:
    """Run the optimiser over ``examples``; ``step_loss(micro_batch)`` returns a loss to backpropagate.
    Returns the loss of every step and the seconds taken."""
    import torch

    torch.manual_seed(options.seed)
    device = next(model.parameters()).device.type
    # bfloat16 autocast where the hardware has it (2.5x faster for MiniLM on this CPU); the
    # weights, optimiser and gradients stay float32. Gradient caching recomputes outside it.
    bf16 = options.bf16 and (
        torch.cuda.is_bf16_supported() if device == "cuda" else torch.ops.mkldnn._is_mkldnn_bf16_supported()
    )
    steps = options.steps(len(examples))
    optimiser, schedule = _optimiser(model.parameters(), options, steps)
    model.train()
    losses = []
    start = time.perf_counter()
    for done, batch in enumerate(_batches(examples, options), 1):
        parts = 1 if options.cache_batch else max(1, options.accumulation)
        size = math.ceil(len(batch) / parts)
        total = 0.0
        for first in range(0, len(batch), size):
            with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
                loss = step_loss(batch[first : first + size]) / parts
            loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad(set_to_none=True)
        losses.append(total)
        if progress:
            progress(done, total)
    model.eval()
    return losses, time.perf_counter() - start


def _report(name, saved, examples, options, losses, seconds) -> TrainReport:
    return TrainReport(
        model=name,
        saved={k: str(v) for k, v in saved.items()},
        steps=len(losses),
        examples=len(examples),
        seconds=round(seconds, 2),
        steps_per_second=round(len(losses) / seconds, 4) if seconds else 0.0,
        losses=[round(x, 5) for x in losses],
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        options=asdict(options),
    )


# The dense text model ----------------------------------------------------------------------


def load_sentence_model(path: str | Path, device: str = "cpu"):
    """A sentence-transformers model from a folder (offline: the packaged MiniLM or a trained one)."""
    quiet_offline()
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(path), device=device)


def train_dense(
    base: str | Path,
    examples: Sequence[Example],
    out: Path,
    options: Options,
    progress: Progress | None = None,
    device: str = "cpu",
) -> TrainReport:
    """Fine-tune the sentence-transformers model at ``base`` on ``examples``; the result, a full
    model folder the dense retriever loads, goes to ``out/dense`` (with LoRA, the adapter alone
    also to ``out/dense-adapter``)."""
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )
    from sentence_transformers.util import batch_to_device

    model = load_sentence_model(base, device)
    if options.lora:
        import peft

        config = peft.LoraConfig(
            r=options.lora_rank, lora_alpha=2 * options.lora_rank, target_modules=list(TEXT_LORA_TARGETS)
        )
        model[0].model = peft.get_peft_model(model[0].model, config)
    scale = 1.0 / options.temperature
    if options.cache_batch:
        loss = CachedMultipleNegativesRankingLoss(model, scale=scale, mini_batch_size=options.cache_batch)
    else:
        loss = MultipleNegativesRankingLoss(model, scale=scale)

    def step_loss(batch: list[Example]):
        columns = [[e.query for e in batch], [e.positive for e in batch]]
        columns += [[e.negatives[i] for e in batch] for i in range(len(batch[0].negatives))]
        features = [batch_to_device(model.preprocess(c), model.device) for c in columns]
        return loss(features, None)

    losses, seconds = _loop(model, step_loss, examples, options, progress)
    saved = {}
    if options.lora:
        saved["adapter"] = out / "dense-adapter"
        model[0].model.save_pretrained(saved["adapter"])
        model[0].model = model[0].model.merge_and_unload()
    saved["model"] = out / "dense"
    model.save(str(saved["model"]))
    return _report("dense", saved, examples, options, losses, seconds)


def rank_metrics(encode_queries, encode_passages, examples: Sequence[Example]) -> dict:
    """Recall@1 and MRR of each example's positive among every passage of ``examples`` (the
    positives and hard negatives of the held-out split): a before/after measure that needs no
    re-encoded index. ``encode_*`` map texts to unit vectors (numpy)."""
    import numpy as np

    passages = list(
        dict.fromkeys([e.positive for e in examples] + [n for e in examples for n in e.negatives])
    )
    where = {text: row for row, text in enumerate(passages)}
    scores = encode_queries([e.query for e in examples]) @ encode_passages(passages).T
    ranks = []
    for row, example in enumerate(examples):
        own = scores[row, where[example.positive]]
        ranks.append(1 + int(np.sum(scores[row] > own)))
    return {
        "pool": len(passages),
        "queries": len(examples),
        "recall@1": round(float(np.mean([r == 1 for r in ranks])), 4),
        "recall@5": round(float(np.mean([r <= 5 for r in ranks])), 4),
        "mrr": round(float(np.mean([1 / r for r in ranks])), 4),
    }


def candidate_metrics(
    score: Callable[[str, list[str]], Sequence[float]], examples: Sequence[Example]
) -> dict:
    """Recall@1 and MRR of each example's positive among itself and its own hard negatives, by
    ``score(query, passages)``: the measure a reranker and a bi-encoder share."""
    ranks = []
    for example in examples:
        scores = list(score(example.query, [example.positive, *example.negatives]))
        ranks.append(1 + sum(1 for s in scores[1:] if s > scores[0]))
    return {
        "candidates": 1 + len(examples[0].negatives) if examples else 0,
        "queries": len(examples),
        "recall@1": round(sum(r == 1 for r in ranks) / max(1, len(ranks)), 4),
        "mrr": round(sum(1 / r for r in ranks) / max(1, len(ranks)), 4),
    }


# The cross-encoder reranker ----------------------------------------------------------------


def train_cross_encoder(
    base: str | Path,
    examples: Sequence[Example],
    out: Path,
    options: Options,
    progress: Progress | None = None,
    device: str = "cpu",
    max_length: int = 256,
    passage: tuple[int, int] = (120, 20),
) -> TrainReport:
    """A cross-encoder reranker started from the text model at ``base`` (its transformer; the
    relevance head is new), trained on ``examples`` (whose passages are chunks of ``passage``
    words and overlap, recorded with the model for the reranker), saved to ``out/cross-encoder``."""
    quiet_offline()
    from sentence_transformers.cross_encoder import CrossEncoder
    from sentence_transformers.cross_encoder.losses import MultipleNegativesRankingLoss

    from pagesight.encode.models import quiet_transformers

    with quiet_transformers():  # its load report lists the new head, which is expected
        model = CrossEncoder(str(base), num_labels=1, max_length=max_length, device=device)
    loss = MultipleNegativesRankingLoss(model, num_negatives=4, scale=1.0 / options.temperature)

    def step_loss(batch: list[Example]):
        columns = [[e.query for e in batch], [e.positive for e in batch]]
        columns += [[e.negatives[i] for e in batch] for i in range(len(batch[0].negatives))]
        return loss(columns, None)

    losses, seconds = _loop(model, step_loss, examples, options, progress)
    saved = {"model": out / "cross-encoder"}
    model.save_pretrained(str(saved["model"]))
    words, overlap = passage
    (saved["model"] / PASSAGE_FILE).write_text(
        json.dumps({"passage_words": words, "passage_overlap": overlap}) + "\n", encoding="utf-8"
    )
    return _report("cross-encoder", saved, examples, options, losses, seconds)


# Visual encoders ---------------------------------------------------------------------------


def lora_targets(model, vision: bool) -> list[str]:
    """Names of the linear layers LoRA adapts: the language model's projections, and the vision
    tower's too when ``vision``."""
    import torch

    names = []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or name.rsplit(".", 1)[-1] not in VISUAL_LORA_TARGETS:
            continue
        in_vision = any(part in VISION_TOWER for part in name.split(".")) or "vision" in name
        if in_vision and not vision:
            continue
        names.append(name)
    return names


def train_visual(
    encoder,
    examples: Sequence[Example],
    images: Callable[[int], object],
    out: Path,
    options: Options,
    progress: Progress | None = None,
) -> TrainReport:
    """LoRA on a loaded ``TorchEncoder`` (``encoder.model``): InfoNCE between its text-query
    vectors and its tile-image vectors, positive and hard-negative tiles (``images(tile_id)``)
    of the batch all candidates. Late-interaction encoders score by MaxSim. The adapter goes to
    ``out/visual-adapter``."""
    import peft
    import torch

    from pagesight.encode.visual.remote import RemoteCodeEncoder

    if isinstance(encoder, RemoteCodeEncoder):
        raise PagesightError(
            f"visual encoder '{encoder.name}': its model embeds through its own code's inference API, "
            "which computes no gradients, so it cannot be trained here; train a family pagesight runs "
            "itself (dse, qwen3-vl-embedding, colqwen2, colpali, clip, ...)"
        )
    targets = lora_targets(encoder.model, options.lora_vision)
    if not targets:
        raise PagesightError(
            f"visual encoder '{encoder.name}': its model has no linear layers named "
            f"{', '.join(VISUAL_LORA_TARGETS)} for LoRA to adapt"
        )
    config = peft.LoraConfig(r=options.lora_rank, lora_alpha=2 * options.lora_rank, target_modules=targets)
    if options.gradient_checkpointing:
        # Each layer's activations are recomputed in the backward pass instead of kept: a batch of
        # 64 tiles of ~1,150 tokens through a 2B model then fits one GPU (BENCHMARKS, the plan).
        # Non-reentrant checkpointing needs no gradient on the frozen inputs.
        if not getattr(encoder.model, "supports_gradient_checkpointing", False):
            raise PagesightError(f"{encoder.name}: this model cannot checkpoint its gradients")
        encoder.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    torch.manual_seed(options.seed)  # the adapter's random initialisation: the same seed, the same run
    encoder.model = peft.get_peft_model(encoder.model, config)

    def step_loss(batch: list[Example]):
        queries = encoder._embed_queries([e.query for e in batch])
        tile_ids = list(
            dict.fromkeys([e.tile_id for e in batch] + [i for e in batch for i in e.negative_ids])
        )
        pages = encoder._embed_images([images(i).convert("RGB") for i in tile_ids])
        scores = torch.stack([torch.stack([similarity(q, p) for p in pages]) for q in queries])
        labels = torch.tensor([tile_ids.index(e.tile_id) for e in batch], device=scores.device)
        return torch.nn.functional.cross_entropy(scores.float() / options.temperature, labels)

    losses, seconds = _loop(encoder.model, step_loss, examples, options, progress)
    saved = {"adapter": out / "visual-adapter"}
    encoder.model.save_pretrained(saved["adapter"])
    encoder.model = encoder.model.merge_and_unload()
    if options.gradient_checkpointing:
        encoder.model.gradient_checkpointing_disable()
    return _report(encoder.name, saved, examples, options, losses, seconds)


def similarity(query, page):
    """Cosine of two single vectors, or MaxSim (mean over query tokens) of two token matrices."""
    import torch

    query = torch.nn.functional.normalize(query.float(), dim=-1)
    page = torch.nn.functional.normalize(page.float(), dim=-1)
    if query.dim() == 1:
        return query @ page
    return (query @ page.T).max(dim=1).values.mean()
