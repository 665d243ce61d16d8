"""Runs in the TREC format (``qid Q0 docid rank score tag``), so any two can be compared later."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pagesight.errors import InputError

ScoredRun = Mapping[str, Sequence[tuple[str, float]]]


def write_trec(path: Path, run: ScoredRun, tag: str) -> None:
    if any(char.isspace() for char in tag):
        raise ValueError(f"run tag '{tag}' must not contain spaces")
    lines = []
    for qid, ranked in run.items():
        for rank, (doc, score) in enumerate(ranked, 1):
            lines.append(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    tmp.replace(path)


def read_trec(path: Path) -> tuple[dict[str, list[tuple[str, float]]], str]:
    """The run (each query's list in rank order) and its tag."""
    found: dict[str, list[tuple[int, str, float]]] = {}
    tag = ""
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 6:
                raise InputError(f"{path}:{number}: expected 'qid Q0 docid rank score tag'")
            qid, _, doc, rank, score, tag = fields
            try:
                found.setdefault(qid, []).append((int(rank), doc, float(score)))
            except ValueError:
                raise InputError(f"{path}:{number}: rank and score must be numbers") from None
    return {qid: [(doc, score) for _, doc, score in sorted(rows)] for qid, rows in found.items()}, tag
