"""Synthetic queries written as evaluation datasets (``eval/dataset.py``'s layout), so
``pagesight eval DATASET --index INDEX`` measures any index on them.

    OUT/queries/     every synthetic query: documents/ (links to the index's source files, which
                     the index already holds unchanged), queries.jsonl (with each query's source
                     tile, how it was made and its split), qrels.tsv (its page), answers.jsonl
    OUT/heldout/     the same for the held-out split alone: the test set of the training run
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from pagesight.train.queries import SyntheticQuery


def write(
    root: Path, queries: Sequence[SyntheticQuery], splits: Sequence[str], sources: dict[str, Path]
) -> Path:
    """The dataset of ``queries`` (with their ``splits``) at ``root``; ``sources`` maps the ids of
    the documents they come from to their files, linked into ``root/documents``."""
    root.mkdir(parents=True, exist_ok=True)
    documents = root / "documents"
    documents.mkdir(exist_ok=True)
    for doc_id in sorted({q.doc_id for q in queries}):
        source = sources.get(doc_id)
        link = documents / source.name if source is not None else None
        if link is not None and not link.exists():
            os.symlink(source.resolve(), link)
    with (root / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for n, (query, split) in enumerate(zip(queries, splits)):
            handle.write(json.dumps({"_id": f"s{n}", **query.to_dict(), "split": split}) + "\n")
    with (root / "qrels.tsv").open("w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for n, query in enumerate(queries):
            handle.write(f"s{n}\t{query.doc_id}_{query.page}\t1\n")
    with (root / "answers.jsonl").open("w", encoding="utf-8") as handle:
        for n, query in enumerate(queries):
            if query.answer:
                handle.write(json.dumps({"_id": f"s{n}", "answer": query.answer}) + "\n")
    return root


def read(root: Path) -> tuple[list[SyntheticQuery], list[str]]:
    """The queries and splits ``write`` saved at ``root``."""
    queries, splits = [], []
    with (root / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            splits.append(row.pop("split"))
            row.pop("_id")
            queries.append(SyntheticQuery(**row))
    return queries, splits
