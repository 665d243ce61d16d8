"""``pagesight train``: retrievers fine-tuned on the index's own pages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pagesight.cli.common import (
    DeviceOption,
    IndexOption,
    JsonOption,
    Mode,
    TrustOption,
    fail,
    open_index,
    out,
    progress_bar,
)
from pagesight.errors import PagesightError

if TYPE_CHECKING:
    pass

app = typer.Typer()


@app.command()
def train(
    index: IndexOption,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the queries, models and report.")],
    sample: Annotated[int, typer.Option(help="Tiles to write queries for (0: every tile with text).")] = 0,
    per_tile: Annotated[int, typer.Option(help="Queries per tile.")] = 2,
    reader: Annotated[
        str | None,
        typer.Option(help="Write the queries with this reader (openai, transformers) shown each tile image."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="The reader's model.")] = None,
    base_url: Annotated[str | None, typer.Option(help="openai reader: the endpoint's base URL.")] = None,
    negatives_from: Annotated[
        list[Mode] | None, typer.Option(help="Retrievers to mine hard negatives with (repeatable).")
    ] = None,
    negatives: Annotated[int, typer.Option(help="Hard negatives per query.")] = 3,
    depth: Annotated[int, typer.Option(help="Ranks searched for hard negatives.")] = 30,
    margin: Annotated[
        float, typer.Option(help="Drop candidates scoring at least this fraction of the positive's score.")
    ] = 0.95,
    heldout: Annotated[float, typer.Option(help="Share of the tiles whose queries are held out.")] = 0.1,
    dense: Annotated[bool, typer.Option(help="Train the index's dense text model.")] = True,
    cross_encoder: Annotated[
        bool, typer.Option("--cross-encoder", help="Train a cross-encoder reranker from MiniLM's weights.")
    ] = False,
    cross_passage_words: Annotated[
        int | None,
        typer.Option(help="Cross-encoder: words per passage (overlap a sixth); default the index's chunks."),
    ] = None,
    visual: Annotated[
        bool, typer.Option("--visual", help="Train a LoRA adapter for the index's visual encoder.")
    ] = False,
    lora: Annotated[
        bool, typer.Option("--lora", help="Dense model: LoRA instead of full fine-tuning.")
    ] = False,
    lora_rank: Annotated[int, typer.Option(help="LoRA rank.")] = 16,
    lora_vision: Annotated[
        bool, typer.Option("--lora-vision", help="Visual encoder: adapt the vision tower too.")
    ] = False,
    gradient_checkpointing: Annotated[
        bool,
        typer.Option(
            "--gradient-checkpointing",
            help="Visual encoder: recompute activations in backward (less memory, about a third slower).",
        ),
    ] = False,
    epochs: Annotated[float, typer.Option(help="Passes over the training queries.")] = 1.0,
    batch_size: Annotated[
        int, typer.Option(help="Queries per optimiser step (the in-batch negatives).")
    ] = 32,
    cache_batch: Annotated[
        int | None,
        typer.Option(help="Gradient caching: encode this many at a time, the whole batch in-batch."),
    ] = None,
    accumulation: Annotated[int, typer.Option(help="Micro-batches per step (without gradient caching).")] = 1,
    learning_rate: Annotated[float | None, typer.Option(help="Default: 3e-5 (full), 1e-4 (LoRA).")] = None,
    temperature: Annotated[float, typer.Option(help="InfoNCE temperature.")] = 0.05,
    max_steps: Annotated[int | None, typer.Option(help="Stop each training after this many steps.")] = None,
    device: DeviceOption = "auto",
    trust_remote_code: TrustOption = False,
    seed: Annotated[int, typer.Option(help="Seed of the sampling, splits and training.")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Fine-tune retrievers on the index's own pages.

    Synthetic queries, hard negatives mined from the index, contrastive training of MiniLM (and
    of visual encoders with --visual), a cross-encoder reranker.

    Writes OUT/queries and OUT/heldout (datasets for pagesight eval), OUT/dense (a MiniLM that
    ingest --dense-model loads; with --lora also OUT/dense-adapter), OUT/cross-encoder (for search
    --rerank cross-encoder --rerank-model), OUT/visual-adapter (for ingest --encoder-adapter) and
    OUT/report.json: queries made and filtered, negatives and their thresholds, losses, time, memory,
    held-out metrics before and after.
    """
    from pagesight.train.run import TrainConfig
    from pagesight.train.run import train as run_training

    idx = open_index(index, device=device, trust_remote_code=trust_remote_code)
    training = dict(
        epochs=epochs,
        batch_size=batch_size,
        cache_batch=cache_batch,
        accumulation=accumulation,
        temperature=temperature,
        lora_rank=lora_rank,
        max_steps=max_steps,
        seed=seed,
    )
    try:
        chosen_reader = None
        if reader is not None:
            from pagesight.answer.base import READERS, make_reader
            from pagesight.registry import lent

            settings = {"model": model, "base_url": base_url} if reader == "openai" else {"model": model}
            settings.update(lent(READERS.load(reader), trust_remote_code=trust_remote_code))
            chosen_reader = make_reader(reader, **settings)
        config = TrainConfig.build(
            learning_rate=learning_rate,
            lora=lora,
            lora_vision=lora_vision,
            gradient_checkpointing=gradient_checkpointing,
            cross_passage_words=cross_passage_words,
            training=training,
            sample=sample,
            per_tile=per_tile,
            reader=chosen_reader,
            negatives_from=tuple(r.value for r in negatives_from or [Mode.hybrid]),
            negatives=negatives,
            depth=depth,
            margin=margin,
            heldout=heldout,
            dense=dense,
            cross_encoder=cross_encoder,
            visual=visual,
            seed=seed,
        )
        with progress_bar(transient=True) as progress:
            tasks: dict[str, int] = {}

            def show(stage: str, done: int, total: int, note: str) -> None:
                if stage not in tasks:
                    tasks[stage] = progress.add_task(stage, total=total, note=note)
                progress.update(tasks[stage], completed=done, note=note)

            report = run_training(idx, out, config, show)
    except PagesightError as exc:
        fail(str(exc))
    if as_json:
        print(json.dumps(report))
        return
    _print_training(report)


def _print_training(report: dict) -> None:
    made = report["queries"]
    out.print(
        f"queries: {made['made']} from {made['tiles_sampled']} tiles ({made['train']} train, "
        f"{made['heldout']} held out), {made['source']}",
        highlight=False,
    )
    mined = report["negatives"]
    out.print(
        f"hard negatives: {mined['kept']} kept of {mined['candidates_seen']} seen, dropped {mined['dropped']}; "
        f"thresholds: {mined['thresholds']}",
        highlight=False,
    )
    for name in ("dense", "cross_encoder", "visual"):
        if name in report:
            part = report[name]
            out.print(
                f"{name}: {part['steps']} steps in {part['seconds']:.0f} s, loss {part['loss_first_steps']} -> "
                f"{part['loss_last_steps']}, peak {part['peak_rss_mb']:.0f} MB; saved {part['saved']}",
                highlight=False,
            )
            for when in ("heldout_before", "heldout_after"):
                if part.get(when):
                    out.print(f"  {when}: {json.dumps(part[when])}", highlight=False)
    out.print(f"report: {report['out']}/report.json", highlight=False)
