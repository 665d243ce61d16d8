"""Bring datasets in other public layouts into the pagesight dataset layout (see dataset.py).

- **ViDoRe / MTEB-style page datasets** exported to local files: ``corpus``, ``queries`` and
  ``qrels`` tables, and an optional ``documents_metadata``, as Parquet (one file or a folder of
  shards, as the Hugging Face hub stores them: ViDoRe V3's ``corpus/test-*.parquet``, ...) or JSON
  lines, the corpus carrying page images (Hugging Face image cells ``{"bytes", "path"}``, base64
  strings or file paths). Each page becomes ``pages/<corpus id>.<format>``, its bytes as given, so
  pixel boxes on it stay right. What else the tables hold is kept (ViDoRe V3 has all of it):

  - the corpus's ``markdown``, a page's transcription: texts.jsonl;
  - its other columns (ViDoRe's ``doc_id``, ``page_number_in_doc``, from 0 as ViDoRe counts) with
    its document's row of ``documents_metadata`` (``file_name``, ``url``, ``doc_type``,
    ``doc_language``, ``doc_year``, ``visual_types``, ``license``; ``page_number``, the document's
    page count, as ``doc_pages``): the page image's fields for ``where`` filters, in
    ``pages/pagesight.meta.csv`` (``ingest.extract.folder_fields``); a list is joined by ", ", and
    a name of the catalog's own (``search.filters.FACTS``: ``language``, ...) gets ``doc_`` before it;
  - the queries' other columns holding a string, a number or a list of strings (ViDoRe V3's
    ``language``, ``query_types``, ``query_format``, ``content_type``, ``source_type``,
    ``query_generator``, ...): each question's ``fields``, as the file has them; its ``answer``
    (else its first ``raw_answers``), with the raw answers as aliases: answers.jsonl;
  - the qrels' ``content_type``: the question's ``modality`` field, the content types of its
    relevant pages together (ViDoRe's placeholder ``NOT_APPLICABLE`` left out); their
    ``bounding_boxes`` (``{annotator, x1, x2, y1, y2}`` in pixels of the page image): boxes.jsonl,
    a line a box, those of no area dropped and counted.

  ``languages`` keeps the questions in those languages (ViDoRe V3 asks each in six, as questions
  of their own) and drops the others' judgements, boxes and answers; the corpus stays whole.
- **BEIR folders**: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` and
  ``qrels/<split>.tsv``. Text passages have no pixels, so each one is typeset onto a page of its
  own (a PDF with a text layer), which is how text corpora enter a pixel-space index.

Corpus ids become file stems, so they must be usable as file names; others are refused by name.
The dataset is written into a folder beside ``out`` and moved there whole, so a failed import
leaves nothing behind.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import random
import re
import shutil
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from PIL import Image

from pagesight.errors import InputError
from pagesight.eval.dataset import BOXES, DECLARATION, PAGES, TEXTS, field_value, finite_number
from pagesight.eval.typeset import SEED, Block, Look, document, header_rows, unit_line
from pagesight.ingest.extract import FOLDER_FIELDS
from pagesight.jsonl import numbered
from pagesight.where import FACTS

ID_COLUMNS = ("corpus-id", "corpus_id", "_id", "id", "docid", "doc_id")
QUERY_ID_COLUMNS = ("query-id", "query_id", "_id", "id", "qid")
QUERY_TEXT_COLUMNS = ("query", "text", "question")
ANSWER_COLUMNS = ("answer", "raw_answers")
MODALITY = "modality"  # a question's field: the content types of its relevant pages
NOT_APPLICABLE = "N/A (If relevance score=0)"  # ViDoRe V3's content type of a page judged irrelevant
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
TATQA_FIELDS = ("answer_type", "answer_from", "scale", "derivation")  # kept as each question's fields


def import_dataset(
    source: Path, out: Path, split: str = "test", languages: Sequence[str] = (), seed: int = SEED
) -> dict:
    """Convert ``source`` (ViDoRe-style tables, a BEIR folder or TAT-QA's JSON file) into ``out``,
    keeping only the questions in ``languages`` when given, TAT-QA's pages typeset in looks drawn
    from ``seed``; returns counts."""
    source, out = Path(source), Path(out)
    tatqa = source.is_file() and source.suffix == ".json"
    if not (source.is_dir() or tatqa):
        raise InputError(f"{source}: no such folder (or TAT-QA's .json file)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out}: exists and is not empty")
    staging = out.with_name(f".{out.name}.{os.getpid()}.importing")
    staging.mkdir(parents=True)
    try:
        if tatqa:
            counts = _import_tatqa(source, staging, seed)
        elif (source / "corpus.jsonl").exists() and not _has_images(source / "corpus.jsonl"):
            counts = _import_beir(source, staging, split, languages)
        else:
            counts = _import_tables(source, staging, split, languages)
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return counts


# Tables (ViDoRe, MTEB) ---------------------------------------------------------------------------


def _table(source: Path, name: str, split: str, required: bool = True) -> Iterator[dict]:
    """Rows of the table ``name``: name.parquet, name/*.parquet (optionally under a split), name.jsonl;
    none when it is missing and not ``required``."""
    candidates = [
        source / f"{name}.parquet",
        source / f"{name}.jsonl",
        source / name / split,
        source / name,
    ]
    for path in candidates:
        if path.is_file() and path.suffix == ".jsonl":
            yield from _jsonl_rows(path)
            return
        if path.is_file():
            yield from _parquet_rows([path])
            return
        if path.is_dir():
            shards = sorted(path.glob("*.parquet"))
            if shards:
                yield from _parquet_rows(shards)
                return
            jsonl = sorted(path.glob("*.jsonl"))
            if jsonl:
                for shard in jsonl:
                    yield from _jsonl_rows(shard)
                return
    if required:
        raise InputError(f"{source}: no '{name}' table (.parquet, .jsonl or a folder of shards)")


def _parquet_rows(paths: list[Path]) -> Iterator[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("reading Parquet needs pyarrow: pip install 'pagesight[eval]'") from None
    for path in paths:
        table = pq.ParquetFile(path)
        for batch in table.iter_batches(batch_size=64):
            yield from batch.to_pylist()


def _jsonl_rows(path: Path) -> Iterator[dict]:
    return (row for _, row in numbered(path))


def _has_images(path: Path) -> bool:
    first = next(_jsonl_rows(path), {})
    return "image" in first


def _named(row: dict, names: tuple[str, ...], table: str) -> tuple[str, object]:
    """The first of the columns ``names`` that ``row`` has, and its value."""
    for name in names:
        if name in row and row[name] is not None:
            return name, row[name]
    raise InputError(f"{table} row has none of the columns {', '.join(names)}: {sorted(row)}")


def _column(row: dict, names: tuple[str, ...], table: str) -> object:
    return _named(row, names, table)[1]


def _safe_id(value: object, table: str) -> str:
    text = str(value)
    if not SAFE_ID.match(text):
        raise InputError(f"{table}: id '{text}' cannot be a file name")
    return text


def _sidecar(row: dict, skip: Iterable[str], renamed: dict[str, str] | None = None) -> dict:
    """A table row's cells as a page's ``where`` fields (see the module docstring)."""
    fields = {}
    for name, value in row.items():
        if name in skip or value is None or not field_value(value):
            continue
        name = (renamed or {}).get(name, name)
        fields[f"doc_{name}" if name in FACTS else name] = (
            ", ".join(value) if isinstance(value, list) else value
        )
    return fields


def _image_bytes(cell: object, source: Path, corpus_id: str) -> bytes:
    if isinstance(cell, dict):
        if cell.get("bytes"):
            return cell["bytes"]
        cell = cell.get("path")
    if isinstance(cell, bytes):
        return cell
    if isinstance(cell, str):
        path = source / cell
        if path.is_file():
            return path.read_bytes()
        try:
            return base64.b64decode(cell, validate=True)
        except ValueError:
            pass
    raise InputError(f"corpus item '{corpus_id}': image is neither bytes, base64 nor a file under {source}")


def _page_file(data: bytes, corpus_id: str) -> tuple[bytes, str]:
    """A corpus image's bytes and file suffix: as they are in a format pages are read in, else
    converted to PNG; an unreadable image is refused naming its corpus id."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            suffix = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "TIFF": ".tif"}.get(image.format)
            if suffix is not None:
                return data, suffix
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, "PNG")
            return buffer.getvalue(), ".png"
    except (OSError, Image.DecompressionBombError) as exc:
        raise InputError(f"corpus item '{corpus_id}': not a readable image ({exc})") from None


def _import_tables(source: Path, out: Path, split: str, languages: Sequence[str]) -> dict:
    pages = out / "pages"
    pages.mkdir(parents=True)
    documents = {
        str(row["doc_id"]): _sidecar(row, (), {"page_number": "doc_pages"})
        for row in _table(source, "documents_metadata", split, required=False)
        if row.get("doc_id") is not None
    }
    fields: dict[str, dict] = {}  # a page image's file name -> its fields
    texts: dict[str, str] = {}
    n_pages = 0
    for row in _table(source, "corpus", split):
        column, value = _named(row, ID_COLUMNS, "corpus")
        corpus_id = _safe_id(value, "corpus")
        data, suffix = _page_file(
            _image_bytes(_column(row, ("image",), "corpus"), source, corpus_id), corpus_id
        )
        (pages / f"{corpus_id}{suffix}").write_bytes(data)
        n_pages += 1
        if isinstance(row.get("markdown"), str):
            texts[corpus_id] = row["markdown"]
        page = {**documents.get(str(row.get("doc_id")), {}), **_sidecar(row, (column, "image", "markdown"))}
        if page:
            fields[f"{corpus_id}{suffix}"] = page
    queries, answers, dropped = _questions(_table(source, "queries", split), languages)
    qrels, boxes, degenerate = [], [], 0
    for row in _table(source, "qrels", split):
        qid = str(_column(row, QUERY_ID_COLUMNS, "qrels"))
        if qid in dropped:
            continue
        corpus_id = _safe_id(_column(row, ID_COLUMNS, "qrels"), "qrels")
        score = int(_column(row, ("score", "relevance", "label"), "qrels"))
        qrels.append((qid, corpus_id, score))
        kinds = row.get("content_type") or []
        kinds = [
            k
            for k in ([kinds] if isinstance(kinds, str) else kinds)
            if isinstance(k, str) and k != NOT_APPLICABLE
        ]
        if score > 0 and kinds and qid in queries:
            found = queries[qid].setdefault("fields", {}).setdefault(MODALITY, [])
            found += [kind for kind in kinds if kind not in found]
        for cell in row.get("bounding_boxes") or []:
            box = _box(cell, f"qrels: query {qid}, corpus id {corpus_id}")
            if box is None:
                degenerate += 1
            else:
                boxes.append({"_id": qid, "corpus_id": corpus_id, "annotator": box[0], "box": box[1]})
    if fields:
        _write_fields(pages / FOLDER_FIELDS, fields)
    counts = _write(out, queries, answers, qrels, n_pages)
    for name, rows in ((BOXES, boxes), (TEXTS, [{"corpus_id": k, "text": v} for k, v in texts.items()])):
        if rows:
            _write_jsonl(out / name, rows)
    return {**counts, "boxes": len(boxes), "degenerate_boxes": degenerate, "texts": len(texts)}


def _questions(rows: Iterable[dict], languages: Sequence[str]) -> tuple[dict, dict, set[str]]:
    """queries.jsonl's rows and answers.jsonl's by question id, and the ids of the questions left
    out for their language (a question without a ``language`` is left out when some are asked)."""
    queries, answers, dropped, seen = {}, {}, set(), set()
    for row in rows:
        qid = str(_column(row, QUERY_ID_COLUMNS, "queries"))
        language = row.get("language")
        seen.add(language)
        if languages and language not in languages:
            dropped.add(qid)
            continue
        text = str(_column(row, QUERY_TEXT_COLUMNS, "queries"))
        skip = {*QUERY_ID_COLUMNS, *QUERY_TEXT_COLUMNS, *ANSWER_COLUMNS, PAGES}
        fields = {name: value for name, value in row.items() if name not in skip and field_value(value)}
        queries[qid] = {"_id": qid, "text": text, **({"fields": fields} if fields else {})}
        raw = row.get("raw_answers") or []
        raw = [str(given).strip() for given in ([raw] if isinstance(raw, str) else raw) if given is not None]
        first = str(row.get("answer") or "").strip() or next((given for given in raw if given), "")
        if first:
            aliases = [given for given in dict.fromkeys(raw) if given and given != first]
            answers[qid] = {"_id": qid, "answer": first, **({"aliases": aliases} if aliases else {})}
    missing = [language for language in languages if language not in seen]
    if missing:
        named = sorted(str(language) for language in seen if language is not None)
        raise InputError(
            f"queries: no question in {', '.join(missing)} "
            f"({'the languages: ' + ', '.join(named) if named else 'the questions name no language'})"
        )
    return queries, answers, dropped


def _box(cell: object, where: str) -> tuple[int, list[float]] | None:
    """A ViDoRe bounding box ``{annotator, x1, x2, y1, y2}`` as (annotator, [x0, y0, x1, y1]);
    None when it has no area."""
    names = ("annotator", "x1", "y1", "x2", "y2")
    if not isinstance(cell, dict) or not all(finite_number(cell.get(name)) for name in names):
        raise InputError(f"{where}: a bounding box needs {', '.join(names)} as numbers, got {cell!r}")
    xs, ys = sorted((cell["x1"], cell["x2"])), sorted((cell["y1"], cell["y2"]))
    if xs[0] == xs[1] or ys[0] == ys[1]:
        return None
    return int(cell["annotator"]), [float(xs[0]), float(ys[0]), float(xs[1]), float(ys[1])]


def _write_fields(path: Path, fields: dict[str, dict]) -> None:
    """The pages' fields as ``pagesight.meta.csv``: a ``path`` column, then a column per field."""
    names = list(dict.fromkeys(name for row in fields.values() for name in row))
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, ["path", *names], lineterminator="\n")
        writer.writeheader()
        writer.writerows({"path": name, **row} for name, row in fields.items())


# BEIR --------------------------------------------------------------------------------------------


def _import_beir(source: Path, out: Path, split: str, languages: Sequence[str]) -> dict:
    documents = out / "documents"
    documents.mkdir(parents=True)
    n_pages = 0
    for row in _jsonl_rows(source / "corpus.jsonl"):
        corpus_id = _safe_id(_column(row, ID_COLUMNS, "corpus"), "corpus")
        title = [Block("heading", str(row["title"]))] if row.get("title") else []
        document(documents / f"{corpus_id}.pdf", [*title, Block("text", str(row.get("text", "")))])
        n_pages += 1
    queries, answers, dropped = _questions(_jsonl_rows(source / "queries.jsonl"), languages)
    qrels_path = source / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise InputError(f"{qrels_path}: missing (choose the split with --split)")
    with qrels_path.open(encoding="utf-8", newline="") as handle:
        rows = [row for row in csv.reader(handle, delimiter="\t") if row and row[0] != "query-id"]
    qrels = [(row[0], _safe_id(row[1], "qrels"), int(float(row[2]))) for row in rows if row[0] not in dropped]
    return _write(out, queries, answers, qrels, n_pages)


# TAT-QA ------------------------------------------------------------------------------------------


def _import_tatqa(source: Path, out: Path, seed: int) -> dict:
    """TAT-QA's contexts (a table and its paragraphs from an annual report), each typeset as a
    document of its own (``<table uid>.pdf``, one page unless it cannot fit when set down to
    ``typeset.SMALLEST``) in a look drawn from ``seed`` and its uid; every question judges every
    page of its context. Each question's ``answer_type``, ``answer_from``, ``scale`` ("none" when
    it has none) and ``derivation`` are its fields; its answer (a span as a string, a multi-span
    as the list of its spans, a figure as its string) goes to answers.jsonl with its scale and
    type, which TAT-QA's metric reads; dataset.json declares that metric."""
    contexts = _tatqa_contexts(source)
    documents = out / "pdfs"
    documents.mkdir(parents=True)
    queries, answers, qrels = {}, {}, []
    n_pages, longer = 0, 0
    for number, context in enumerate(contexts):
        uid = _safe_id(context["table"]["uid"], f"{source}: context {number}")
        rng = random.Random(f"{seed}:{uid}")
        look = Look.drawn(rng)
        pages = document(documents / f"{uid}.pdf", _context_blocks(context, rng), look, fit=True)
        n_pages += pages
        longer += pages > 1
        for question in context["questions"]:
            qid = _safe_id(question["uid"], f"{source}: context {uid}")
            if qid in queries:
                raise InputError(f"{source}: question {qid} appears twice")
            fields = {name: question[name] for name in TATQA_FIELDS if field_value(question.get(name))}
            fields["scale"] = fields.get("scale") or "none"
            if not fields.get("derivation"):
                fields.pop("derivation", None)
            queries[qid] = {"_id": qid, "text": question["question"], "fields": fields}
            qrels += [(qid, f"{uid}_{page}", 1) for page in range(1, pages + 1)]
            if "answer" in question:
                answers[qid] = _tatqa_answer(question, f"{source}: question {qid}")
    (out / DECLARATION).write_text(
        json.dumps(
            {"source": "TAT-QA", "answer_metric": "tatqa", "by": ["answer_type", "answer_from"], "seed": seed}
        )
        + "\n"
    )
    counts = _write(out, queries, answers, qrels, len(contexts))
    return {**counts, "pages": n_pages, "documents_past_one_page": longer}


def _tatqa_contexts(source: Path) -> list[dict]:
    """TAT-QA's contexts, each checked: a table (uid, rows of strings), paragraphs (text, order),
    questions (uid, question)."""
    try:
        contexts = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{source}: not TAT-QA's JSON ({exc})") from None
    if not isinstance(contexts, list) or not contexts:
        raise InputError(f"{source}: expected TAT-QA's list of contexts (table, paragraphs, questions)")
    for number, context in enumerate(contexts):
        table = context.get("table") if isinstance(context, dict) else None
        rows = table.get("table") if isinstance(table, dict) else None
        if not (
            isinstance(rows, list)
            and rows
            and all(isinstance(row, list) and row and all(isinstance(c, str) for c in row) for row in rows)
            and isinstance(table.get("uid"), str)
            and isinstance(context.get("paragraphs", []), list)
            and all(
                isinstance(p, dict) and isinstance(p.get("text"), str) and finite_number(p.get("order", 0))
                for p in context.get("paragraphs", [])
            )
            and isinstance(context.get("questions", []), list)
            and all(
                isinstance(q, dict) and isinstance(q.get("uid"), str) and isinstance(q.get("question"), str)
                for q in context.get("questions", [])
            )
        ):
            raise InputError(
                f"{source}: context {number} is not TAT-QA's: a table (uid, rows of strings), "
                "paragraphs (text, order) and questions (uid, question)"
            )
    return contexts


def _tatqa_answer(question: dict, where: str) -> dict:
    """A question's answers.jsonl row: its answer (a span as a string, a multi-span as a list, a
    figure as a string; a count as a whole number), scale and type."""
    given, kind = question["answer"], question.get("answer_type")
    if isinstance(given, list) and given and all(isinstance(span, str) for span in given):
        answer = given[0] if len(given) == 1 and kind != "multi-span" else given
    elif isinstance(given, (str, int, float)) and not isinstance(given, bool) and kind != "count":
        answer = str(given)
    elif kind == "count" and re.fullmatch(r"\d+", str(given).strip()):
        answer = str(int(str(given).strip()))
    else:
        raise InputError(
            f"{where}: an answer must be a string, a number or a list of strings (a count a whole "
            f"number), got {given!r}"
        )
    return {
        "_id": question["uid"],
        "answer": answer,
        "answer_type": kind or "",
        "scale": question.get("scale") or "",
    }


def _context_blocks(context: dict, rng: random.Random) -> list[Block]:
    """A context as a report prints it: its paragraphs in order (a short one without a full stop
    as a heading), its table (header rows, its unit as a line above it) after the paragraph that
    introduces it (ending with a colon), else after the opening headings or after everything, as
    ``rng`` draws."""
    rows = context["table"]["table"]
    width = max(len(row) for row in rows)
    rows = [[cell.strip() for cell in row] + [""] * (width - len(row)) for row in rows]
    top = header_rows(rows)
    unit, kept = unit_line(rows, top)
    top -= len(rows) - len(kept)
    table = [Block("unit", unit)] if unit else []
    table.append(Block("table", rows=tuple(tuple(row) for row in kept), header_rows=top))
    texts = [
        p["text"].strip() for p in sorted(context.get("paragraphs", []), key=lambda p: p.get("order", 0))
    ]
    blocks = [Block("heading" if _heading(text) else "text", text) for text in texts if text]
    at = next((n + 1 for n, block in enumerate(blocks) if block.text.endswith(":")), None)
    if at is None:
        opening = next((n for n, block in enumerate(blocks) if block.kind != "heading"), len(blocks))
        at = rng.choice((opening, len(blocks)))
    return blocks[:at] + table + blocks[at:]


def _heading(text: str) -> bool:
    """A paragraph printed as a heading: short, with letters, ending without punctuation."""
    return len(text) <= 90 and any(c.isalpha() for c in text) and not text.endswith((".", ":", ";", ","))


def _write(
    out: Path,
    queries: dict[str, dict],
    answers: dict[str, dict],
    qrels: list[tuple[str, str, int]],
    n_items: int,
) -> dict:
    _write_jsonl(out / "queries.jsonl", queries.values())
    with (out / "qrels.tsv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["query-id", "corpus-id", "score"])
        writer.writerows(qrels)
    if answers:
        _write_jsonl(out / "answers.jsonl", answers.values())
    return {"corpus": n_items, "queries": len(queries), "qrels": len(qrels), "answers": len(answers)}


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
