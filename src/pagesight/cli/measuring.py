"""``pagesight import-dataset`` and ``bench``: a public dataset in eval's layout, and the speed, size
and memory of an index, measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from pagesight.cli.common import err, fail, values
from pagesight.errors import PagesightError
from pagesight.eval.typeset import SEED
from pagesight.settings import Settings

app = typer.Typer()


@app.command("import-dataset")
def import_dataset(
    source: Annotated[
        Path,
        typer.Argument(
            help="ViDoRe/MTEB-style tables (Parquet or JSONL), a BEIR folder, or TAT-QA's JSON file."
        ),
    ],
    out: Annotated[Path, typer.Argument(help="New dataset folder for `pagesight eval`.")],
    split: Annotated[str, typer.Option(help="Split to take where the source has several.")] = "test",
    language: Annotated[
        list[str] | None,
        typer.Option(
            help="Keep only the questions in this language, as the queries' language column names it "
            "(ViDoRe V3: english, french, ...), with their judgements, boxes and answers. Repeatable."
        ),
    ] = None,
    seed: Annotated[
        int,
        typer.Option(
            help="TAT-QA: the seed of the pages' looks (page size, margins, fonts, sizes, rules, "
            "column widths); the same seed gives the same PDFs."
        ),
    ] = SEED,
) -> None:
    """Convert a public dataset into the layout eval reads.

    ViDoRe V3's tables keep their questions' fields (for eval --by), answers, gold boxes, page
    transcriptions (for eval --text-from dataset) and documents' metadata (for --where). BEIR's
    passages and TAT-QA's contexts (a table and its paragraphs) are typeset as PDF pages; TAT-QA's
    questions keep their answer type, source, scale and derivation, and eval --answers scores
    them with TAT-QA's own exact match and F1.
    """
    from pagesight.eval.importers import import_dataset as convert

    try:
        counts = convert(
            source, out, split=split, languages=values(language, str, "--language") or (), seed=seed
        )
    except PagesightError as exc:
        fail(str(exc))
    # corpus items, queries, judgements, answers; from tables also boxes (and those of no area
    # dropped) and transcriptions
    err.print(f"{out}: " + ", ".join(f"{name} {n}" for name, n in counts.items()), highlight=False)


@app.command()
def bench(
    paths: Annotated[list[Path], typer.Argument(help="Files and folders to ingest for the benchmark.")],
    index: Annotated[
        Path | None,
        typer.Option("--index", "-i", help="Keep the benchmark index here (new; default: temporary)."),
    ] = None,
    queries: Annotated[
        Path | None,
        typer.Option(help="queries.jsonl to time (default: 100 six-word spans of the indexed text)."),
    ] = None,
    dense: Annotated[bool, typer.Option(help="Include dense vectors (MiniLM).")] = True,
    scale: Annotated[
        list[int] | None,
        typer.Option(help="Also time dense search over this many random vectors. Repeatable."),
    ] = None,
    max_pages: Annotated[int, typer.Option(help="Pages timed stage by stage.")] = 100,
    ocr_pages: Annotated[int, typer.Option(help="Of those, pages also OCRed.")] = 5,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Reader processes (default: one per core).")] = 0,
) -> None:
    """Measure ingestion, search latency, size and memory.

    Ingestion per stage and end to end; prints JSON.
    """
    from pagesight import bench as benchmark

    if index is not None and index.exists() and any(index.iterdir()):
        fail(f"{index}: exists and is not empty; the benchmark needs a new index")
    asked = None
    if queries is not None:
        try:
            from pagesight.eval.dataset import read_jsonl

            asked = [row["text"] for row in read_jsonl(queries, ("text",))]
        except PagesightError as exc:
            fail(str(exc))
    settings = Settings() if dense else Settings(dense_model=None)
    result = benchmark.run(
        paths, settings, index_dir=index, queries=asked, scale_sizes=scale or (), max_pages=max_pages,
        ocr_pages=ocr_pages, jobs=jobs or None,
    )  # fmt: skip
    print(json.dumps(result, indent=1))
