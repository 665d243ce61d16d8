"""An evaluation dataset: a folder in the BEIR layout, with page documents instead of text.

    DATASET/
      pdfs/ (or documents/, pages/, images/, corpus/)   anything `pagesight ingest` accepts, with
                        its sidecar fields for ``where`` filters (a ``pagesight.meta.csv``,
                        ``ingest.extract.folder_fields``: ViDoRe's doc_id, doc_type, doc_year, ...)
      queries.jsonl     {"_id": "q0", "text": "...", "doc_ids"?: ["report"], "options"?: ["...", ...],
                        "fields"?: {"language": "english", "query_types": ["numerical"], ...}} per
                        line; doc_ids: the documents the question is asked of (default: those of
                        its relevant pages); options: a multiple-choice question's options, lettered
                        A, B, ... in this order; fields: what ``eval --by`` breaks the metrics down
                        by, names to a string, a number or a list of strings (the question counts
                        under each); ``pages``, its number of relevant pages, is always one;
                        "image"?: "photos/q0.jpg", a picture the question is about (EVQA, InfoSeek,
                        CRAG-MM), a path in the dataset folder, searched with the question and shown
                        to a model reader
      qrels.tsv         header "query-id corpus-id score", tab-separated; graded scores allowed
      answers.jsonl     optional: {"_id": "q0", "answer": "..." | ["...", ...], "aliases"?: [...],
                        "format"?: "number" | ...}; several answers (a list, or aliases) are each
                        right; a multiple-choice answer is its letter, or its option's text
      unanswerable.jsonl optional: {"_id": "u0", "text": "...", "doc_id"?: "report" | "doc_ids"?:
                        [...]} per line: questions about the documents that none of their pages
                        answers (MMLongBench-Doc's "Not answerable"); ``eval --answers`` asks them
                        too and counts how often the reader declines them (``eval.grid``)
      boxes.jsonl       optional: {"_id": "q0", "corpus_id": "<corpus id>", "annotator": 0,
                        "box": [x0, y0, x1, y1]} per line, one gold box each: where on a relevant
                        page (judged in qrels.tsv) the answer lies, in pixels of that page's image
                        as the folder stores it, or PDF points on a PDF's page (x0 < x1, y0 < y1),
                        by annotator (a whole number); answers' cited boxes are scored against
                        them (``eval.grounding``)
      texts.jsonl       optional: {"corpus_id": "<corpus id>", "text": "..."} per line: the pages'
                        own transcriptions, which ``eval --text-from dataset`` indexes instead of
                        their text layer and OCR (``text.transcripts``)
      dataset.json      optional: what the dataset declares of itself: {"answer_metric": "tatqa"
                        (its own answer metric, ``answers.DATASET_METRICS``, scored beside the
                        others from answers.jsonl's rows), "by": ["answer_type", ...] (fields its
                        scores are always broken down by), ...}

A corpus id names a page (``<document id>_<page>``, pages from 1) or a whole document (its id,
the file stem); the harness tells which from the index.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from pagesight.errors import InputError
from pagesight.eval.answers import DATASET_METRICS, LETTERS, normalize
from pagesight.frontends import open_image
from pagesight.jsonl import numbered
from pagesight.text.transcripts import read_transcripts

DOCUMENT_FOLDERS = ("pdfs", "documents", "pages", "images", "corpus")
TEXTS, BOXES, UNANSWERABLE = "texts.jsonl", "boxes.jsonl", "unanswerable.jsonl"
DECLARATION = "dataset.json"
PAGES = "pages"  # the field every question has: its number of relevant pages, in PAGE_BUCKETS
PAGE_BUCKETS = ("0", "1", "2", "3-5", "6+")
Boxes = dict[str, dict[str, dict[int, list[tuple[float, float, float, float]]]]]


@dataclass
class Dataset:
    root: Path
    documents: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    answers: dict[str, dict] = field(default_factory=dict)
    doc_ids: dict[str, list[str]] = field(default_factory=dict)  # queries.jsonl's own "doc_ids"
    options: dict[str, list[str]] = field(default_factory=dict)  # multiple-choice questions' options
    fields: dict[str, dict] = field(default_factory=dict)  # queries.jsonl's own "fields"
    boxes: Boxes = field(default_factory=dict)  # query -> corpus id -> annotator -> its gold boxes
    texts: Mapping[str, str] = field(default_factory=dict)  # corpus id -> its transcription
    images: dict[str, Path] = field(default_factory=dict)  # the pictures questions are about
    # questions no page answers: id -> {"text": ..., "doc_ids": [...] (the documents asked of)}
    unanswerable: dict[str, dict] = field(default_factory=dict)
    answer_metric: str | None = None  # dataset.json's: the dataset's own answer metric
    report_by: tuple[str, ...] = ()  # dataset.json's: the fields its scores are broken down by

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
        lines = numbered_jsonl(root / "queries.jsonl", ("_id", "text"))
        rows = [row for _, row in lines]
        queries = {row["_id"]: row["text"] for row in rows}
        doc_ids, options, fields = {}, {}, {}
        images = {
            row["_id"]: _image(root, row["image"], f"{root / 'queries.jsonl'}:{number}")
            for number, row in lines
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
            if "fields" in row:
                fields[row["_id"]] = _fields(row["fields"], f"{root / 'queries.jsonl'}: query {row['_id']}")
        qrels = read_qrels(root / "qrels.tsv")
        unknown = sorted(set(qrels) - set(queries))
        if unknown:
            raise InputError(f"{root / 'qrels.tsv'}: judgements for unknown queries {', '.join(unknown[:5])}")
        answers = {}
        if (root / "answers.jsonl").exists():
            answers = {row["_id"]: row for row in read_jsonl(root / "answers.jsonl", ("_id", "answer"))}
        boxes = read_boxes(root / BOXES, qrels) if (root / BOXES).exists() else {}
        texts = read_transcripts(root / TEXTS) if (root / TEXTS).exists() else {}
        unanswerable = read_unanswerable(root / UNANSWERABLE) if (root / UNANSWERABLE).exists() else {}
        declared = read_declaration(root / DECLARATION) if (root / DECLARATION).exists() else {}
        data = cls(
            root,
            documents,
            queries,
            qrels,
            answers,
            doc_ids,
            options,
            fields,
            boxes,
            texts,
            images,
            unanswerable,
            declared.get("answer_metric"),
            tuple(declared.get("by", ())),
        )
        for name in data.report_by:
            data.groups(name)  # a field no question has is refused here
        for qid in answers:
            data.references(qid)  # a malformed answer or an unknown option is refused here
        return data

    def field_names(self) -> list[str]:
        """The fields ``eval --by`` can break the metrics down by: the questions' own and ``pages``."""
        return sorted({name for given in self.fields.values() for name in given} | {PAGES})

    def groups(self, name: str) -> dict[str, list[str]]:
        """The questions under each value of field ``name``, the values in order (a list field
        counts a question under each of its values; a question without the field is in no group);
        ``pages``: by how many relevant pages a question has (``PAGE_BUCKETS``)."""
        if name not in self.field_names():
            raise InputError(
                f"{self.root}: no field '{name}' to break the metrics down by "
                f"(this dataset's: {', '.join(self.field_names())})"
            )
        found: dict[str, list[str]] = {}
        for qid in self.queries:
            if name == PAGES:
                given = [_bucket(sum(grade > 0 for grade in self.qrels.get(qid, {}).values()))]
            else:
                given = self.fields.get(qid, {}).get(name, [])
            for value in dict.fromkeys(given if isinstance(given, list) else [given]):
                found.setdefault(str(value), []).append(qid)
        order = PAGE_BUCKETS.index if name == PAGES else str
        return {value: found[value] for value in sorted(found, key=order)}

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


def read_declaration(path: Path) -> dict:
    """dataset.json: an object whose ``answer_metric`` (when given) names one of
    ``DATASET_METRICS`` and whose ``by`` (when given) is a list of field names."""
    try:
        declared = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None
    metric = declared.get("answer_metric") if isinstance(declared, dict) else None
    if not isinstance(declared, dict) or (metric is not None and metric not in DATASET_METRICS):
        raise InputError(
            f"{path}: expected an object whose answer_metric is one of {', '.join(DATASET_METRICS)}"
        )
    if not _strings(declared.get("by", []), 0):
        raise InputError(f"{path}: by must be a list of field names")
    return declared


def read_unanswerable(path: Path) -> dict[str, dict]:
    """``unanswerable.jsonl``: each question's text and the documents it is asked of (its
    ``doc_id``, or ``doc_ids``; none: the whole corpus)."""
    found = {}
    for number, row in numbered_jsonl(path, ("_id", "text")):
        given = row.get("doc_ids", [row["doc_id"]] if "doc_id" in row else [])
        if not isinstance(row["text"], str) or not row["text"].strip() or not _strings(given, 0):
            raise InputError(
                f"{path}:{number}: a question needs its text, and doc_id a string or doc_ids a list"
            )
        found[row["_id"]] = {"text": row["text"], "doc_ids": list(given)}
    return found


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


def finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def field_value(value) -> bool:
    """Whether ``value`` can be a question's field: a string, a number or a list of strings."""
    return isinstance(value, str) or finite_number(value) or _strings(value, 0)


def _fields(given, where: str) -> dict:
    """A question's ``fields``, checked: names to a string, a number or a list of strings."""
    if not isinstance(given, dict) or not all(field_value(value) for value in given.values()):
        raise InputError(
            f"{where}: fields must be an object of names to strings, numbers or lists of strings"
        )
    if PAGES in given:
        raise InputError(
            f"{where}: the field '{PAGES}' is the number of relevant pages; name yours otherwise"
        )
    return given


def _bucket(n_pages: int) -> str:
    return str(n_pages) if n_pages < 3 else "3-5" if n_pages <= 5 else "6+"


def read_boxes(path: Path, qrels: dict[str, dict[str, int]]) -> Boxes:
    """The gold boxes of ``path`` (boxes.jsonl): query -> corpus id -> annotator -> boxes; a line
    that is not a box on a page its query judges is refused, naming ``path:line``."""
    boxes: Boxes = {}
    for number, row in numbered(path):
        qid, corpus_id, annotator, box = (row.get(key) for key in ("_id", "corpus_id", "annotator", "box"))
        if (
            not all(
                isinstance(value, (str, int)) and not isinstance(value, bool) for value in (qid, corpus_id)
            )
            or not (isinstance(annotator, int) and not isinstance(annotator, bool))
            or not (isinstance(box, list) and len(box) == 4 and all(finite_number(value) for value in box))
            or not (box[0] < box[2] and box[1] < box[3])
        ):
            raise InputError(
                f'{path}:{number}: expected {{"_id", "corpus_id", "annotator": a whole number, '
                '"box": [x0, y0, x1, y1] with x0 < x1 and y0 < y1}'
            )
        qid, corpus_id = str(qid), str(corpus_id)
        if corpus_id not in qrels.get(qid, {}):
            raise InputError(f"{path}:{number}: qrels.tsv judges no corpus id {corpus_id} for query {qid}")
        pages = boxes.setdefault(qid, {}).setdefault(corpus_id, {})
        pages.setdefault(annotator, []).append(tuple(float(value) for value in box))
    return boxes


def read_jsonl(path: Path, required: tuple[str, ...]) -> list[dict]:
    return [row for _, row in numbered_jsonl(path, required)]


def numbered_jsonl(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    """Each row of a JSON-lines file with its line number; ``InputError`` naming file:line for a
    row that lacks one of ``required`` (``jsonl.numbered``: or is not JSON)."""
    rows = []
    for number, row in numbered(path):
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
