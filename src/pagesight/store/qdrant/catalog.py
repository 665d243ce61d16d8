"""The Qdrant store's catalog: the index point, documents and their tiles in the NAME-catalog and
NAME collections (see the package docstring), with whole-document writes."""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from pagesight.errors import IndexFormatError
from pagesight.records import Document, Region
from pagesight.settings import Settings
from pagesight.store.base import Allowed
from pagesight.store.qdrant.bm25 import Bm25Weights
from pagesight.store.qdrant.fields import WhereFields, tile_conditions
from pagesight.store.qdrant.lease import LEASE_SECONDS, Lease
from pagesight.store.qdrant.points import document_record, tile_counts, tile_points
from pagesight.store.qdrant.schema import (
    FORMAT_VERSION,
    HEAVY,
    INDEX_POINT,
    document_row,
    ensure_tiles_collection,
    is_document,
    qdrant_models,
    scroll,
    tile_row,
)
from pagesight.store.rows import DocumentRow, Kept, RowCache, TileRow


class QdrantCatalog(Lease, Bm25Weights, WhereFields):
    """The ``Catalog`` contract over the NAME-catalog and NAME collections."""

    def __init__(self, client, name: str, path: Path | None):
        self.client = client
        self.tiles_name = name
        self.catalog_name = f"{name}-catalog"
        self.path = path
        self.settings = Settings()
        self._index: dict = {}
        self._bursts: tuple[int, dict[str, float]] | None = None  # (count, weights) read last (bm25.py)
        self.derived = RowCache()  # what search stages derive from tiles (store.base.Catalog)
        self._headings: Kept[str] = Kept()  # kept as the SQLite catalog keeps them
        self._places: Kept[tuple[str, int]] = Kept()
        self._languages: Kept[str] = Kept()

    # The index point ---------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.client.collection_exists(self.catalog_name)

    def create(self, settings: Settings) -> None:
        self.client.create_collection(self.catalog_name, vectors_config={})
        self.settings = settings
        self._index = {
            "kind": "index",
            "format_version": FORMAT_VERSION,
            "settings": settings.to_dict(),
            "generation": 0,
            "next_tile_id": 1,
            "visual_spec": None,
            "bm25": {"tiles": 0, "terms": 0},
            "pending": {},
            "lease": None,
        }
        self._save_index()

    def load(self) -> dict:
        """Read the index record again (other processes write it); returns it."""
        found = self.client.retrieve(self.catalog_name, [INDEX_POINT], with_payload=True)
        if not found:
            raise IndexFormatError(f"{self.catalog_name}: not a pagesight index (no index point)")
        self._index = found[0].payload
        if self._index.get("format_version") in (1, 2):
            self._upgrade_fields()
        if self._index.get("format_version") != FORMAT_VERSION:
            raise IndexFormatError(
                f"{self.catalog_name}: index format version {self._index.get('format_version')}; "
                f"this build reads version {FORMAT_VERSION}"
            )
        self.settings = Settings.from_dict(self._index["settings"])
        return self._index

    def _save_index(self) -> None:
        models = qdrant_models()
        self.client.upsert(
            self.catalog_name, [models.PointStruct(id=INDEX_POINT, vector={}, payload=self._index)]
        )

    def drop(self) -> None:
        for name in (self.tiles_name, self.catalog_name):
            if self.client.collection_exists(name):
                self.client.delete_collection(name)

    def generation(self) -> int:
        self.load()
        return int(self._index["generation"])

    def snapshot(self):
        return nullcontext()

    def visual_spec(self) -> dict | None:
        self.load()
        return self._index.get("visual_spec")

    def set_visual_spec(self, spec: dict) -> None:
        self.load()
        self._index["visual_spec"] = spec
        self._save_index()

    # Documents ---------------------------------------------------------------------------------

    @staticmethod
    def _document_point(doc_id: str) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pagesight-document:{doc_id}"))

    def _document_payload(self, doc_id: str) -> dict | None:
        found = self.client.retrieve(self.catalog_name, [self._document_point(doc_id)], with_payload=True)
        return found[0].payload if found else None

    def document(self, doc_id: str) -> DocumentRow | None:
        payload = self._document_payload(doc_id)
        return document_row(payload) if payload else None

    def _document_payloads(self, **where) -> Iterator[dict]:
        models = qdrant_models()
        must = [is_document()]
        must += [models.FieldCondition(key=k, match=models.MatchValue(value=v)) for k, v in where.items()]
        for record in scroll(self.client, self.catalog_name, models.Filter(must=must), with_payload=True):
            yield record.payload

    def documents(self) -> list[DocumentRow]:
        return sorted((document_row(p) for p in self._document_payloads()), key=lambda row: row.id)

    def document_count(self) -> int:
        documents = qdrant_models().Filter(must=[is_document()])
        return self.client.count(self.catalog_name, count_filter=documents, exact=True).count

    def documents_from(self, source: str) -> list[DocumentRow]:
        return [document_row(p) for p in self._document_payloads(source=os.path.abspath(source))]

    def put_document(
        self,
        document: Document,
        vectors: dict[tuple[int, int], np.ndarray],
        visual: dict[tuple[int, int], np.ndarray] | None = None,
    ) -> None:
        """Store ``document`` whole, replacing any earlier version (see the module docstring)."""
        models = qdrant_models()
        self.load()
        ensure_tiles_collection(
            self.client, self.tiles_name, self.settings, self._index.get("visual_spec"), self.path is not None
        )
        version = uuid.uuid4().hex
        self._set_pending(document.id, version)
        previous = self._document_payload(document.id)
        tiles = [(page, tile) for page in document.pages for tile in page.tiles]
        first_id = int(self._index["next_tile_id"])
        self._index["next_tile_id"] = first_id + len(tiles)
        self._save_index()  # tile ids are never reused, even by a write that dies

        fields, terms = self._tile_terms(document, tiles)
        stats = self._index["bm25"]
        old_terms = previous.get("bm25_terms", 0) if previous else 0
        old_tiles = previous.get("tiles", 0) if previous else 0
        stats = {
            "tiles": stats["tiles"] - old_tiles + len(tiles),
            "terms": stats["terms"] - old_terms + sum(map(len, terms)),
        }
        average = stats["terms"] / stats["tiles"] if stats["tiles"] else 1.0
        record = document_record(document, version)
        where = record["where"] = self._where(record)  # each tile's too, so a search filters by them
        self._index_fields(where)
        points = tile_points(
            document,
            tiles,
            first_id,
            terms=terms,
            fields=fields,
            vectors=vectors,
            visual=visual or {},
            multi_vector=bool((self._index["visual_spec"] or {}).get("multi_vector")),
            average=average,
            version=version,
            where=where,
        )
        for start in range(0, len(points), 64):
            self.client.upsert(self.tiles_name, points[start : start + 64])
        record.update(tile_counts(document, points, terms))
        self.client.upsert(
            self.catalog_name,
            [models.PointStruct(id=self._document_point(document.id), vector={}, payload=record)],
        )  # the commit
        self._finish(document.id, version)
        self._committed(document, stats)

    def _tile_terms(self, document: Document, tiles: list) -> tuple[list, list]:
        """Each tile's fields (its document's context, its page's title, its table cells when the
        index weighs them) and the BM25 terms of its text read with them, in its page's language."""
        from pagesight.encode.lexical import indexed_text, tokenize
        from pagesight.text.tables import cell_text
        from pagesight.text.titles import context, tile_fields

        titles = tile_fields(
            context(document.id, document.meta),
            [(page.number, tile.index, tile.region is not None, tile.text) for page, tile in tiles],
        )
        weigh = self.settings.table_weight > 0
        fields = [(*field, cell_text(tile.spans) if weigh else "") for (_, tile), field in zip(tiles, titles)]
        texts = [
            indexed_text(tile.text, named, heading, self.settings, cells)
            for (_, tile), (named, heading, cells) in zip(tiles, fields)
        ]
        languages = [page.language for page, _ in tiles]
        return fields, tokenize(texts, self.settings.phrases, languages) if tiles else []

    def _committed(self, document: Document, stats: dict) -> None:
        """The index file after a document's commit: the collection's BM25 counts, the languages
        of its pages ever (a query is read in one of them, ``text.language``), the next generation,
        the document no longer pending, the writer's lease renewed."""
        self.load()
        self._index["bm25"] = stats
        held = set(self._index.get("languages", ["en"])) | {page.language for page in document.pages}
        self._index["languages"] = sorted(held)
        self._index["generation"] += 1
        self._index["pending"].pop(document.id, None)
        if self._index.get("lease"):
            self._index["lease"]["expires"] = time.time() + LEASE_SECONDS
        self._save_index()

    def pending(self) -> dict:
        return self._index.get("pending") or {}

    def _set_pending(self, doc_id: str, version: str | None) -> None:
        self._index["pending"][doc_id] = version
        self._save_index()

    def _finish(self, doc_id: str, version: str | None) -> None:
        """Make ``version`` of the document's tiles live and delete every other version's."""
        models = qdrant_models()
        if not self.client.collection_exists(self.tiles_name):
            return
        of_document = models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))
        if version is not None:
            this = models.FieldCondition(key="version", match=models.MatchValue(value=version))
            self.client.set_payload(self.tiles_name, {"live": True}, models.Filter(must=[of_document, this]))
            stale = models.Filter(must=[of_document], must_not=[this])
        else:
            stale = models.Filter(must=[of_document])
        self.client.delete(self.tiles_name, models.FilterSelector(filter=stale))

    def repair(self) -> None:
        """Finish or undo the writes a killed writer left pending."""
        self.load()
        if not self._index["pending"]:
            return
        for doc_id in list(self._index["pending"]):
            committed = self._document_payload(doc_id)  # the version its document point names
            self._finish(doc_id, committed["version"] if committed else None)
            self._index["pending"].pop(doc_id)
        self._save_index()

    def touch_document(self, doc_id: str, source: str, mtime_ns: int) -> None:
        payload = self._document_payload(doc_id)
        if payload is None:
            return
        payload.update(source=os.path.abspath(source), mtime_ns=mtime_ns)
        changed = {"source": payload["source"], "mtime_ns": mtime_ns, "where": self._where(payload)}
        self.client.set_payload(self.catalog_name, changed, [self._document_point(doc_id)])
        self.load()
        self._tiles_where(doc_id, changed["where"])

    def delete_document(self, doc_id: str) -> bool:
        previous = self._document_payload(doc_id)
        if previous is None:
            return False
        self.load()
        self._set_pending(doc_id, None)
        self.client.delete(self.catalog_name, [self._document_point(doc_id)])
        self._finish(doc_id, None)
        self.load()
        stats = self._index["bm25"]
        self._index["bm25"] = {
            "tiles": stats["tiles"] - previous.get("tiles", 0),
            "terms": stats["terms"] - previous.get("bm25_terms", 0),
        }
        self._index["generation"] += 1
        self._index["pending"].pop(doc_id, None)
        self._save_index()
        return True

    # Tiles and vectors -------------------------------------------------------------------------

    def live_filter(self, allowed: np.ndarray | Allowed | None = None):
        """Live tiles, of them the ``allowed``: an ``Allowed``'s filter said over the tiles' (indexed)
        fields where it can be (``fields.tile_conditions``), else its documents by the tiles'
        (indexed) ``doc_id`` payload; or tile ids."""
        models = qdrant_models()
        must = [models.FieldCondition(key="live", match=models.MatchValue(value=True))]
        by_fields = (
            tile_conditions(allowed.where)
            if isinstance(allowed, Allowed) and allowed.where is not None
            else None
        )
        if by_fields is not None:
            must.append(by_fields)
        elif isinstance(allowed, Allowed):
            must.append(models.FieldCondition(key="doc_id", match=models.MatchAny(any=list(allowed.doc_ids))))
        elif allowed is not None:
            must.append(models.HasIdCondition(has_id=[int(i) for i in allowed]))
        return models.Filter(must=must)

    def _has_tiles(self) -> bool:
        return self.client.collection_exists(self.tiles_name)

    def tiles(self, tile_ids: list[int], spans: bool = True) -> dict[int, TileRow]:
        if not tile_ids or not self._has_tiles():
            return {}
        models = qdrant_models()
        selector = True if spans else models.PayloadSelectorExclude(exclude=HEAVY)
        found = {}
        for start in range(0, len(tile_ids), 512):
            batch = [int(i) for i in tile_ids[start : start + 512]]
            for record in self.client.retrieve(self.tiles_name, batch, with_payload=selector):
                if record.payload.get("live"):
                    found[int(record.id)] = tile_row(int(record.id), record.payload, spans)
        return found

    def headings(self, tile_ids: list[int]) -> dict[int, str]:
        """Each tile's page heading as BM25 indexes it, stored with the tile (``put_document``)."""

        def read(ids: list[int]) -> dict[int, str]:
            return {i: payload.get("heading", "") for i, payload in self._payloads(ids, ["heading"]).items()}

        return self._headings.get(tile_ids, read)

    def tile_pages(self, tile_ids: list[int]) -> dict[int, tuple[str, int]]:
        """Each tile's document and page, kept (``store.base.Catalog``)."""

        def read(ids: list[int]) -> dict[int, tuple[str, int]]:
            return {i: (p["doc_id"], p["page"]) for i, p in self._payloads(ids, ["doc_id", "page"]).items()}

        return self._places.get(tile_ids, read)

    def tile_languages(self, tile_ids: list[int]) -> dict[int, str]:
        """Each tile's language, its page's, kept (``store.base.Catalog``)."""

        def read(ids: list[int]) -> dict[int, str]:
            return {i: p.get("language", "en") for i, p in self._payloads(ids, ["language"]).items()}

        return self._languages.get(tile_ids, read)

    def _payloads(self, tile_ids: list[int], keys: list[str]) -> dict[int, dict]:
        """The payload ``keys`` of each live tile of ``tile_ids``."""
        if not tile_ids or not self._has_tiles():
            return {}
        found = {}
        for start in range(0, len(tile_ids), 512):
            batch = tile_ids[start : start + 512]
            for record in self.client.retrieve(self.tiles_name, batch, with_payload=[*keys, "live"]):
                if record.payload.get("live"):
                    found[int(record.id)] = record.payload
        return found

    def _tile_records(
        self, doc_id: str, page: int | None = None, idx: int | None = None, heavy=False, bands=False
    ):
        models = qdrant_models()
        must = [
            models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id)),
            models.FieldCondition(key="live", match=models.MatchValue(value=True)),
        ]
        if page is not None:
            must.append(models.FieldCondition(key="page", match=models.MatchValue(value=page)))
        if idx is not None:
            must.append(models.FieldCondition(key="idx", match=models.MatchValue(value=idx)))
        if bands:  # layout regions' units left out
            must.append(models.IsEmptyCondition(is_empty=models.PayloadField(key="region")))
        selector = True if heavy else models.PayloadSelectorExclude(exclude=HEAVY)
        if not self._has_tiles():
            return []
        return list(scroll(self.client, self.tiles_name, models.Filter(must=must), with_payload=selector))

    def tile_at(self, doc_id: str, page: int, idx: int) -> TileRow | None:
        records = self._tile_records(doc_id, page, idx, heavy=True)
        return tile_row(int(records[0].id), records[0].payload, True) if records else None

    def page_tiles(self, doc_id: str, page: int) -> list[TileRow]:
        rows = [tile_row(int(r.id), r.payload, False) for r in self._tile_records(doc_id, page, bands=True)]
        return sorted(rows, key=lambda row: row.idx)

    def n_tiles(self, doc_id: str, page: int) -> int:
        return len(self._tile_records(doc_id, page, bands=True))

    def page_regions(self, doc_id: str, page: int) -> list[Region]:
        """The layout regions detected on a page, top to bottom (none unless the index was made
        with layout regions)."""
        payload = self._document_payload(doc_id) or {}
        found = payload.get("regions", {}).get(str(page), [])
        regions = [Region(kind, tuple(box), score) for kind, box, score in found]
        return sorted(regions, key=lambda r: (r.box[1], r.box[0]))

    def tile_ids_of(self, doc_ids: Iterable[str]) -> np.ndarray:
        ids = [int(r.id) for doc_id in doc_ids for r in self._tile_records(doc_id)]
        return np.array(sorted(ids), dtype=np.int64)

    def tile_texts(self) -> Iterator[tuple[int, str]]:
        if not self._has_tiles():
            return
        for record in scroll(self.client, self.tiles_name, self.live_filter(), with_payload=["text"]):
            yield int(record.id), record.payload["text"]

    def tile_image(self, tile_id: int) -> bytes | None:
        if not self._has_tiles():
            return None
        found = self.client.retrieve(self.tiles_name, [int(tile_id)], with_payload=["image"])
        data = found[0].payload.get("image") if found else None
        return bytes.fromhex(data) if data else None

    def vectors(self, tile_ids: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Chunk vectors as (tile id per row, float32 matrix), as the local catalog gives them."""
        wanted = [tid for tid, _ in self.tile_texts()] if tile_ids is None else [int(i) for i in tile_ids]
        ids, rows = [], []
        for start in range(0, len(wanted), 256):
            for record in self.client.retrieve(
                self.tiles_name, wanted[start : start + 256], with_vectors=["dense"]
            ):
                for chunk in (record.vector or {}).get("dense", []):
                    ids.append(int(record.id))
                    rows.append(chunk)
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        order = np.argsort(np.array(ids), kind="stable")
        return np.array(ids, dtype=np.int64)[order], np.array(rows, dtype=np.float32)[order]

    def visual_vectors(self, tile_ids: Iterable[int]) -> tuple[np.ndarray, list[np.ndarray]]:
        spec = self.visual_spec()
        wanted = [int(i) for i in tile_ids]
        if spec is None or not wanted or not self._has_tiles():
            return np.zeros(0, dtype=np.int64), []
        ids, arrays = [], []
        for record in self.client.retrieve(self.tiles_name, wanted, with_vectors=["visual"]):
            vector = (record.vector or {}).get("visual")
            if vector is not None:
                ids.append(int(record.id))
                arrays.append(np.asarray(vector, dtype=np.float32))
        order = np.argsort(ids, kind="stable")
        return np.array(ids, dtype=np.int64)[order], [arrays[i] for i in order]

    def counts(self) -> dict[str, int]:
        totals = Counter()
        for payload in self._document_payloads():
            totals.update(
                {
                    "documents": 1,
                    "pages": payload["n_pages"],
                    "tiles": payload.get("tiles", 0) - payload.get("units", 0),
                    "regions": sum(map(len, payload.get("regions", {}).values())),
                    "region_units": payload.get("units", 0),
                    "vectors": payload.get("chunks", 0),
                    "visual_vectors": payload.get("visual", 0),
                    "ocr_pages": payload.get("ocr_pages", 0),
                }
            )
        keys = ["documents", "pages", "tiles", "vectors", "visual_vectors", "ocr_pages"]
        if self.settings.layout:
            keys += ["regions", "region_units"]
        return {key: int(totals[key]) for key in keys}

    def close(self) -> None:
        """The client is the store's, closed with it."""
