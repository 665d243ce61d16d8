"""The SQLite catalog: the source of truth of an index.

Documents, pages, tiles with their text spans, and dense vectors live here. Each document is
written in one transaction, so a process killed at any moment leaves every document whole or
absent. WAL mode lets readers work while a writer commits. Retriever files (BM25, FAISS) are
derived from the catalog and tagged with its ``generation``, which every commit increments.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from pagesight.errors import IndexFormatError
from pagesight.records import Document, Region, Span
from pagesight.settings import Settings
from pagesight.store.rows import (
    DocumentRow,
    Kept,
    RowCache,
    TileRow,
    link_rows,
    region_of,
    region_row,
    span_rows,
)
from pagesight.store.schema import Transaction, connect, create, packed, unpacked, upgrade, vector_matrix
from pagesight.where import Filter, document_fields

# a tile's language: its page's (text.language)
_TILE_LANGUAGES = (
    "SELECT t.id, p.language FROM tiles t JOIN pages p ON p.doc_id = t.doc_id AND p.number = t.page"
)
_BATCH = 900  # ids bound to one statement, under the 999 variables older SQLite builds allow


def _spans(stored: bytes | str) -> list[Span]:
    """A tile's spans as stored (``rows.span_rows``) made records again."""
    return [Span(text, tuple(box), source, conf) for text, box, source, conf in json.loads(unpacked(stored))]


def _batches(ids: list) -> Iterator[tuple[list, str]]:
    """``ids`` in runs of at most ``_BATCH``, each with its placeholders ("?,?,...")."""
    for start in range(0, len(ids), _BATCH):
        batch = ids[start : start + _BATCH]
        yield batch, ",".join("?" * len(batch))


_DOCUMENT_COLUMNS = "id, source, sha256, type, size, mtime_ns, n_pages, meta"  # a DocumentRow's


class SQLiteCatalog:
    """The local store's ``Catalog`` (``store/base.py``): documents, tiles and settings in one SQLite file."""

    def __init__(self, root: Path, settings: Settings | None = None):
        """Open the catalog of index ``root``; create it with ``settings`` when it does not exist."""
        self.root = root
        path = root / "catalog.sqlite"
        exists = path.exists()
        if not exists and settings is None:
            raise IndexFormatError(f"{root}: not a pagesight index (no catalog.sqlite)")
        if not exists:
            create(path, settings)
        self.db = connect(path)
        upgrade(self.db, root)
        self.settings = Settings.from_dict(json.loads(self._get("settings")))
        # Tile rows with their spans kept by the stores of this index in this process (a
        # ``RowCache``; ``LocalStore`` shares one): a tile id's row never changes (ids are not reused)
        self.rows: RowCache | None = None
        # Values a search stage derives from a tile's text, by tile id (its words by line,
        # ``search.words``); shared by the stores of an index like the rows
        self.derived = RowCache()
        self._headings: Kept[str] = Kept()  # tile id -> its page heading (``headings``)
        self._places: Kept[tuple[str, int]] = Kept()  # tile id -> its document and page (``tile_pages``)
        self._languages: Kept[str] = Kept()  # tile id -> its page's language (``tile_languages``)

    def transaction(self):
        """A write transaction (``BEGIN IMMEDIATE``), committed on success."""
        return Transaction(self.db, "BEGIN IMMEDIATE")

    def snapshot(self):
        """A read transaction: every read inside sees the catalog at one moment."""
        return Transaction(self.db, "BEGIN")

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

    def _documents(self, where: str, *values) -> list[DocumentRow]:
        """The document rows ``where`` (SQL after the table) selects."""
        rows = self.db.execute(f"SELECT {_DOCUMENT_COLUMNS} FROM documents {where}", values)
        return [self._document_row(row) for row in rows]

    def document(self, doc_id: str) -> DocumentRow | None:
        return next(iter(self._documents("WHERE id = ?", doc_id)), None)

    def documents(self) -> list[DocumentRow]:
        return self._documents("ORDER BY id")

    def documents_where(self, given: Filter) -> list[DocumentRow]:
        return [row for row in self.documents() if given.passes(document_fields(row))]

    def document_count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]

    def _document_row(self, row) -> DocumentRow:
        source = Path(row[1])
        if not source.is_absolute():
            source = Path(os.path.normpath(self.root / source))
        return DocumentRow(row[0], source, *row[2:7], json.loads(row[7] or "{}"))

    def documents_from(self, source: str) -> list[DocumentRow]:
        """The documents read from file ``source`` (a ZIM archive holds one per article)."""
        return self._documents("WHERE source = ?", self._relative(source))

    def put_document(
        self,
        document: Document,
        vectors: dict[tuple[int, int], np.ndarray],
        visual: dict[tuple[int, int], np.ndarray] | None = None,
    ) -> None:
        """Store ``document`` whole, replacing any earlier version, in one transaction.

        ``vectors`` maps (page number, tile index) to that tile's chunk vectors (n_chunks x dim);
        ``visual`` to its visual encoder's vector (dim,) or multi-vector (n_tokens x dim).
        """
        visual = visual or {}
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
                    "INSERT INTO pages (doc_id, number, width, height, text_source, language) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (document.id, page.number, page.width, page.height, page.text_source, page.language),
                )
                self.db.executemany(
                    "INSERT INTO regions (doc_id, page, kind, x0, y0, x1, y1, score) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(document.id, page.number, r.kind, *r.box, r.score) for r in page.regions],
                )
                for tile in page.tiles:
                    key = (page.number, tile.index)
                    self._put_tile(document.id, page.number, tile, vectors.get(key), visual.get(key))
            self._bump_generation()

    def _put_tile(self, doc_id: str, page: int, tile, chunks: np.ndarray | None, image_vectors) -> None:
        """A tile's row (its text and lines packed), its kept image, its visual vector(s) and its
        chunks' vectors, in the transaction open."""
        spans, links = span_rows(tile.spans), link_rows(tile.links)
        region = json.dumps(region_row(tile)) if tile.region else ""
        cursor = self.db.execute(
            "INSERT INTO tiles (doc_id, page, idx, x0, y0, x1, y1, text, spans, kind, links, region) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                doc_id,
                page,
                tile.index,
                *tile.box,
                packed(tile.text),
                packed(json.dumps(spans)),
                tile.kind,
                json.dumps(links),
                region,
            ),
        )
        if tile.image is not None:
            self.db.execute(
                "INSERT INTO tile_images (tile_id, format, data) VALUES (?, 'png', ?)",
                (cursor.lastrowid, tile.image),
            )
        if image_vectors is not None:
            rows = np.atleast_2d(np.asarray(image_vectors, dtype=np.float16))
            self.db.execute(
                "INSERT INTO visual_vectors (tile_id, rows, vector) VALUES (?, ?, ?)",
                (cursor.lastrowid, len(rows), rows.tobytes()),
            )
        if chunks is not None:
            self.db.executemany(
                "INSERT INTO vectors (tile_id, chunk, vector, half) VALUES (?, ?, ?, 1)",
                [
                    (cursor.lastrowid, i, np.asarray(v, dtype=np.float16).tobytes())
                    for i, v in enumerate(chunks)
                ],
            )

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
        for tile_id, text in self.db.execute("SELECT id, text FROM tiles ORDER BY id"):
            yield tile_id, unpacked(text)

    def tile_contexts(self, since: int = 0, cells: bool = False) -> Iterator[tuple[int, str, str, str, str]]:
        """(tile id, text, the context naming its document, the heading of its page, its table
        cells), by tile id: ``text.titles.tile_fields``, and with ``cells`` ``text.tables.cell_text``
        of its spans (else empty: the spans are not read); the tiles from id ``since`` on (a
        document's tiles are committed together, so they are all of them or none)."""
        from pagesight.text.tables import cell_text
        from pagesight.text.titles import context, tile_fields

        spans = "spans" if cells else "''"
        tiles = self.db.execute(
            f"SELECT id, doc_id, page, idx, region, text, {spans} FROM tiles WHERE id >= ? "
            "ORDER BY doc_id, page, idx",
            (since,),
        ).fetchall()
        ids = sorted({row[1] for row in tiles})
        documents = []
        for batch, marks in _batches(ids):
            documents += self.db.execute(
                f"SELECT id, meta FROM documents WHERE id IN ({marks})", batch
            ).fetchall()
        named = {doc_id: context(doc_id, json.loads(meta or "{}")) for doc_id, meta in documents}
        rows = []
        for doc_id, group in itertools.groupby(tiles, key=lambda row: row[1]):
            group = [(row, unpacked(row[5])) for row in group]
            fields = tile_fields(named[doc_id], [(row[2], row[3], bool(row[4]), text) for row, text in group])
            rows += [
                (row[0], text, *field, cell_text(_spans(row[6])) if cells else "")
                for (row, text), field in zip(group, fields)
            ]
        yield from sorted(rows)

    def headings(self, tile_ids: list[int]) -> dict[int, str]:
        """Each tile's page heading as BM25 indexes it (``text.titles.tile_fields``): its page's
        for the page's first band and its table and figure units, empty for the other bands. Read a
        document at a time and kept."""
        return self._headings.get(tile_ids, self._read_headings)

    def _read_headings(self, tile_ids: list[int]) -> dict[int, str]:
        from pagesight.text.titles import tile_fields

        read = {}
        for batch, marks in _batches(tile_ids):
            documents = self.db.execute(f"SELECT DISTINCT doc_id FROM tiles WHERE id IN ({marks})", batch)
            for (doc_id,) in documents.fetchall():
                # only a page's first band's text makes its heading
                tiles = self.db.execute(
                    "SELECT id, page, idx, region, CASE WHEN idx = 0 AND region = '' THEN text ELSE '' END "
                    "FROM tiles WHERE doc_id = ? ORDER BY page, idx",
                    (doc_id,),
                ).fetchall()
                fields = tile_fields(
                    "", [(page, idx, bool(region), unpacked(text)) for _, page, idx, region, text in tiles]
                )
                read.update((row[0], heading) for row, (_, heading) in zip(tiles, fields))
        return read

    def tile_pages(self, tile_ids: list[int]) -> dict[int, tuple[str, int]]:
        """Each tile's document and page, kept: what document evidence reads of a search's
        candidates (``search.documents``)."""
        return self._places.get(tile_ids, self._read_places)

    def _read_places(self, tile_ids: list[int]) -> dict[int, tuple[str, int]]:
        read = {}
        for batch, marks in _batches(tile_ids):
            rows = self.db.execute(f"SELECT id, doc_id, page FROM tiles WHERE id IN ({marks})", batch)
            read.update((tile_id, (sys.intern(doc_id), page)) for tile_id, doc_id, page in rows)
        return read

    def tile_languages(self, tile_ids: list[int]) -> dict[int, str]:
        """Each tile's language, its page's (``text.language``), kept: what a search reads of its
        dense run's head (``search.fusion.language_alpha``)."""
        return self._languages.get(tile_ids, self._read_languages)

    def _read_languages(self, tile_ids: list[int]) -> dict[int, str]:
        read = {}
        for batch, marks in _batches(tile_ids):
            read.update(self.db.execute(f"{_TILE_LANGUAGES} WHERE t.id IN ({marks})", batch))
        return read

    def languages_since(self, since: int = 0) -> dict[int, str]:
        """Each tile's language from tile id ``since`` on (the tiles new to the retrievers)."""
        return dict(self.db.execute(f"{_TILE_LANGUAGES} WHERE t.id >= ?", (since,)).fetchall())

    def tile_ids(self, above: int | None = None) -> np.ndarray:
        """Every tile's id (those above ``above`` when given: the tiles added since), sorted: read
        from the smallest index that holds them (the rowid of ``tiles_by_doc``), not by scanning
        the tiles' text."""
        if above is None:
            rows = self.db.execute("SELECT id FROM tiles")
        else:
            rows = self.db.execute("SELECT id FROM tiles WHERE id > ?", (int(above),))
        return np.sort(np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64))

    def tile_count(self) -> int:
        """How many tiles it holds, regions included (as ``tile_ids``)."""
        return self.db.execute("SELECT COUNT(*) FROM tiles").fetchone()[0]

    def vectors(self, tile_ids: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Chunk vectors as (tile id per row, float32 matrix), for all tiles or the given ones."""
        if tile_ids is None:
            rows = self.db.execute(
                "SELECT tile_id, vector, half FROM vectors ORDER BY tile_id, chunk"
            ).fetchall()
        else:
            rows = []
            ids = [int(i) for i in tile_ids]  # numpy integers would bind as blobs and match nothing
            for batch, marks in _batches(ids):
                rows += self.db.execute(
                    f"SELECT tile_id, vector, half FROM vectors WHERE tile_id IN ({marks}) ORDER BY tile_id, chunk",
                    batch,
                ).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        # float32 rows of an index written before version 5 beside float16 ones, in runs of one kind
        runs = [list(run) for _, run in itertools.groupby(rows, key=lambda r: r[2])]
        matrix = np.concatenate([vector_matrix(run) for run in runs])
        return ids, matrix

    def visual_vectors(self, tile_ids: Iterable[int]) -> tuple[np.ndarray, list[np.ndarray]]:
        """The visual vectors of the given tiles that have them: (tile ids, one float32 array each,
        ``(dim,)`` for a single-vector encoder's tiles, ``(n_tokens, dim)`` for a multi-vector one's)."""
        spec = self.visual_spec()
        if spec is None:
            return np.zeros(0, dtype=np.int64), []
        ids, arrays = [], []
        wanted = [int(i) for i in tile_ids]
        for batch, marks in _batches(wanted):
            for tile_id, rows, blob in self.db.execute(
                f"SELECT tile_id, rows, vector FROM visual_vectors WHERE tile_id IN ({marks}) ORDER BY tile_id",
                batch,
            ):
                matrix = np.frombuffer(blob, dtype=np.float16).reshape(rows, -1).astype(np.float32)
                ids.append(tile_id)
                arrays.append(matrix if spec["multi_vector"] else matrix[0])
        return np.array(ids, dtype=np.int64), arrays

    def visual_spec(self) -> dict | None:
        """The spec of the visual encoder whose vectors the catalog holds (None: no visual vectors)."""
        value = self._get("visual_spec")
        return json.loads(value) if value else None

    def set_visual_spec(self, spec: dict) -> None:
        """Record the visual encoder that writes this catalog's visual vectors (once, at its first use)."""
        with self.transaction():
            self.db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('visual_spec', ?)", (json.dumps(spec),)
            )

    def tiles(self, tile_ids: list[int], spans: bool = True) -> dict[int, TileRow]:
        """Tile rows by id; with ``spans=False`` their text spans are left out (empty)."""
        if spans and self.rows is not None:
            found = self.rows.get(tile_ids)
            missing = [int(i) for i in tile_ids if int(i) not in found]
            if missing:
                read = self._tiles(missing, spans)
                self.rows.put(read)
                found.update(read)
            return found
        return self._tiles(tile_ids, spans)

    def _tiles(self, tile_ids: list[int], spans: bool) -> dict[int, TileRow]:
        found = {}
        spans_column = "t.spans" if spans else "'[]'"
        links_column = "t.links" if spans else "'[]'"
        for batch, marks in _batches([int(i) for i in tile_ids]):  # numpy integers bind as blobs
            rows = self.db.execute(
                f"SELECT t.id, t.doc_id, t.page, t.idx, t.x0, t.y0, t.x1, t.y1, {spans_column}, p.width, p.height, "
                f"t.kind, {links_column}, t.region "
                "FROM tiles t JOIN pages p ON p.doc_id = t.doc_id AND p.number = t.page "
                f"WHERE t.id IN ({marks})",
                batch,
            )
            for r in rows:
                found[r[0]] = TileRow(
                    r[0],
                    r[1],
                    r[2],
                    r[3],
                    tuple(r[4:8]),
                    json.loads(unpacked(r[8])) if spans else [],
                    (r[9], r[10]),
                    r[11],
                    json.loads(r[12]) if spans else [],
                    region_of(json.loads(r[13]) if r[13] else None, r[4:8]),
                )
        return found

    def tile_at(self, doc_id: str, page: int, idx: int) -> TileRow | None:
        """The tile ``idx`` of page ``page`` of ``doc_id``, with its spans (a band, or a layout
        region's unit: their indexes follow the bands')."""
        row = self.db.execute(
            "SELECT id FROM tiles WHERE doc_id = ? AND page = ? AND idx = ?", (doc_id, page, idx)
        ).fetchone()
        return self.tiles([row[0]]).get(row[0]) if row else None

    def page_tiles(self, doc_id: str, page: int) -> list[TileRow]:
        """The tiles (bands) of page ``page`` of ``doc_id`` in order, without their spans; layout
        regions' units are left out."""
        ids = [
            r[0]
            for r in self.db.execute(
                "SELECT id FROM tiles WHERE doc_id = ? AND page = ? AND region = '' ORDER BY idx",
                (doc_id, page),
            )
        ]
        found = self.tiles(ids, spans=False)
        return [found[i] for i in ids]

    def tile_image(self, tile_id: int) -> bytes | None:
        """The kept image (PNG) of tile ``tile_id``; None when it is rendered on demand."""
        row = self.db.execute("SELECT data FROM tile_images WHERE tile_id = ?", (int(tile_id),)).fetchone()
        return bytes(row[0]) if row else None

    def n_tiles(self, doc_id: str, page: int) -> int:
        """The bands of a page (layout regions' units left out)."""
        return self.db.execute(
            "SELECT COUNT(*) FROM tiles WHERE doc_id = ? AND page = ? AND region = ''", (doc_id, page)
        ).fetchone()[0]

    def page_regions(self, doc_id: str, page: int) -> list[Region]:
        """The layout regions detected on a page, top to bottom (none unless the index was made
        with layout regions)."""
        rows = self.db.execute(
            "SELECT kind, x0, y0, x1, y1, score FROM regions WHERE doc_id = ? AND page = ? ORDER BY y0, x0",
            (doc_id, page),
        )
        return [Region(kind, (x0, y0, x1, y1), score) for kind, x0, y0, x1, y1, score in rows]

    def tile_ids_of(self, doc_ids: Iterable[str]) -> np.ndarray:
        ids = list(doc_ids)
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(f"SELECT id FROM tiles WHERE doc_id IN ({marks})", ids).fetchall()
        return np.array([r[0] for r in rows], dtype=np.int64)

    def counts(self) -> dict[str, int]:
        def one(sql: str) -> int:
            return self.db.execute(sql).fetchone()[0]

        counts = {
            "documents": one("SELECT COUNT(*) FROM documents"),
            "pages": one("SELECT COUNT(*) FROM pages"),
            "tiles": one("SELECT COUNT(*) FROM tiles WHERE region = ''"),
            "vectors": one("SELECT COUNT(*) FROM vectors"),
            "visual_vectors": one("SELECT COUNT(*) FROM visual_vectors"),
            "ocr_pages": one("SELECT COUNT(*) FROM pages WHERE text_source = 'ocr'"),
        }
        if self.settings.layout:
            counts["regions"] = one("SELECT COUNT(*) FROM regions")
            counts["region_units"] = one("SELECT COUNT(*) FROM tiles WHERE region != ''")
        return counts

    def close(self) -> None:
        self.db.close()
