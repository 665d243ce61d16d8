"""Qdrant as a store: the catalog and every retriever's vectors in Qdrant, so any number of search
processes on any machines share one index (a Qdrant server), or one folder in qdrant-client's
local mode (one process at a time; the same API as a server).

Locations::

    qdrant://HOST:PORT/COLLECTION     a server (https://... with QDRANT_API_KEY for a hosted one)
    qdrant:PATH                       local mode in the folder PATH, collection "pagesight"

Collections, for the collection name NAME:

    NAME          one point per tile: payload (document, page, tile box, page size, text spans with
                  boxes, links, content kind, text; for a layout region's unit its
                  ``region``, [kind, score]) and the named vectors
                    "dense"   the tile's text chunks as one multi-vector compared by MAX_SIM, so
                              a tile scores as its best chunk, as in the local store
                    "bm25"    sparse BM25 term weights (Lucene's term frequency part); Qdrant
                              multiplies by the IDF at query time (``Modifier.IDF``). The
                              weights depend on the corpus's average tile length: each tile
                              records the average it was weighed with (``bm25_avg``), and the
                              end of each write weighs again the tiles whose average is off
                              by more than ``BM25_DRIFT`` (``refresh``)
                    "visual"  the visual encoder's vector, or for late interaction its token
                              vectors by MAX_SIM with "visual_mean" (their mean) as the prefetch,
                              as Qdrant's ColPali guidance does
    NAME-catalog  one point per document (its record, page sizes and layout regions) and one for the index
                  (settings, generation, visual encoder spec, BM25 statistics, the writer's lease)

The tiles collection is created by the first ingestion, when the visual encoder's dimension is
known. Payload indexes on document, liveness and version serve the document filters.

Whole documents only. A document's tiles are written first, not yet live, under a new version; its
document point is the commit; then the new tiles turn live and the old version's are deleted.
Searches see live tiles only. Each write is noted as pending in the index point first, so the
next writer finishes or undoes what a killed one left.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from pagesight.errors import IndexFormatError, IndexLockedError, PagesightError
from pagesight.records import Document, Region
from pagesight.settings import Settings, check_settings
from pagesight.store.base import Retrievers
from pagesight.store.catalog import DocumentRow, TileRow

FORMAT_VERSION = 1
DEFAULT_COLLECTION = "pagesight"
INDEX_POINT = 0  # the index's own point in NAME-catalog; documents have UUIDs made from their ids
BM25_K1, BM25_B = 1.2, 0.75  # as the local store's bm25s index
BM25_DRIFT = 0.01  # tiles weighed with an average tile length off by more are weighed again
LEASE_SECONDS = 600.0  # a writer that stops renewing its lease for this long is taken to be gone
PAGE = 256  # points per scroll request
_HEAVY = ["spans", "links", "text", "context", "image"]  # payload left out when only boxes are wanted


def _models():
    from qdrant_client import models

    return models


class QdrantStore:
    """The ``Store`` contract over Qdrant collections (see the module docstring)."""

    def __init__(self, location: str | Path, *, create: bool, settings: Settings | Mapping[str, Any] | None):
        self.location = str(location)
        self.client, self.name, self.path = _connect(self.location)
        self.catalog = QdrantCatalog(self.client, self.name, self.path)
        self.created = False
        self._lease: str | None = None
        if not self.catalog.exists():
            if not create:
                raise IndexFormatError(f"{self.location}: no pagesight index here")
            self.catalog.create(Settings.given(settings))
            self.created = True
            return
        self.catalog.load()
        check_settings(str(self.location), self.catalog.settings, settings)

    @staticmethod
    def exists(location: str | Path) -> bool:
        client, name, _ = _connect(str(location))
        try:
            return QdrantCatalog(client, name, None).exists()
        finally:
            client.close()

    @contextmanager
    def writing(self):
        """The single writer: a lease in the index point, renewed by each commit."""
        owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.catalog.take_lease(owner, self.location)
        try:
            self.catalog.repair()
            yield self
        finally:
            self.catalog.release_lease(owner)

    def retrievers(self) -> Retrievers:
        """Views of the tiles collection's vectors, as current as the catalog. A write a killed
        writer left half done is finished first when no writer is at work (as the local store
        repairs its files)."""
        catalog = self.catalog
        record = catalog.load()
        if record["pending"]:
            try:
                with self.writing():
                    pass  # taking the writer's place repairs
            except IndexLockedError:
                pass  # a writer is at work and finishes its own
            record = catalog.load()
        spec = record["visual_spec"]
        return Retrievers(
            generation=int(record["generation"]),
            lexical=Bm25Vectors(catalog),
            dense=DenseVectors(catalog) if catalog.settings.dense_model else None,
            visual=VisualVectors(catalog, bool(spec["multi_vector"])) if spec else None,
        )

    def refresh(self) -> None:
        """The vectors are written with their documents; only BM25 weights can lag: tiles written
        while the average tile length was another are weighed again."""
        self.catalog.reweigh_bm25()

    def retrievers_generation(self) -> int | None:
        return self.catalog.generation()

    def size_bytes(self) -> int | None:
        """Bytes of a local-mode folder; None for a server (its storage is the server's)."""
        if self.path is None:
            return None
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())

    def discard(self) -> None:
        """Remove the collections this object created when nothing was stored in them."""
        if self.created and not self.catalog.counts()["documents"]:
            self.catalog.drop()
            self.created = False

    def close(self) -> None:
        self.client.close()


def _connect(location: str):
    """(client, collection name, local-mode folder or None) for a ``qdrant:`` location."""
    try:
        from qdrant_client import QdrantClient
    except ImportError:
        raise PagesightError(
            "Qdrant stores need the 'qdrant' extra: pip install 'pagesight[qdrant]'"
        ) from None
    rest = location.removeprefix("qdrant:")
    if rest.startswith("//"):
        url = urlparse("http:" + rest)
        name = url.path.strip("/") or DEFAULT_COLLECTION
        if "/" in name:
            raise PagesightError(f"{location}: the collection name cannot contain '/'")
        scheme = "https" if url.port == 443 else "http"
        client = QdrantClient(
            url=f"{scheme}://{url.hostname}:{url.port or 6333}", api_key=os.environ.get("QDRANT_API_KEY")
        )
        return client, name, None
    if not rest:
        raise PagesightError(f"{location}: give a folder (qdrant:PATH) or a server (qdrant://HOST:PORT/NAME)")
    path = Path(rest).expanduser()
    try:
        client = QdrantClient(path=str(path))
    except RuntimeError as exc:  # local mode allows one client per folder
        raise IndexLockedError(f"{location}: {exc}") from None
    return client, DEFAULT_COLLECTION, path


class QdrantCatalog:
    """The ``Catalog`` contract over the NAME-catalog and NAME collections."""

    def __init__(self, client, name: str, path: Path | None):
        self.client = client
        self.tiles_name = name
        self.catalog_name = f"{name}-catalog"
        self.path = path
        self.settings = Settings()
        self._index: dict = {}

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
        if self._index.get("format_version") != FORMAT_VERSION:
            raise IndexFormatError(
                f"{self.catalog_name}: index format version {self._index.get('format_version')}; "
                f"this build reads version {FORMAT_VERSION}"
            )
        self.settings = Settings.from_dict(self._index["settings"])
        return self._index

    def _save_index(self) -> None:
        models = _models()
        self.client.upsert(
            self.catalog_name, [models.PointStruct(id=INDEX_POINT, vector={}, payload=self._index)]
        )

    def drop(self) -> None:
        for name in (self.tiles_name, self.catalog_name):
            if self.client.collection_exists(name):
                self.client.delete_collection(name)

    def take_lease(self, owner: str, location: str) -> None:
        self.load()
        lease = self._index.get("lease")
        if lease and lease["owner"] != owner and lease["expires"] > time.time() and not _dead(lease["owner"]):
            raise IndexLockedError(f"{location}: another process ({lease['owner']}) is writing this index")
        self._index["lease"] = {"owner": owner, "expires": time.time() + LEASE_SECONDS}
        self._save_index()

    def release_lease(self, owner: str) -> None:
        self.load()
        if (self._index.get("lease") or {}).get("owner") == owner:
            self._index["lease"] = None
            self._save_index()

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

    @staticmethod
    def _row(payload: dict) -> DocumentRow:
        return DocumentRow(
            payload["id"],
            Path(payload["source"]),
            payload["sha256"],
            payload["type"],
            payload["size"],
            payload["mtime_ns"],
            payload["n_pages"],
            payload.get("meta", {}),
        )

    def document(self, doc_id: str) -> DocumentRow | None:
        payload = self._document_payload(doc_id)
        return self._row(payload) if payload else None

    def _document_payloads(self, **where) -> Iterator[dict]:
        models = _models()
        must = [models.FieldCondition(key="kind", match=models.MatchValue(value="document"))]
        must += [models.FieldCondition(key=k, match=models.MatchValue(value=v)) for k, v in where.items()]
        for record in _scroll(self.client, self.catalog_name, models.Filter(must=must), with_payload=True):
            yield record.payload

    def documents(self) -> list[DocumentRow]:
        return sorted((self._row(p) for p in self._document_payloads()), key=lambda row: row.id)

    def documents_from(self, source: str) -> list[DocumentRow]:
        return [self._row(p) for p in self._document_payloads(source=os.path.abspath(source))]

    def put_document(
        self,
        document: Document,
        vectors: dict[tuple[int, int], np.ndarray],
        visual: dict[tuple[int, int], np.ndarray] | None = None,
    ) -> None:
        """Store ``document`` whole, replacing any earlier version (see the module docstring)."""
        from pagesight.encode.lexical import indexed_text, tokenize
        from pagesight.read.titles import context, tile_fields

        models = _models()
        visual = visual or {}
        self.load()
        self._ensure_tiles_collection()
        version = uuid.uuid4().hex
        self._set_pending(document.id, version)
        previous = self._document_payload(document.id)
        tiles = [(page, tile) for page in document.pages for tile in page.tiles]
        first_id = int(self._index["next_tile_id"])
        self._index["next_tile_id"] = first_id + len(tiles)
        self._save_index()  # tile ids are never reused, even by a write that dies

        fields = tile_fields(
            context(document.id, document.meta),
            [(page.number, tile.index, tile.region is not None, tile.text) for page, tile in tiles],
        )
        texts = [indexed_text(tile.text, *field, self.settings) for (_, tile), field in zip(tiles, fields)]
        terms = tokenize(texts) if tiles else []
        stats = self._index["bm25"]
        old_terms = previous.get("bm25_terms", 0) if previous else 0
        old_tiles = previous.get("tiles", 0) if previous else 0
        stats = {
            "tiles": stats["tiles"] - old_tiles + len(tiles),
            "terms": stats["terms"] - old_terms + sum(map(len, terms)),
        }
        average = stats["terms"] / stats["tiles"] if stats["tiles"] else 1.0
        points, chunks, with_visual = [], 0, 0
        for offset, ((page, tile), tile_terms, (named, heading)) in enumerate(zip(tiles, terms, fields)):
            vector: dict = {"bm25": _bm25_document(tile_terms, average)}
            matrix = vectors.get((page.number, tile.index))
            if matrix is not None and len(matrix):
                vector["dense"] = np.asarray(matrix, dtype=np.float32).tolist()
                chunks += len(matrix)
            image_vectors = visual.get((page.number, tile.index))
            if image_vectors is not None:
                vector.update(
                    _visual_vectors(image_vectors, bool(self._index["visual_spec"]["multi_vector"]))
                )
                with_visual += 1
            payload = {
                "doc_id": document.id,
                "page": page.number,
                "idx": tile.index,
                "box": [float(v) for v in tile.box],
                "page_size": [page.width, page.height],
                "text": tile.text,
                "context": named,
                "heading": heading,
                "spans": [[s.text, [round(v, 1) for v in s.box], s.source, s.conf] for s in tile.spans],
                "links": [[k.text, k.url, [[round(v, 1) for v in b] for b in k.boxes]] for k in tile.links],
                "kind": tile.kind,
                "chunks": 0 if matrix is None else len(matrix),
                "bm25_avg": average,
                "version": version,
                "live": False,
            }
            if tile.image is not None:
                payload["image"] = tile.image.hex()
            if tile.region is not None:  # absent for bands: page_tiles selects tiles without it
                payload["region"] = [tile.region.kind, tile.region.score]
            points.append(models.PointStruct(id=first_id + offset, vector=vector, payload=payload))
        for start in range(0, len(points), 64):
            self.client.upsert(self.tiles_name, points[start : start + 64])

        record = {
            "kind": "document",
            "id": document.id,
            "source": os.path.abspath(document.source),
            "sha256": document.sha256,
            "type": document.type,
            "size": document.size,
            "mtime_ns": document.mtime_ns,
            "n_pages": len(document.pages),
            "meta": document.meta,
            "pages": [[p.number, p.width, p.height, p.text_source] for p in document.pages],
            "regions": {
                str(p.number): [[r.kind, [float(v) for v in r.box], r.score] for r in p.regions]
                for p in document.pages
                if p.regions
            },
            "version": version,
            "tiles": len(tiles),
            "units": sum(tile.region is not None for _, tile in tiles),
            "chunks": chunks,
            "visual": with_visual,
            "bm25_terms": sum(map(len, terms)),
            "ocr_pages": sum(p.text_source == "ocr" for p in document.pages),
        }
        self.client.upsert(
            self.catalog_name,
            [models.PointStruct(id=self._document_point(document.id), vector={}, payload=record)],
        )  # the commit
        self._finish(document.id, version)
        self.load()
        self._index["bm25"] = stats
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
        models = _models()
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
        self.client.set_payload(
            self.catalog_name,
            {"source": os.path.abspath(source), "mtime_ns": mtime_ns},
            [self._document_point(doc_id)],
        )

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

    def bm25_average(self) -> float:
        """The average tile length in BM25 terms, over the live tiles."""
        stats = self.load()["bm25"]
        return stats["terms"] / stats["tiles"] if stats["tiles"] else 1.0

    def reweigh_bm25(self, drift: float = BM25_DRIFT) -> int:
        """Weigh again the live tiles whose BM25 weights used an average tile length more than
        ``drift`` away from today's; returns how many. Early tiles of a growing index are the
        ones: each document is weighed with the average known when it was written."""

        if not self._has_tiles():
            return 0
        models = _models()
        average = self.bm25_average()
        close = models.FieldCondition(
            key="bm25_avg", range=models.Range(gte=average / (1 + drift), lte=average * (1 + drift))
        )
        stale = models.Filter(must=self.live_filter().must, must_not=[close])
        count, batch = 0, []
        for record in _scroll(
            self.client, self.tiles_name, stale, with_payload=["text", "context", "heading"]
        ):
            batch.append(record)
            if len(batch) == PAGE:
                count += self._reweigh(batch, average)
                batch = []
        return count + (self._reweigh(batch, average) if batch else 0)

    def _reweigh(self, batch: list, average: float) -> int:
        from pagesight.encode.lexical import indexed_text, tokenize

        models = _models()
        texts = [
            indexed_text(
                r.payload.get("text", ""),
                r.payload.get("context", ""),
                r.payload.get("heading", ""),
                self.settings,
            )
            for r in batch
        ]
        terms = tokenize(texts)
        points = [
            models.PointVectors(id=r.id, vector={"bm25": _bm25_document(t, average)})
            for r, t in zip(batch, terms)
        ]
        self.client.update_vectors(self.tiles_name, points)
        # The weights first, then the mark: a writer killed in between leaves the mark stale, and
        # the next refresh weighs those tiles again.
        self.client.set_payload(self.tiles_name, {"bm25_avg": average}, points=[r.id for r in batch])
        return len(batch)

    # Tiles and vectors -------------------------------------------------------------------------

    def _ensure_tiles_collection(self) -> None:
        if self.client.collection_exists(self.tiles_name):
            return
        from pagesight.encode.dense import dense_dim

        models = _models()
        max_sim = models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
        vectors = {}
        if self.settings.dense_model:
            vectors["dense"] = models.VectorParams(
                size=dense_dim(self.settings.dense_model),
                distance=models.Distance.COSINE,
                multivector_config=max_sim,
            )
        spec = self._index.get("visual_spec")
        if spec is not None:
            if spec["multi_vector"]:
                vectors["visual"] = models.VectorParams(
                    size=spec["dim"],
                    distance=models.Distance.COSINE,
                    multivector_config=max_sim,
                    hnsw_config=models.HnswConfigDiff(m=0),  # reranking only; the mean is searched
                )
                vectors["visual_mean"] = models.VectorParams(
                    size=spec["dim"], distance=models.Distance.COSINE
                )
            else:
                vectors["visual"] = models.VectorParams(size=spec["dim"], distance=models.Distance.COSINE)
        self.client.create_collection(
            self.tiles_name,
            vectors_config=vectors,
            sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        if self.path is None:  # local mode has no payload indexes (and warns)
            indexed = (("doc_id", "KEYWORD"), ("version", "KEYWORD"), ("live", "BOOL"), ("bm25_avg", "FLOAT"))
            for field, schema in indexed:
                self.client.create_payload_index(
                    self.tiles_name, field, getattr(models.PayloadSchemaType, schema)
                )

    def live_filter(self, allowed: np.ndarray | None = None):
        models = _models()
        must = [models.FieldCondition(key="live", match=models.MatchValue(value=True))]
        if allowed is not None:
            must.append(models.HasIdCondition(has_id=[int(i) for i in allowed]))
        return models.Filter(must=must)

    def _has_tiles(self) -> bool:
        return self.client.collection_exists(self.tiles_name)

    def tiles(self, tile_ids: list[int], spans: bool = True) -> dict[int, TileRow]:
        if not tile_ids or not self._has_tiles():
            return {}
        models = _models()
        selector = True if spans else models.PayloadSelectorExclude(exclude=_HEAVY)
        found = {}
        for start in range(0, len(tile_ids), 512):
            batch = [int(i) for i in tile_ids[start : start + 512]]
            for record in self.client.retrieve(self.tiles_name, batch, with_payload=selector):
                if record.payload.get("live"):
                    found[int(record.id)] = _tile_row(int(record.id), record.payload, spans)
        return found

    def _tile_records(
        self, doc_id: str, page: int | None = None, idx: int | None = None, heavy=False, bands=False
    ):
        models = _models()
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
        selector = True if heavy else models.PayloadSelectorExclude(exclude=_HEAVY)
        if not self._has_tiles():
            return []
        return list(_scroll(self.client, self.tiles_name, models.Filter(must=must), with_payload=selector))

    def tile_at(self, doc_id: str, page: int, idx: int) -> TileRow | None:
        records = self._tile_records(doc_id, page, idx, heavy=True)
        return _tile_row(int(records[0].id), records[0].payload, True) if records else None

    def page_tiles(self, doc_id: str, page: int) -> list[TileRow]:
        rows = [_tile_row(int(r.id), r.payload, False) for r in self._tile_records(doc_id, page, bands=True)]
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
        for record in _scroll(self.client, self.tiles_name, self.live_filter(), with_payload=["text"]):
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


def _dead(owner: str) -> bool:
    """Whether a lease's owner (``host:pid:nonce``) is a process of this host that has ended."""
    host, pid, _ = owner.rsplit(":", 2)
    if host != socket.gethostname():
        return False  # another machine's writer: its lease runs out on its own
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    return False


def _tile_row(tile_id: int, payload: dict, spans: bool) -> TileRow:
    return TileRow(
        tile_id,
        payload["doc_id"],
        payload["page"],
        payload["idx"],
        tuple(payload["box"]),
        payload.get("spans", []) if spans else [],
        tuple(payload["page_size"]),
        payload.get("kind", ""),
        payload.get("links", []) if spans else [],
        Region(payload["region"][0], tuple(payload["box"]), payload["region"][1])
        if payload.get("region")
        else None,
    )


def _scroll(client, collection: str, where, with_payload) -> Iterator:
    offset = None
    while True:
        records, offset = client.scroll(
            collection, scroll_filter=where, limit=PAGE, offset=offset, with_payload=with_payload
        )
        yield from records
        if offset is None:
            return


def term_index(term: str) -> int:
    """A stable sparse-vector dimension for a term (CRC-32, 31 bits)."""
    return zlib.crc32(term.encode()) & 0x7FFFFFFF


def _bm25_document(terms: list[str], average_length: float):
    """Lucene's BM25 term-frequency part for each term of a tile; Qdrant applies the IDF."""
    models = _models()
    counts = Counter(terms)
    norm = BM25_K1 * (1 - BM25_B + BM25_B * len(terms) / max(average_length, 1e-9))
    weights: dict[int, float] = {}
    for term, tf in counts.items():
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + tf / (tf + norm)
    return models.SparseVector(indices=list(weights), values=list(weights.values()))


def _visual_vectors(vectors: np.ndarray, multi_vector: bool) -> dict:
    matrix = np.asarray(vectors, dtype=np.float32)
    if not multi_vector:
        return {"visual": matrix.reshape(-1).tolist()}
    matrix = np.atleast_2d(matrix)
    return {"visual": matrix.tolist(), "visual_mean": matrix.mean(axis=0).tolist()}


class _Vectors:
    """A named vector of the live tiles, searched in Qdrant with an allowed set of tile ids."""

    using = ""

    def __init__(self, catalog: QdrantCatalog):
        self.catalog = catalog
        self.client = catalog.client

    def tile_ids(self) -> np.ndarray:
        return np.array(sorted(tid for tid, _ in self.catalog.tile_texts()), dtype=np.int64)

    def add(self, tile_ids: np.ndarray, vectors) -> None:
        """Set this vector of the given tiles (their points exist: the catalog wrote them)."""
        models = _models()
        points = [models.PointVectors(id=int(i), vector=self._stored(v)) for i, v in zip(tile_ids, vectors)]
        if points:
            self.client.update_vectors(self.catalog.tiles_name, points)

    def remove(self, tile_ids: np.ndarray) -> None:
        if len(tile_ids):
            names = list(self._stored_names())
            self.client.delete_vectors(self.catalog.tiles_name, names, [int(i) for i in tile_ids])

    def _stored(self, vector) -> dict:
        return {self.using: np.asarray(vector, dtype=np.float32).tolist()}

    def _stored_names(self) -> tuple[str, ...]:
        return (self.using,)

    def _query(self, query, n: int, allowed, **options) -> list[tuple[int, float]]:
        if (allowed is not None and not len(allowed)) or not self.catalog._has_tiles():
            return []
        found = self.client.query_points(
            self.catalog.tiles_name,
            query=query,
            using=self.using,
            limit=n,
            query_filter=self.catalog.live_filter(allowed),
            with_payload=False,
            **options,
        )
        return [(int(p.id), float(p.score)) for p in found.points]


class Bm25Vectors(_Vectors):
    using = "bm25"

    def search(self, query: str, n: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        from pagesight.encode.lexical import tokenize

        models = _models()
        counts = Counter(term_index(t) for t in tokenize([query])[0])
        if not counts:
            return []
        vector = models.SparseVector(indices=list(counts), values=[float(c) for c in counts.values()])
        return [pair for pair in self._query(vector, n, allowed) if pair[1] > 0]

    def _stored(self, vector) -> dict:
        return {self.using: vector}  # a SparseVector made by the catalog's BM25 weighting


class DenseVectors(_Vectors):
    using = "dense"

    def search(self, query: np.ndarray, n: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        return self._query([np.asarray(query, dtype=np.float32).tolist()], n, allowed)


class VisualVectors(_Vectors):
    using = "visual"

    def __init__(self, catalog: QdrantCatalog, multi_vector: bool, prefetch: int = 512):
        super().__init__(catalog)
        self.multi_vector = multi_vector
        self.prefetch = prefetch

    def _stored(self, vector) -> dict:
        return _visual_vectors(vector, self.multi_vector)

    def _stored_names(self) -> tuple[str, ...]:
        return ("visual", "visual_mean") if self.multi_vector else ("visual",)

    def search(self, query: np.ndarray, n: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        matrix = np.asarray(query, dtype=np.float32)
        if not self.multi_vector:
            return self._query(matrix.reshape(-1).tolist(), n, allowed)
        models = _models()
        mean = matrix.mean(axis=0)
        prefetch = models.Prefetch(
            query=(mean / max(np.linalg.norm(mean), 1e-12)).tolist(),
            using="visual_mean",
            limit=max(self.prefetch, n),
            filter=self.catalog.live_filter(allowed),
        )
        return self._query(matrix.tolist(), n, allowed, prefetch=prefetch)
