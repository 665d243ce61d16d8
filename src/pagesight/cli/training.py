"""``pagesight train``: retrievers fine-tuned on the index's own pages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from pagesight.cli.common import (
    BaseUrlOption,
    DeviceOption,
    IndexOption,
    JsonOption,
    TrustOption,
    fail,
    open_index,
    out,
    progress_bar,
    request_options,
)
from pagesight.errors import PagesightError
from pagesight.train.options import TrainOptions

app = typer.Typer()


@app.command()
@request_options(TrainOptions, into="options")
def train(
    index: IndexOption,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the queries, models and report.")],
    reader: Annotated[
        str | None,
        typer.Option(help="Write the queries with this reader (openai, transformers) shown each tile image."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="The reader's model.")] = None,
    base_url: BaseUrlOption = None,
    device: DeviceOption = "auto",
    trust_remote_code: TrustOption = False,
    as_json: JsonOption = False,
    *,
    options: TrainOptions,
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
    try:
        chosen_reader = None
        if reader is not None:
            from pagesight.answer.base import READERS, make_reader
            from pagesight.registry import lent

            settings = {"model": model, "base_url": base_url} if reader == "openai" else {"model": model}
            settings.update(lent(READERS.load(reader), trust_remote_code=trust_remote_code))
            chosen_reader = make_reader(reader, **settings)
        config = TrainConfig.of(options, chosen_reader)
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
