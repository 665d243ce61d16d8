"""The SQLite catalog's schema: its tables, the upgrades from older versions (applied in place when
a catalog is opened), and making and connecting to the database file."""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from pathlib import Path

import numpy as np

from pagesight.errors import IndexFormatError
from pagesight.settings import Settings

# Version 2 adds each tile's content kind and hyperlinks, kept tile images (web pages) and the
# vectors of a visual encoder. Version 3 adds layout regions (``text/layout.py``, indexes made with
# ``Settings.layout``): every region a page's detection found, and tables and figures stored as
# tiles of their own whose ``region`` names them. Older catalogs are upgraded in place when opened:
# the additions are columns with defaults and new tables, so every older row stays valid. Version 4
# adds each page's language (``text/language.py``); older pages are English. Version 5 stores a
# tile's text and spans zlib-compressed (a BLOB; older rows keep their TEXT and are read as they are)
# and chunk vectors as float16 (``vector_matrix`` reads both; older rows are float32): 9.4 of the 17.7 KB a tile
# took at 100,000 tiles (BENCHMARKS.md, "Scale").
FORMAT_VERSION = 5

SCHEMA = """
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
    language TEXT NOT NULL DEFAULT 'en',  -- text.language: its text's, for BM25's analysis
    PRIMARY KEY (doc_id, number)
);
CREATE TABLE IF NOT EXISTS tiles (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, so retriever files cannot mix tiles up
    doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    page INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    x0 REAL NOT NULL, y0 REAL NOT NULL, x1 REAL NOT NULL, y1 REAL NOT NULL,
    text TEXT NOT NULL,          -- zlib-compressed UTF-8 as a BLOB (``packed``); TEXT in older rows
    spans TEXT NOT NULL,         -- JSON list of [text, [x0, y0, x1, y1], source, conf], packed too
    -- web pages: the content kind (paragraph, table, list, infobox, figure, code) and the links,
    -- a JSON list of [anchor text, url, [[x0, y0, x1, y1], ...]];
    -- region: a layout region searched as its own unit, JSON [kind, detection score]; empty for bands
    kind TEXT NOT NULL DEFAULT '',
    links TEXT NOT NULL DEFAULT '[]',
    region TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tiles_by_doc ON tiles (doc_id, page, idx);
CREATE TABLE IF NOT EXISTS vectors (
    tile_id INTEGER NOT NULL REFERENCES tiles(id) ON DELETE CASCADE,
    chunk INTEGER NOT NULL,
    vector BLOB NOT NULL,        -- L2-normalised; float16 when half, float32 in older rows
    half INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tile_id, chunk)
);
CREATE TABLE IF NOT EXISTS tile_images (  -- tiles whose pixels are kept rather than re-rendered
    tile_id INTEGER PRIMARY KEY REFERENCES tiles(id) ON DELETE CASCADE,
    format TEXT NOT NULL,        -- "png"
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS visual_vectors (  -- page-image vectors of the index's visual encoder
    tile_id INTEGER PRIMARY KEY REFERENCES tiles(id) ON DELETE CASCADE,
    rows INTEGER NOT NULL,       -- 1 for a single-vector encoder, tokens for late interaction
    vector BLOB NOT NULL         -- float16, rows x dim, L2-normalised rows
);
CREATE TABLE IF NOT EXISTS regions (  -- layout detection's blocks of each page (text/layout.py)
    doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    page INTEGER NOT NULL,
    kind TEXT NOT NULL,          -- table, figure, table_caption, figure_caption, title, text, ...
    x0 REAL NOT NULL, y0 REAL NOT NULL, x1 REAL NOT NULL, y1 REAL NOT NULL,
    score REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS regions_by_page ON regions (doc_id, page);
"""

# Version 1 -> 2, run in one write transaction.
UPGRADE_1 = (
    "ALTER TABLE tiles ADD COLUMN kind TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE tiles ADD COLUMN links TEXT NOT NULL DEFAULT '[]'",
    "CREATE TABLE IF NOT EXISTS tile_images (tile_id INTEGER PRIMARY KEY REFERENCES tiles(id) ON DELETE CASCADE, "
    "format TEXT NOT NULL, data BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS visual_vectors (tile_id INTEGER PRIMARY KEY REFERENCES tiles(id) "
    "ON DELETE CASCADE, rows INTEGER NOT NULL, vector BLOB NOT NULL)",
    "UPDATE meta SET value = '2' WHERE key = 'format_version'",
)

# Version 2 -> 3, run in one write transaction.
UPGRADE_2 = (
    "ALTER TABLE tiles ADD COLUMN region TEXT NOT NULL DEFAULT ''",
    "CREATE TABLE IF NOT EXISTS regions (doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE, "
    "page INTEGER NOT NULL, kind TEXT NOT NULL, x0 REAL NOT NULL, y0 REAL NOT NULL, x1 REAL NOT NULL, "
    "y1 REAL NOT NULL, score REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS regions_by_page ON regions (doc_id, page)",
    "UPDATE meta SET value = '3' WHERE key = 'format_version'",
)
# Version 3 -> 4, run in one write transaction.
UPGRADE_3 = (
    "ALTER TABLE pages ADD COLUMN language TEXT NOT NULL DEFAULT 'en'",
    "UPDATE meta SET value = '4' WHERE key = 'format_version'",
)
# Version 4 -> 5, run in one write transaction: older rows stay as they are and are read so.
UPGRADE_4 = (
    "ALTER TABLE vectors ADD COLUMN half INTEGER NOT NULL DEFAULT 0",
    "UPDATE meta SET value = '5' WHERE key = 'format_version'",
)
UPGRADES = {1: UPGRADE_1, 2: UPGRADE_2, 3: UPGRADE_3, 4: UPGRADE_4}


def upgrade(db: sqlite3.Connection, root: Path) -> None:
    """Bring the catalog ``db`` of index ``root`` to ``FORMAT_VERSION`` through ``UPGRADES``, each
    in a transaction (another process may upgrade it meanwhile); a version this build cannot read
    is refused."""

    def version() -> int:
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise IndexFormatError(f"{root}: not a pagesight index ({exc})") from None
        if row is None:
            raise IndexFormatError(f"{root}: not a pagesight index (no format version)")
        return int(row[0])

    found = version()
    while found in UPGRADES:
        try:
            with Transaction(db, "BEGIN IMMEDIATE"):
                if version() == found:
                    for statement in UPGRADES[found]:
                        db.execute(statement)
        except sqlite3.OperationalError as exc:  # read-only file or directory
            raise IndexFormatError(
                f"{root}: index format version {found} needs an upgrade to {FORMAT_VERSION}, "
                f"which failed ({exc})"
            ) from None
        found = version()
    if found != FORMAT_VERSION:
        newer = "a newer" if found > FORMAT_VERSION else "an older"
        raise IndexFormatError(
            f"{root}: index format version {found} was written by {newer} pagesight; "
            f"this build reads version {FORMAT_VERSION}"
        )


def packed(text: str) -> bytes:
    """A tile's text or spans JSON as stored since version 5: zlib-compressed UTF-8, about a third
    of its size."""
    return zlib.compress(text.encode())


def unpacked(value: bytes | str) -> str:
    """A stored text or spans value as text: a BLOB is packed (version 5), TEXT is an older row's."""
    return zlib.decompress(value).decode() if isinstance(value, bytes) else value


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    return db


def create(path: Path, settings: Settings) -> None:
    """Make the catalog under a temporary name and rename it into place, so none is half made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.new-{os.getpid()}")
    db = sqlite3.connect(temporary, isolation_level=None)
    try:
        db.executescript(SCHEMA)
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


class Transaction:
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


def vector_matrix(rows: list[tuple[int, bytes, int]]) -> np.ndarray:
    """Vector rows (tile id, blob, half) all of one kind as a float32 matrix."""
    dtype = np.float16 if rows[0][2] else np.float32
    return np.frombuffer(b"".join(r[1] for r in rows), dtype=dtype).reshape(len(rows), -1).astype(np.float32)
