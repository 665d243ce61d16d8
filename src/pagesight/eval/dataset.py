"""An evaluation dataset: a folder in the BEIR layout, with page documents instead of text.

    DATASET/
      pdfs/ (or documents/, pages/, images/, corpus/)   anything `pagesight ingest` accepts
      queries.jsonl     {"_id": "q0", "text": "...", "doc_ids"?: ["report"]} per line; doc_ids: the
                        documents the question is asked of (default: those of its relevant pages)
      qrels.tsv         header "query-id corpus-id score", tab-separated; graded scores allowed
      answers.jsonl     optional: {"_id": "q0", "answer": "...", "format"?: "number" | ...}

A corpus id names a page (``<document id>_<page>``, pages from 1) or a whole document (its id,
the file stem); the harness tells which from the index.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from pagesight.errors import InputError

DOCUMENT_FOLDERS = ("pdfs", "documents", "pages", "images", "corpus")


@dataclass
class Dataset:
    root: Path
    documents: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    answers: dict[str, dict] = field(default_factory=dict)
    doc_ids: dict[str, list[str]] = field(default_factory=dict)  # queries.jsonl's own "doc_ids"

    @property
    def name(self) -> str:
        return self.root.resolve().name

    @classmethod
    def load(cls, root: str | Path) -> Dataset:
        root = Path(root)
        if not root.is_dir():
            raise InputError(f"{root}: no such dataset folder")
        documents = next((root / name for name in DOCUMENT_FOLDERS if (root / name).is_dir()), None)
        if documents is None:
            raise InputError(f"{root}: no documents folder (one of {', '.join(DOCUMENT_FOLDERS)})")
        rows = read_jsonl(root / "queries.jsonl", ("_id", "text"))
        queries = {row["_id"]: row["text"] for row in rows}
        doc_ids = {}
        for row in rows:
            if "doc_ids" in row:
                given = row["doc_ids"]
                if not (isinstance(given, list) and given and all(isinstance(d, str) for d in given)):
                    raise InputError(
                        f"{root / 'queries.jsonl'}: query {row['_id']}: doc_ids must be a list of ids"
                    )
                doc_ids[row["_id"]] = given
        qrels = read_qrels(root / "qrels.tsv")
        unknown = sorted(set(qrels) - set(queries))
        if unknown:
            raise InputError(f"{root / 'qrels.tsv'}: judgements for unknown queries {', '.join(unknown[:5])}")
        answers = {}
        if (root / "answers.jsonl").exists():
            answers = {row["_id"]: row for row in read_jsonl(root / "answers.jsonl", ("_id", "answer"))}
        return cls(root, documents, queries, qrels, answers, doc_ids)

    def documents_of(self, qid: str, unit: str) -> list[str]:
        """The documents a question is asked of: its own ``doc_ids``, else those of its relevant
        corpus ids (``<document>_<page>`` when ``unit`` is 'page', documents themselves otherwise)."""
        if qid in self.doc_ids:
            return self.doc_ids[qid]
        judged = [corpus_id for corpus_id, grade in self.qrels.get(qid, {}).items() if grade > 0]
        if unit == "page":
            judged = [corpus_id.rpartition("_")[0] or corpus_id for corpus_id in judged]
        return list(dict.fromkeys(judged))


def read_jsonl(path: Path, required: tuple[str, ...]) -> list[dict]:
    if not path.is_file():
        raise InputError(f"{path}: missing")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{number}: not JSON ({exc.msg})") from None
            missing = [key for key in required if key not in row]
            if missing:
                raise InputError(f"{path}:{number}: missing {', '.join(missing)}")
            if "_id" in row:
                row["_id"] = str(row["_id"])
            rows.append(row)
    return rows


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.is_file():
        raise InputError(f"{path}: missing")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), 1):
            if not row or (number == 1 and row[:2] == ["query-id", "corpus-id"]):
                continue
            if len(row) != 3:
                raise InputError(f"{path}:{number}: expected query-id, corpus-id, score")
            try:
                score = int(float(row[2]))
            except ValueError:
                raise InputError(f"{path}:{number}: score '{row[2]}' is not a number") from None
            qrels.setdefault(row[0], {})[row[1]] = score
    if not qrels:
        raise InputError(f"{path}: no judgements")
    return qrels
