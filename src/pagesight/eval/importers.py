"""Bring datasets in other public layouts into the pagesight dataset layout (see dataset.py).

- **ViDoRe / MTEB-style page datasets** exported to local files: ``corpus``, ``queries`` and
  ``qrels`` tables as Parquet (one file or a folder of shards, as the Hugging Face hub stores them)
  or JSON lines, the corpus carrying page images (Hugging Face image cells ``{"bytes", "path"}``,
  base64 strings or file paths). Each page becomes ``pages/<corpus id>.<format>``.
- **BEIR folders**: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` and
  ``qrels/<split>.tsv``. Text passages have no pixels, so each one is typeset onto a page of its
  own (a PDF with a text layer), which is how text corpora enter a pixel-space index.

Corpus ids become file stems, so they must be usable as file names; others are refused by name.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

from PIL import Image

from pagesight.errors import InputError

ID_COLUMNS = ("corpus-id", "corpus_id", "_id", "id", "docid", "doc_id")
QUERY_ID_COLUMNS = ("query-id", "query_id", "_id", "id", "qid")
QUERY_TEXT_COLUMNS = ("query", "text", "question")
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def import_dataset(source: Path, out: Path, split: str = "test") -> dict:
    """Convert ``source`` (ViDoRe-style tables or a BEIR folder) into ``out``; returns counts."""
    source, out = Path(source), Path(out)
    if not source.is_dir():
        raise InputError(f"{source}: no such folder")
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: exists and is not empty")
    if (source / "corpus.jsonl").exists() and not _has_images(source / "corpus.jsonl"):
        return _import_beir(source, out, split)
    return _import_tables(source, out, split)


# Tables (ViDoRe, MTEB) ---------------------------------------------------------------------------


def _table(source: Path, name: str, split: str) -> Iterator[dict]:
    """Rows of the table ``name``: name.parquet, name/*.parquet (optionally under a split), name.jsonl."""
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
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}:{number}: not JSON ({exc.msg})") from None


def _has_images(path: Path) -> bool:
    first = next(_jsonl_rows(path), {})
    return "image" in first


def _column(row: dict, names: tuple[str, ...], table: str) -> object:
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    raise InputError(f"{table} row has none of the columns {', '.join(names)}: {sorted(row)}")


def _safe_id(value: object, table: str) -> str:
    text = str(value)
    if not SAFE_ID.match(text):
        raise InputError(f"{table}: id '{text}' cannot be a file name")
    return text


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


def _import_tables(source: Path, out: Path, split: str) -> dict:
    pages = out / "pages"
    pages.mkdir(parents=True)
    n_pages = 0
    for row in _table(source, "corpus", split):
        corpus_id = _safe_id(_column(row, ID_COLUMNS, "corpus"), "corpus")
        data = _image_bytes(_column(row, ("image",), "corpus"), source, corpus_id)
        try:
            with Image.open(io.BytesIO(data)) as image:
                suffix = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "TIFF": ".tif"}.get(image.format)
                if suffix is None:
                    suffix = ".png"
                    buffer = io.BytesIO()
                    image.convert("RGB").save(buffer, "PNG")
                    data = buffer.getvalue()
        except (OSError, Image.DecompressionBombError) as exc:
            raise InputError(f"corpus item '{corpus_id}': not a readable image ({exc})") from None
        (pages / f"{corpus_id}{suffix}").write_bytes(data)
        n_pages += 1
    queries = {
        str(_column(row, QUERY_ID_COLUMNS, "queries")): str(_column(row, QUERY_TEXT_COLUMNS, "queries"))
        for row in _table(source, "queries", split)
    }
    qrels = [
        (
            str(_column(row, QUERY_ID_COLUMNS, "qrels")),
            _safe_id(_column(row, ID_COLUMNS, "qrels"), "qrels"),
            int(_column(row, ("score", "relevance", "label"), "qrels")),
        )
        for row in _table(source, "qrels", split)
    ]
    return _write(out, queries, qrels, n_pages)


# BEIR --------------------------------------------------------------------------------------------


def _import_beir(source: Path, out: Path, split: str) -> dict:
    try:
        from reportlab.lib.pagesizes import A4
        from reportlab.lib.styles import getSampleStyleSheet
        from reportlab.platypus import Paragraph, SimpleDocTemplate
    except ImportError:
        raise InputError("typesetting BEIR text needs reportlab: pip install 'pagesight[eval]'") from None
    from xml.sax.saxutils import escape

    documents = out / "documents"
    documents.mkdir(parents=True)
    styles = getSampleStyleSheet()
    n_pages = 0
    for row in _jsonl_rows(source / "corpus.jsonl"):
        corpus_id = _safe_id(_column(row, ID_COLUMNS, "corpus"), "corpus")
        story = []
        if row.get("title"):
            story.append(Paragraph(escape(str(row["title"])), styles["Heading2"]))
        story.append(Paragraph(escape(str(row.get("text", ""))), styles["BodyText"]))
        SimpleDocTemplate(str(documents / f"{corpus_id}.pdf"), pagesize=A4, invariant=1).build(story)
        n_pages += 1
    queries = {
        str(_column(row, QUERY_ID_COLUMNS, "queries")): str(_column(row, QUERY_TEXT_COLUMNS, "queries"))
        for row in _jsonl_rows(source / "queries.jsonl")
    }
    qrels_path = source / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise InputError(f"{qrels_path}: missing (choose the split with --split)")
    with qrels_path.open(encoding="utf-8", newline="") as handle:
        rows = [row for row in csv.reader(handle, delimiter="\t") if row and row[0] != "query-id"]
    qrels = [(row[0], _safe_id(row[1], "qrels"), int(float(row[2]))) for row in rows]
    return _write(out, queries, qrels, n_pages)


def _write(out: Path, queries: dict[str, str], qrels: list[tuple[str, str, int]], n_items: int) -> dict:
    with (out / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for qid, text in queries.items():
            handle.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    with (out / "qrels.tsv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["query-id", "corpus-id", "score"])
        writer.writerows(qrels)
    return {"corpus": n_items, "queries": len(queries), "qrels": len(qrels)}
