"""An evaluation dataset: a folder in the BEIR layout, with page documents instead of text.

    DATASET/
      pdfs/ (or documents/, pages/, images/, corpus/)   anything `pagesight ingest` accepts
      queries.jsonl     {"_id": "q0", "text": "...", "doc_ids"?: ["report"], "options"?: ["...", ...],
                        "image"?: "photos/q0.jpg"} per line; doc_ids: the documents the question is
                        asked of (default: those of its relevant pages); options: a multiple-choice
                        question's options, lettered A, B, ... in this order; image: a picture the
                        question is about (EVQA, InfoSeek, CRAG-MM), a path in the dataset folder,
                        searched with the question and shown to a model reader
      qrels.tsv         header "query-id corpus-id score", tab-separated; graded scores allowed
      answers.jsonl     optional: {"_id": "q0", "answer": "..." | ["...", ...], "aliases"?: [...],
                        "format"?: "number" | ...}; several answers (a list, or aliases) are each
                        right; a multiple-choice answer is its letter, or its option's text

A corpus id names a page (``<document id>_<page>``, pages from 1) or a whole document (its id,
the file stem); the harness tells which from the index.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from pagesight.errors import InputError
from pagesight.eval.answers import LETTERS, normalize
from pagesight.service import open_image

DOCUMENT_FOLDERS = ("pdfs", "documents", "pages", "images", "corpus")


@dataclass
class Dataset:
    root: Path
    documents: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    answers: dict[str, dict] = field(default_factory=dict)
    doc_ids: dict[str, list[str]] = field(default_factory=dict)  # queries.jsonl's own "doc_ids"
    options: dict[str, list[str]] = field(default_factory=dict)  # multiple-choice questions' options
    images: dict[str, Path] = field(default_factory=dict)  # the pictures questions are about

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
        numbered = numbered_jsonl(root / "queries.jsonl", ("_id", "text"))
        rows = [row for _, row in numbered]
        queries = {row["_id"]: row["text"] for row in rows}
        doc_ids, options = {}, {}
        images = {
            row["_id"]: _image(root, row["image"], f"{root / 'queries.jsonl'}:{number}")
            for number, row in numbered
            if "image" in row
        }
        for row in rows:
            for key, found, least in (("doc_ids", doc_ids, 1), ("options", options, 2)):
                if key in row:
                    given = row[key]
                    if not _strings(given, least) or (key == "options" and len(given) > 26):
                        what = "a list of ids" if key == "doc_ids" else "a list of 2 to 26 strings"
                        raise InputError(
                            f"{root / 'queries.jsonl'}: query {row['_id']}: {key} must be {what}"
                        )
                    found[row["_id"]] = given
        qrels = read_qrels(root / "qrels.tsv")
        unknown = sorted(set(qrels) - set(queries))
        if unknown:
            raise InputError(f"{root / 'qrels.tsv'}: judgements for unknown queries {', '.join(unknown[:5])}")
        answers = {}
        if (root / "answers.jsonl").exists():
            answers = {row["_id"]: row for row in read_jsonl(root / "answers.jsonl", ("_id", "answer"))}
        data = cls(root, documents, queries, qrels, answers, doc_ids, options, images)
        for qid in answers:
            data.references(qid)  # a malformed answer or an unknown option is refused here
        return data

    def image(self, qid: str) -> Image.Image | None:
        """The picture question ``qid`` is about, read now (None when it has none)."""
        return open_image(self.images[qid], str(self.images[qid])) if qid in self.images else None

    def references(self, qid: str) -> list[str]:
        """The right answers to question ``qid``: its answer (or answers) and aliases; for a
        multiple-choice question, the letter of its option."""
        row, where = self.answers[qid], f"{self.root / 'answers.jsonl'}: answer {qid}"
        given, aliases = row["answer"], row.get("aliases", [])
        given = given if isinstance(given, list) else [given]
        if not (_strings(given, 1) and _strings(aliases, 0)):
            raise InputError(f"{where}: answer and aliases must be strings (answer: one or a list)")
        given = given + aliases
        if qid not in self.options:
            return given
        options = self.options[qid]
        chosen = {_letter(text, options) for text in given}
        if None in chosen or len(chosen) != 1:
            raise InputError(
                f"{where}: a multiple-choice answer must be one letter of {LETTERS[: len(options)]} "
                "or the text of its option"
            )
        return list(chosen)

    def documents_of(self, qid: str, unit: str) -> list[str]:
        """The documents a question is asked of: its own ``doc_ids``, else those of its relevant
        corpus ids (``<document>_<page>`` when ``unit`` is 'page', documents themselves otherwise)."""
        if qid in self.doc_ids:
            return self.doc_ids[qid]
        judged = [corpus_id for corpus_id, grade in self.qrels.get(qid, {}).items() if grade > 0]
        if unit == "page":
            judged = [corpus_id.rpartition("_")[0] or corpus_id for corpus_id in judged]
        return list(dict.fromkeys(judged))


def _image(root: Path, given, where: str) -> Path:
    """A query's ``image``: a file in the dataset folder (read when its question is asked);
    ``InputError`` naming ``where`` (file:line) otherwise."""
    if not isinstance(given, str) or not given:
        raise InputError(f"{where}: image must be a path in the dataset folder, got {given!r}")
    path = root / given
    if not path.is_file():
        raise InputError(f"{where}: image '{given}': no such file in {root}")
    return path


def _letter(text: str, options: list[str]) -> str | None:
    """The letter an answer names: itself ('B', '(B)', 'B.') or its option's text."""
    letter = text.strip().strip("()").rstrip(".").upper()
    if letter in LETTERS[: len(options)] and len(letter) == 1:
        return letter
    return next(
        (LETTERS[n] for n, option in enumerate(options) if normalize(option) == normalize(text)), None
    )


def _strings(value, least: int) -> bool:
    return isinstance(value, list) and len(value) >= least and all(isinstance(v, str) for v in value)


def read_jsonl(path: Path, required: tuple[str, ...]) -> list[dict]:
    return [row for _, row in numbered_jsonl(path, required)]


def numbered_jsonl(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    """Each row of a JSON-lines file with its line number (blank lines skipped); ``InputError``
    naming file:line for a row that is not JSON or lacks one of ``required``."""
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
            rows.append((number, row))
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
