"""``pagesight train``: from an index to synthetic data, hard negatives, trained models and a
before/after report.

    tiles (a sample) -> synthetic queries (offline, or a reader model)  ``queries``
        -> a held-out split by tile, both written as eval datasets       ``dataset``
        -> hard negatives mined from the index                          ``negatives``
        -> the dense text model, the cross-encoder, a visual adapter    ``contrastive``
        -> held-out metrics before and after, report.json

Nothing here uses the questions or labels of an evaluation dataset: only the index's tiles.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pagesight.errors import PagesightError
from pagesight.train import contrastive, dataset
from pagesight.train.corpus import TrainingTile, load_tiles
from pagesight.train.negatives import mine
from pagesight.train.options import CHOSEN, TRAINING, TrainOptions
from pagesight.train.queries import FilterReport, SyntheticQuery, Vocabulary, model_queries, offline_queries

Progress = Callable[[str, int, int, str], None]  # stage, done, total, note
MIN_WORDS = 20  # tiles with less text make no queries (covers, blank pages, figures alone)


FULL_RATE = 3e-5  # learning rate of full fine-tuning
LORA_RATE = 1e-4  # learning rate of a LoRA adapter


@dataclass
class TrainConfig:
    sample: int = 0  # tiles to make queries for; 0: all
    per_tile: int = 2
    keyword_share: float = 0.25
    reader: object | None = None  # a reader with chat(prompt, images) writes the queries; None: offline
    negatives_from: tuple[str, ...] = ("hybrid",)
    negatives: int = 3
    depth: int = 30
    margin: float = 0.95
    heldout: float = 0.1
    dense: bool = True
    cross_encoder: bool = False
    cross_passage: tuple[int, int] | None = None  # its passages' words and overlap; None: the index's chunks
    visual: bool = False
    dense_options: contrastive.Options = field(default_factory=contrastive.Options)
    cross_options: contrastive.Options = field(default_factory=contrastive.Options)
    visual_options: contrastive.Options = field(
        default_factory=lambda: contrastive.Options(lora=True, learning_rate=1e-4, batch_size=8)
    )
    seed: int = 0

    @classmethod
    def of(cls, options: TrainOptions, reader: object | None = None) -> TrainConfig:
        """A configuration from what ``pagesight train`` is told (``TrainOptions``): its training
        fields (epochs, batch size, temperature, ...) for every model trained, ``learning_rate``
        for each (None: 3e-5 for full fine-tuning, 1e-4 for a LoRA adapter, which the visual
        encoder always gets), the dense model as a LoRA adapter with ``lora``, the cross-encoder's
        passages of ``cross_passage_words`` overlapping by a sixth; ``reader`` writes the queries."""
        training = {name: getattr(options, name) for name in TRAINING}
        rate, words = options.learning_rate, options.cross_passage_words
        chosen = {name: getattr(options, name) for name in CHOSEN}
        return cls(
            reader=reader,
            negatives_from=tuple(options.negatives_from),
            cross_passage=(words, words // 6) if words else None,
            dense_options=contrastive.Options(
                learning_rate=rate or (LORA_RATE if options.lora else FULL_RATE),
                lora=options.lora,
                **training,
            ),
            cross_options=contrastive.Options(learning_rate=rate or FULL_RATE, **training),
            visual_options=contrastive.Options(
                learning_rate=rate or LORA_RATE,
                lora=True,
                lora_vision=options.lora_vision,
                gradient_checkpointing=options.gradient_checkpointing,
                **training,
            ),
            **chosen,
        )


def train(index, out: Path, config: TrainConfig, progress: Progress | None = None) -> dict:
    """Run ``pagesight train`` on ``index`` into ``out``; returns (and writes) the report."""
    progress = progress or (lambda *args: None)
    settings = index.settings
    if config.dense and not settings.dense_model:
        raise PagesightError(f"{index.store.location}: index has no dense text model to train (--no-dense)")
    if config.visual and not settings.visual_encoder:
        raise PagesightError(f"{index.store.location}: index has no visual encoder to train (--no-visual)")
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    report: dict = {"index": str(index.store.location), "out": str(out)}

    tiles = load_tiles(index.catalog)
    by_id = {tile.id: tile for tile in tiles}
    queries, splits = _written(index, tiles, out, config, progress, report)
    mined, mining = mine(
        index,
        queries,
        tiles,
        config.negatives_from,
        per_query=config.negatives,
        depth=config.depth,
        margin=config.margin,
        progress=_counter(progress, "hard negatives", len(queries)),
    )
    report["negatives"] = mining.to_dict()

    def examples(passage: tuple[int, int]) -> tuple[list, list]:
        """The training and held-out examples, with passages of ``passage`` (words, overlap)."""
        made = contrastive.make_examples(queries, mined, by_id, config.negatives, *passage, config.seed)
        return (
            [e for e, s in zip(made, splits) if s == "train"],
            [e for e, s in zip(made, splits) if s == "heldout"],
        )

    chunking = (settings.chunk_words, settings.chunk_overlap)
    train_set, test_set = examples(chunking)
    _save(out, report)  # after each stage, so a long run stopped part way keeps what it measured
    if config.dense:
        report["dense"] = _train_dense(index, train_set, test_set, out, config, progress)
        _save(out, report)
    if config.cross_encoder:
        passage = config.cross_passage or chunking
        if passage != chunking:
            train_set, test_set = examples(passage)
        report["cross_encoder"] = _train_cross(train_set, test_set, out, config, passage, progress)
        _save(out, report)
    if config.visual:
        report["visual"] = _train_visual(index, train_set, out, config, progress)
    report["seconds"] = round(time.perf_counter() - started, 1)
    _save(out, report)
    return report


def _written(index, tiles: list, out: Path, config: TrainConfig, progress: Progress, report: dict):
    """Training queries written from a sample of the tiles, split into training and held-out ones,
    saved as datasets under ``out`` (queries, heldout) and counted in ``report``."""
    chosen = _sample([t for t in tiles if len(t.text.split()) >= MIN_WORDS], config.sample, config.seed)
    queries, made = _queries(index, tiles, chosen, config, progress)
    if len(queries) < 2:
        raise PagesightError(f"{index.store.location}: too little text to make training queries from")
    splits = _split(queries, config.heldout, config.seed)
    sources = {d.id: d.source for d in index.catalog.documents()}
    dataset.write(out / "queries", queries, splits, sources)
    held = [q for q, s in zip(queries, splits) if s == "heldout"]
    dataset.write(out / "heldout", held, ["heldout"] * len(held), sources)
    report["queries"] = {
        "tiles": len(tiles),
        "tiles_sampled": len(chosen),
        "made": len(queries),
        "train": splits.count("train"),
        "heldout": len(held),
        **made,
    }
    return queries, splits


def _save(out: Path, report: dict) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def _sample(tiles: list[TrainingTile], n: int, seed: int) -> list[TrainingTile]:
    if not n or n >= len(tiles):
        return tiles
    return sorted(random.Random(seed).sample(tiles, n), key=lambda t: t.id)


def _queries(
    index, tiles, chosen, config: TrainConfig, progress: Progress
) -> tuple[list[SyntheticQuery], dict]:
    """The synthetic queries of the chosen tiles and a note on how they were made."""
    if config.reader is None:
        vocabulary = Vocabulary(t.text for t in tiles)
        queries = offline_queries(chosen, vocabulary, config.per_tile, config.keyword_share, config.seed)
        progress("queries", len(chosen), len(chosen), f"{len(queries)} queries")
        return queries, {"source": "offline"}

    def image(tile: TrainingTile):
        return index.tile_image(tile.doc_id, tile.page, tile.idx)

    filters = FilterReport()  # shared, so a question repeated on another tile is dropped too
    queries = []
    for done, tile in enumerate(chosen, 1):
        queries += model_queries(config.reader, [tile], image, config.per_tile, filters)
        progress("queries", done, len(chosen), f"{len(queries)} kept")
    return queries, {"source": getattr(config.reader, "name", "model"), "filters": filters.to_dict()}


def _split(queries: list[SyntheticQuery], share: float, seed: int) -> list[str]:
    """'heldout' for the queries of a ``share`` of the tiles (all queries of a tile on one side,
    so held-out tiles are unseen in training), 'train' for the rest."""
    tile_ids = sorted({q.tile_id for q in queries})
    rng = random.Random(seed)
    held = set(rng.sample(tile_ids, round(share * len(tile_ids)))) if share > 0 else set()
    return ["heldout" if q.tile_id in held else "train" for q in queries]


def _counter(progress: Progress, stage: str, total: int):
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        progress(stage, done, total, "")

    return advance


def _stepper(progress: Progress, stage: str, options: contrastive.Options, n: int):
    total = options.steps(n)
    return lambda step, loss: progress(stage, step, total, f"loss {loss:.3f}")


def _train_dense(index, train_set, test_set, out, config: TrainConfig, progress) -> dict:
    from pagesight.encode.dense import dense_model

    base = dense_model(index.settings.dense_model).model_dir
    before = _rank(base, test_set)
    trained = contrastive.train_dense(
        base,
        train_set,
        out,
        config.dense_options,
        _stepper(progress, "dense", config.dense_options, len(train_set)),
    )
    after = _rank(trained.saved["model"], test_set)
    return {**trained.to_dict(), "base": str(base), "heldout_before": before, "heldout_after": after}


def _rank(model_dir, examples) -> dict:
    """Held-out metrics of the sentence-transformers model in ``model_dir``: the positive among all
    held-out passages, and among its own hard negatives."""
    if not examples:
        return {}
    model = contrastive.load_sentence_model(model_dir)

    def encode(texts):
        return model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)

    return {
        "pool": contrastive.rank_metrics(encode, encode, examples),
        "own_negatives": contrastive.candidate_metrics(
            lambda q, passages: (encode([q]) @ encode(passages).T)[0], examples
        ),
    }


def _train_cross(train_set, test_set, out, config: TrainConfig, passage, progress) -> dict:
    from pagesight.encode.dense import SentenceEncoder

    base = SentenceEncoder().model_dir  # the packaged MiniLM's weights, a new relevance head
    trained = contrastive.train_cross_encoder(
        base,
        train_set,
        out,
        config.cross_options,
        _stepper(progress, "cross-encoder", config.cross_options, len(train_set)),
        passage=passage,
    )
    report = {**trained.to_dict(), "base": str(base)}
    if test_set:
        from sentence_transformers.cross_encoder import CrossEncoder

        model = CrossEncoder(str(trained.saved["model"]))
        report["heldout_after"] = {
            "own_negatives": contrastive.candidate_metrics(
                lambda q, passages: model.predict([(q, p) for p in passages], show_progress_bar=False),
                test_set,
            )
        }
    return report


def _train_visual(index, train_set, out, config: TrainConfig, progress) -> dict:
    """A LoRA adapter for the index's visual encoder, trained on a copy of it (the index keeps its own)."""
    from pagesight.encode.visual import make_encoder

    settings = index.settings
    encoder = make_encoder(
        settings.visual_encoder,
        model=settings.visual_model,
        adapter=settings.visual_adapter,
        device=index.device,
        trust_remote_code=index.trust_remote_code,
    )
    tiles = index.catalog.tiles(
        sorted({e.tile_id for e in train_set} | {i for e in train_set for i in e.negative_ids}), spans=False
    )

    def image(tile_id: int):
        row = tiles[tile_id]
        return index.tile_image(row.doc_id, row.page, row.idx)

    trained = contrastive.train_visual(
        encoder,
        train_set,
        image,
        out,
        config.visual_options,
        _stepper(progress, "visual", config.visual_options, len(train_set)),
    )
    return trained.to_dict()
