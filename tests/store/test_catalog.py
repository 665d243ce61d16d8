"""The SQLite catalog's version 5 (store/schema.py): a tile's text and spans are stored compressed and
its chunk vectors as float16, and a version 4 catalog, whose rows are plain text and float32, is
upgraded in place, read as it was, and takes new rows beside the old."""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from tests.conftest import make_pdf

pytestmark = pytest.mark.timeout(120)


def as_version_4(path: Path) -> None:
    """Rewrite a catalog's rows as version 4 wrote them: text and spans as TEXT, vectors as float32."""
    db = sqlite3.connect(path)
    for tile_id, text, spans in db.execute("SELECT id, text, spans FROM tiles").fetchall():
        db.execute(
            "UPDATE tiles SET text = ?, spans = ? WHERE id = ?",
            (zlib.decompress(text).decode(), zlib.decompress(spans).decode(), tile_id),
        )
    for tile_id, chunk, vector in db.execute("SELECT tile_id, chunk, vector FROM vectors").fetchall():
        wide = np.frombuffer(vector, dtype=np.float16).astype(np.float32).tobytes()
        db.execute("UPDATE vectors SET vector = ? WHERE tile_id = ? AND chunk = ?", (wide, tile_id, chunk))
    db.execute("ALTER TABLE vectors DROP COLUMN half")
    db.execute("UPDATE meta SET value = '4' WHERE key = 'format_version'")
    db.commit()
    db.close()


def test_rows_are_stored_compressed_and_half_and_a_version_4_catalog_reads_the_same(tmp_path: Path):
    first = make_pdf(
        tmp_path / "glaciers.pdf", [["Glaciers carve moraines in the tundra.", "Lemmings winter there."]]
    )
    second = make_pdf(tmp_path / "deltas.pdf", [["River deltas gather sediment at the estuary."]])
    root = tmp_path / "ix"
    with Index.open(root) as index:
        index.add(first)
        before = index.search("moraines tundra", k=3)
        tile_ids = index.catalog.tile_ids().tolist()
        texts = dict(index.catalog.tile_texts())
        rows = index.catalog.tiles(tile_ids)
        ids, vectors = index.catalog.vectors(tile_ids)
        stored = index.catalog.db.execute("SELECT text, spans FROM tiles").fetchall()
        halves = index.catalog.db.execute("SELECT length(vector), half FROM vectors").fetchall()
    assert all(isinstance(text, bytes) and isinstance(spans, bytes) for text, spans in stored)
    assert {half for _, half in halves} == {1} and {size for size, _ in halves} == {2 * vectors.shape[1]}
    assert "Glaciers carve moraines" in texts[tile_ids[0]]
    assert json.loads(zlib.decompress(stored[0][1]))[0][0] == rows[tile_ids[0]].spans[0][0]

    as_version_4(root / "catalog.sqlite")
    with Index.open(root) as index:
        assert index.catalog._get("format_version") == "5"
        assert dict(index.catalog.tile_texts()) == texts
        assert index.catalog.tiles(tile_ids) == rows
        old_ids, old_vectors = index.catalog.vectors(tile_ids)
        assert old_ids.tolist() == ids.tolist() and np.array_equal(old_vectors, vectors)
        assert [(h.page_id, h.snippet) for h in index.search("moraines tundra", k=3)] == [
            (h.page_id, h.snippet) for h in before
        ]
        index.add(second)  # new rows, packed and half, beside the old plain and float32 ones
        assert index.search("sediment estuary", k=1)[0].doc_id == "deltas"
        all_ids, all_vectors = index.catalog.vectors()
        assert len(all_ids) == len(all_vectors) > len(ids) and all_vectors.dtype == np.float32
        assert np.array_equal(all_vectors[: len(ids)], vectors)
        assert len(dict(index.catalog.tile_texts())) == len(index.catalog.tile_ids())
