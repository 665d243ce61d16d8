"""The SQLite catalog: the source of truth of an index.

Documents, pages, tiles with their text spans, and dense vectors live here. Each document is
written in one transaction, so a process killed at any moment leaves every document whole or
absent. WAL mode lets readers work while a writer commits. Retriever files (BM25, FAISS) are
derived from the catalog and tagged with its ``generation``, which every commit increments.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pagesight.errors import IndexFormatError
from pagesight.records import Document
from pagesight.settings import Settings

FORMAT_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,        -- relative to the index directory when possible
    sha256 TEXT NOT NULL,
    type TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    n_pages INTEGER NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    added_at INTEGER NOT NULL DEFAULT (strftime('%s', 'now'))
);
CREATE TABLE IF NOT EXISTS pages (
    doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    number INTEGER NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    text_source TEXT NOT NULL,
    PRIMARY KEY (doc_id, number)
);
CREATE TABLE IF NOT EXISTS tiles (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, so retriever files cannot mix tiles up
    doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    page INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    x0 REAL NOT NULL, y0 REAL NOT NULL, x1 REAL NOT NULL, y1 REAL NOT NULL,
    text TEXT NOT NULL,
    spans TEXT NOT NULL          -- JSON list of [text, [x0, y0, x1, y1], source, conf]
);
CREATE INDEX IF NOT EXISTS tiles_by_doc ON tiles (doc_id, page, idx);
CREATE TABLE IF NOT EXISTS vectors (
    tile_id INTEGER NOT NULL REFERENCES tiles(id) ON DELETE CASCADE,
    chunk INTEGER NOT NULL,
    vector BLOB NOT NULL,        -- float32, L2-normalised
    PRIMARY KEY (tile_id, chunk)
);
"""


@dataclass
class DocumentRow:
    id: str
    source: Path
    sha256: str
    type: str
    size: int
    mtime_ns: int
    n_pages: int


@dataclass
class TileRow:
    id: int
    doc_id: str
    page: int
    idx: int
    box: tuple[float, float, float, float]
    spans: list
    page_size: tuple[int, int]


class Catalog:
    def __init__(self, root: Path, settings: Settings | None = None):
        """Open the catalog of index ``root``; create it with ``settings`` when it does not exist."""
        self.root = root
        path = root / "catalog.sqlite"
        exists = path.exists()
        if not exists and settings is None:
            raise IndexFormatError(f"{root}: not a pagesight index (no catalog.sqlite)")
        if not exists:
            _create(path, settings)
        self.db = _connect(path)
        self._check_version()
        self.settings = Settings.from_dict(json.loads(self._get("settings")))

    def _check_version(self) -> None:
        try:
            version = self._get("format_version")
        except sqlite3.DatabaseError as exc:
            raise IndexFormatError(f"{self.root}: not a pagesight index ({exc})") from None
        if version is None:
            raise IndexFormatError(f"{self.root}: not a pagesight index (no format version)")
        if int(version) != FORMAT_VERSION:
            newer = "a newer" if int(version) > FORMAT_VERSION else "an older"
            raise IndexFormatError(
                f"{self.root}: index format version {version} was written by {newer} pagesight; "
                f"this build reads version {FORMAT_VERSION}"
            )

    def transaction(self):
        """A write transaction (``BEGIN IMMEDIATE``), committed on success."""
        return _Transaction(self.db, "BEGIN IMMEDIATE")

    def snapshot(self):
        """A read transaction: every read inside sees the catalog at one moment."""
        return _Transaction(self.db, "BEGIN")

    def _get(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _bump_generation(self) -> None:
        self.db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")

    def generation(self) -> int:
        return int(self._get("generation"))

    # Documents ---------------------------------------------------------------------------------

    def _relative(self, source: str) -> str:
        try:
            return os.path.relpath(source, self.root)
        except ValueError:  # another drive on Windows
            return str(Path(source).resolve())

    def document(self, doc_id: str) -> DocumentRow | None:
        row = self.db.execute(
            "SELECT id, source, sha256, type, size, mtime_ns, n_pages FROM documents WHERE id = ?", (doc_id,)
        ).fetchone()
        return self._document_row(row) if row else None

    def documents(self) -> list[DocumentRow]:
        rows = self.db.execute(
            "SELECT id, source, sha256, type, size, mtime_ns, n_pages FROM documents ORDER BY id"
        )
        return [self._document_row(r) for r in rows]

    def _document_row(self, row) -> DocumentRow:
        source = Path(row[1])
        if not source.is_absolute():
            source = Path(os.path.normpath(self.root / source))
        return DocumentRow(row[0], source, *row[2:])

    def put_document(self, document: Document, vectors: dict[tuple[int, int], np.ndarray]) -> None:
        """Store ``document`` whole, replacing any earlier version, in one transaction.

        ``vectors`` maps (page number, tile index) to that tile's chunk vectors (n_chunks x dim).
        """
        with self.transaction():
            self.db.execute("DELETE FROM documents WHERE id = ?", (document.id,))
            self.db.execute(
                "INSERT INTO documents (id, source, sha256, type, size, mtime_ns, n_pages, meta) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    document.id,
                    self._relative(document.source),
                    document.sha256,
                    document.type,
                    document.size,
                    document.mtime_ns,
                    len(document.pages),
                    json.dumps(document.meta),
                ),
            )
            for page in document.pages:
                self.db.execute(
                    "INSERT INTO pages (doc_id, number, width, height, text_source) VALUES (?, ?, ?, ?, ?)",
                    (document.id, page.number, page.width, page.height, page.text_source),
                )
                for tile in page.tiles:
                    spans = [[s.text, [round(v, 1) for v in s.box], s.source, s.conf] for s in tile.spans]
                    cursor = self.db.execute(
                        "INSERT INTO tiles (doc_id, page, idx, x0, y0, x1, y1, text, spans) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (document.id, page.number, tile.index, *tile.box, tile.text, json.dumps(spans)),
                    )
                    matrix = vectors.get((page.number, tile.index))
                    if matrix is not None:
                        self.db.executemany(
                            "INSERT INTO vectors (tile_id, chunk, vector) VALUES (?, ?, ?)",
                            [
                                (cursor.lastrowid, i, np.asarray(v, dtype=np.float32).tobytes())
                                for i, v in enumerate(matrix)
                            ],
                        )
            self._bump_generation()

    def touch_document(self, doc_id: str, source: str, mtime_ns: int) -> None:
        """Record a new path or modification time for a document whose content is unchanged."""
        with self.transaction():
            self.db.execute(
                "UPDATE documents SET source = ?, mtime_ns = ? WHERE id = ?",
                (self._relative(source), mtime_ns, doc_id),
            )

    def delete_document(self, doc_id: str) -> bool:
        with self.transaction():
            deleted = self.db.execute("DELETE FROM documents WHERE id = ?", (doc_id,)).rowcount > 0
            if deleted:
                self._bump_generation()
        return deleted

    # Tiles and vectors -------------------------------------------------------------------------

    def tile_texts(self) -> Iterator[tuple[int, str]]:
        yield from self.db.execute("SELECT id, text FROM tiles ORDER BY id")

    def tile_ids(self) -> np.ndarray:
        rows = self.db.execute("SELECT id FROM tiles ORDER BY id").fetchall()
        return np.array([r[0] for r in rows], dtype=np.int64)

    def vectors(self, tile_ids: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Chunk vectors as (tile id per row, float32 matrix), for all tiles or the given ones."""
        if tile_ids is None:
            rows = self.db.execute("SELECT tile_id, vector FROM vectors ORDER BY tile_id, chunk").fetchall()
        else:
            rows = []
            ids = list(tile_ids)
            for start in range(0, len(ids), 900):
                batch = ids[start : start + 900]
                marks = ",".join("?" * len(batch))
                rows += self.db.execute(
                    f"SELECT tile_id, vector FROM vectors WHERE tile_id IN ({marks}) ORDER BY tile_id, chunk",
                    batch,
                ).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        return ids, matrix

    def tiles(self, tile_ids: list[int], spans: bool = True) -> dict[int, TileRow]:
        """Tile rows by id; with ``spans=False`` their text spans are left out (empty)."""
        found = {}
        spans_column = "t.spans" if spans else "'[]'"
        for start in range(0, len(tile_ids), 900):
            batch = tile_ids[start : start + 900]
            marks = ",".join("?" * len(batch))
            rows = self.db.execute(
                f"SELECT t.id, t.doc_id, t.page, t.idx, t.x0, t.y0, t.x1, t.y1, {spans_column}, p.width, p.height "
                "FROM tiles t JOIN pages p ON p.doc_id = t.doc_id AND p.number = t.page "
                f"WHERE t.id IN ({marks})",
                batch,
            )
            for r in rows:
                found[r[0]] = TileRow(r[0], r[1], r[2], r[3], tuple(r[4:8]), json.loads(r[8]), (r[9], r[10]))
        return found

    def tile_at(self, doc_id: str, page: int, idx: int) -> TileRow | None:
        """The tile ``idx`` of page ``page`` of ``doc_id``, with its spans."""
        row = self.db.execute(
            "SELECT id FROM tiles WHERE doc_id = ? AND page = ? AND idx = ?", (doc_id, page, idx)
        ).fetchone()
        return self.tiles([row[0]]).get(row[0]) if row else None

    def tile_ids_of(self, doc_ids: Iterable[str]) -> np.ndarray:
        ids = list(doc_ids)
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(f"SELECT id FROM tiles WHERE doc_id IN ({marks})", ids).fetchall()
        return np.array([r[0] for r in rows], dtype=np.int64)

    def counts(self) -> dict[str, int]:
        def one(sql: str) -> int:
            return self.db.execute(sql).fetchone()[0]

        return {
            "documents": one("SELECT COUNT(*) FROM documents"),
            "pages": one("SELECT COUNT(*) FROM pages"),
            "tiles": one("SELECT COUNT(*) FROM tiles"),
            "vectors": one("SELECT COUNT(*) FROM vectors"),
            "ocr_pages": one("SELECT COUNT(*) FROM pages WHERE text_source = 'ocr'"),
        }

    def close(self) -> None:
        self.db.close()


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    return db


def _create(path: Path, settings: Settings) -> None:
    """Make the catalog under a temporary name and rename it into place, so none is half made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.new-{os.getpid()}")
    db = sqlite3.connect(temporary, isolation_level=None)
    try:
        db.executescript(_SCHEMA)
        db.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            [
                ("format_version", str(FORMAT_VERSION)),
                ("settings", json.dumps(settings.to_dict())),
                ("generation", "0"),
            ],
        )
    finally:
        db.close()
    try:
        os.link(temporary, path)  # fails if another process created the catalog first: keep theirs
    except FileExistsError:
        pass
    finally:
        os.unlink(temporary)


class _Transaction:
    """``BEGIN ...`` ... ``COMMIT``, rolled back on any exception."""

    def __init__(self, db: sqlite3.Connection, begin: str):
        self.db = db
        self.begin = begin

    def __enter__(self):
        self.db.execute(self.begin)
        return self.db

    def __exit__(self, exc_type, exc, tb):
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        return False
