"""What ``--inputs auto`` saves: the image tokens of the tiles a model reader is given, with images
everywhere against auto (issue 53).

    python -m benchmarks.reader_inputs ../shared/data/irpapers --index DIR [-k 5] [--ink]
    python -m benchmarks.reader_inputs --tiny         # two typeset tables, with --ink

The dataset's documents are ingested into DIR with layout regions (``ingest --layout``, lexical
only) unless DIR holds an index already (made with ``--layout``: the script refuses one without).
Every question is searched (the index's default search, ``k`` tiles) and its context built as
``pagesight ask`` builds it; each tile is then given as its image or, where ``answer.inputs``
says its text covers it, as its text. Counted per question and in all: the image tokens of the
context (the ``qwen2-vl`` accounting, ``answer.context``) with images everywhere and with auto, the
tiles given as text, why the others kept their image (a table or figure on it, too few words), and
the characters of the text given instead, with its tokens estimated at ``CHARS_PER_TOKEN`` (no
tokenizer of a reader can be loaded here). The same is counted over every tile of the index.

With ``--ink`` the rule an index without layout regions uses (ink outside the text lines, which
renders each tile) is run on the same retrieved bands (region units left out) and compared with
the layout detector's tables and figures: how many tiles each sends as text, and where they
disagree.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

from benchmarks import harness
from pagesight import Index
from pagesight.answer.context import build_context, context_tokens
from pagesight.answer.inputs import MAX_UNCOVERED_INK, uncovered_ink, why_image
from pagesight.answer.prompts import numbered_lines
from pagesight.eval.dataset import Dataset
from pagesight.records import Hit

CHARS_PER_TOKEN = 4.0  # English prose in a byte-level BPE of about 150k tokens (Qwen2's)


def open_index(dataset: Dataset, folder: Path) -> Index:
    """The dataset's index with layout regions, ingested when ``folder`` holds none."""
    if (folder / "catalog.sqlite").exists():
        index = Index.open(folder)
        if not index.settings.layout:
            raise SystemExit(f"{folder}: made without --layout; give another folder")
        return index
    index = Index.open(folder, settings={"layout": True, "dense_model": None})
    report = index.add([dataset.documents])
    for failed in report.failed:
        print(failed, file=sys.stderr)
    return index


def tile_row(item) -> dict:
    """One tile: its image tokens, the text it would go as, and why it keeps its image (None: it
    goes as text)."""
    return {
        "tokens": context_tokens([item]),
        "chars": len(numbered_lines(item)),
        "why": why_image(item),
        "unit": item.hit.region is not None,  # a table or figure searched as its own unit
    }


def summary(rows: list[dict]) -> dict:
    """Image tokens with images everywhere and with auto, over ``rows`` (one per tile)."""
    everywhere = sum(row["tokens"] for row in rows)
    kept = sum(row["tokens"] for row in rows if row["why"] is not None)
    text_chars = sum(row["chars"] for row in rows if row["why"] is None)
    text_tokens = round(text_chars / CHARS_PER_TOKEN)
    return {
        "tiles": len(rows),
        "region_units": sum(row["unit"] for row in rows),
        "as_text": sum(row["why"] is None for row in rows),
        "image_because": dict(Counter(row["why"] for row in rows if row["why"] is not None)),
        "image_tokens_everywhere": everywhere,
        "image_tokens_auto": kept,
        "image_tokens_saved": round(1 - kept / everywhere, 4) if everywhere else 0.0,
        "text_chars_instead": text_chars,
        "text_tokens_instead_estimated": text_tokens,
        "all_tokens_saved_estimated": round(1 - (kept + text_tokens) / everywhere, 4) if everywhere else 0.0,
    }


def per_question(index: Index, dataset: Dataset, k: int, ink: bool) -> tuple[dict, dict | None]:
    """The retrieved contexts' counts, in all and per question (medians), and the ink rule's."""
    rows, contexts, compared = [], [], Counter()
    for question in dataset.queries.values():
        hits = index.search(question, k=k)
        context = build_context(index, hits)
        tiles = [tile_row(item) for item in context]
        rows += tiles
        contexts.append(summary(tiles))
        if ink:
            for item, row in zip(context, tiles):
                if row["unit"]:
                    continue  # a table or figure unit is its region's crop: the layout's own
                by_layout = "image" if row["why"] == "region" else "text"
                by_ink = "image" if uncovered_ink(item) > MAX_UNCOVERED_INK else "text"
                compared[f"layout {by_layout}, ink {by_ink}"] += 1
    medians = {
        key: statistics.median(c[key] for c in contexts)
        for key in ("image_tokens_everywhere", "image_tokens_auto", "as_text")
    }
    return {**summary(rows), "questions": len(contexts), "median_per_question": medians}, (
        dict(compared) if ink else None
    )


def every_tile(index: Index) -> dict:
    """The counts over every tile (band) of the index, as if each were given to a reader."""
    rows = []
    catalog = index.catalog
    for doc in index.document_list():
        for page in range(1, doc["pages"] + 1):
            hits = [
                Hit(doc["id"], page, tile.idx, 0.0, {}, "", [], tile.page_size, tile.box)
                for tile in catalog.page_tiles(doc["id"], page)
            ]
            rows += [tile_row(item) for item in build_context(index, hits)]
    return summary(rows)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("dataset", type=Path, nargs="?", help="an evaluation dataset")
    parser.add_argument("--index", type=Path, help="its index, with layout regions (made when empty)")
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--ink", action="store_true", help="also compare the ink rule with the layout")
    args = harness.start(parser, argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            dataset, folder, args.ink, args.k = (
                harness.toy_dataset(Path(tmp) / "data", tables=2),
                Path(tmp) / "index",
                True,
                2,
            )
        elif args.dataset and args.index:
            dataset, folder = Dataset.load(args.dataset), args.index
        else:
            parser.error("a dataset and --index are needed (or --tiny)")
        with open_index(dataset, folder) as index:
            retrieved, compared = per_question(index, dataset, args.k, args.ink)
            result = {
                "dataset": dataset.name,
                "k": args.k,
                "retrieved": retrieved,
                "every_tile": every_tile(index),
            }
    if compared is not None:
        result["ink_against_layout"] = compared
    harness.finish(args, __spec__.name, result)


if __name__ == "__main__":
    main()
