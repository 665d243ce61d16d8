"""The Qdrant store's collections and payloads: constants, the client's models imported when first
needed, the connection for a location, the tiles collection's vectors, a tile point's payload read
back as a ``TileRow``, and scrolling through a filter."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from pagesight.errors import IndexLockedError, PagesightError
from pagesight.settings import Settings
from pagesight.store.rows import DocumentRow, TileRow, region_of

FORMAT_VERSION = 3  # 2: document points carry their where fields (fields.py); 3: so do tiles
DEFAULT_COLLECTION = "pagesight"
INDEX_POINT = 0  # the index's own point in NAME-catalog; documents have UUIDs made from their ids
BURSTS_POINT = 1  # ... and the collection's bursty words (bm25.Bm25Weights.update_bursts)
SCROLLED = 256  # points a scroll request reads
HEAVY = ["spans", "links", "text", "context", "image"]  # payload left out when only boxes are wanted


def qdrant_models():
    """qdrant-client's models, imported when first needed (the extra may be absent)."""
    from qdrant_client import models

    return models


def connect(location: str):
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
        address = f"{scheme}://{url.hostname}:{url.port or 6333}"
        client = QdrantClient(url=address, api_key=os.environ.get("QDRANT_API_KEY"))
        from qdrant_client.http.exceptions import ResponseHandlingException

        try:
            client.get_collections()  # the client connects lazily: asked once here, not mid-command
        except ResponseHandlingException as exc:
            raise PagesightError(
                f"{location}: no Qdrant server answers at {address} ({exc}); start it, or give the "
                "address of one (qdrant://HOST:PORT/NAME)"
            ) from None
        return client, name, None
    if not rest:
        raise PagesightError(f"{location}: give a folder (qdrant:PATH) or a server (qdrant://HOST:PORT/NAME)")
    path = Path(rest).expanduser()
    try:
        client = QdrantClient(path=str(path))
    except RuntimeError as exc:  # local mode allows one client per folder
        raise IndexLockedError(f"{location}: {exc}") from None
    return client, DEFAULT_COLLECTION, path


def ensure_tiles_collection(client, name: str, settings: Settings, spec: dict | None, local: bool) -> None:
    """The tiles collection ``name``, made when absent, with the vectors ``settings`` and the visual
    encoder's ``spec`` call for (see the package docstring); a server's gets payload indexes."""
    if client.collection_exists(name):
        return
    from pagesight.encode.dense import dense_dim

    models = qdrant_models()
    max_sim = models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
    vectors = {}
    if settings.dense_model:
        vectors["dense"] = models.VectorParams(
            size=dense_dim(settings.dense_model),
            distance=models.Distance.COSINE,
            multivector_config=max_sim,
        )
    if spec is not None:
        if spec["multi_vector"]:
            vectors["visual"] = models.VectorParams(
                size=spec["dim"],
                distance=models.Distance.COSINE,
                multivector_config=max_sim,
                hnsw_config=models.HnswConfigDiff(m=0),  # reranking only; the mean is searched
                quantization_config=quantization(settings.multi_vector_storage),
            )
            vectors["visual_mean"] = models.VectorParams(size=spec["dim"], distance=models.Distance.COSINE)
        else:
            vectors["visual"] = models.VectorParams(size=spec["dim"], distance=models.Distance.COSINE)
    client.create_collection(
        name,
        vectors_config=vectors,
        sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
    )
    if not local:  # local mode has no payload indexes (and warns)
        indexed = (("doc_id", "KEYWORD"), ("version", "KEYWORD"), ("live", "BOOL"), ("bm25_avg", "FLOAT"))
        for field, schema in indexed:
            client.create_payload_index(name, field, getattr(models.PayloadSchemaType, schema))


def quantization(storage: str):
    """Qdrant's quantization of the token vectors for ``Settings.multi_vector_storage``: int8
    scalar or binary codes kept in memory, the originals on disk for rescoring (None: float)."""
    models = qdrant_models()
    if storage == "int8":
        return models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, always_ram=True)
        )
    if storage == "binary":
        return models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True))
    return None


def is_document():
    """The condition of a NAME-catalog point being a document's."""
    models = qdrant_models()
    return models.FieldCondition(key="kind", match=models.MatchValue(value="document"))


DOCUMENT_ROW = ["id", "source", "sha256", "type", "size", "mtime_ns", "n_pages", "meta"]  # its payload keys


def document_row(payload: dict) -> DocumentRow:
    """A document point's payload read back as a ``DocumentRow``."""
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


def tile_row(tile_id: int, payload: dict, spans: bool) -> TileRow:
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
        region_of(payload.get("region"), payload["box"]),
    )


def scroll(client, collection: str, where, with_payload) -> Iterator:
    offset = None
    while True:
        records, offset = client.scroll(
            collection, scroll_filter=where, limit=SCROLLED, offset=offset, with_payload=with_payload
        )
        yield from records
        if offset is None:
            return
