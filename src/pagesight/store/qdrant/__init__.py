"""Qdrant as a store: the catalog and every retriever's vectors in Qdrant, so any number of search
processes on any machines share one index (a Qdrant server), or one folder in qdrant-client's
local mode (one process at a time; the same API as a server).

Locations::

    qdrant://HOST:PORT/COLLECTION     a server (https://... with QDRANT_API_KEY for a hosted one)
    qdrant:PATH                       local mode in the folder PATH, collection "pagesight"

Collections, for the collection name NAME:

    NAME          one point per tile: payload (document, page, tile box, page size, text spans with
                  boxes, links, content kind, text, its document's ``where`` fields; for a layout
                  region's unit its ``region``, [kind, score]) and the named vectors
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
    NAME-catalog  one point per document (its record, page sizes and layout regions), one for the index
                  (settings, generation, visual encoder spec, BM25 statistics, the writer's lease)
                  and one for the collection's bursty words that weigh a query's terms (counted
                  again by ``refresh`` when the tiles grew or shrank by ``BURST_RECOUNT``)

The tiles collection is created by the first ingestion, when the visual encoder's dimension is
known. Every tile and document point carries its document's ``where`` fields (``fields.py``), so a
filter is said over the tiles themselves. On a server, payload indexes on document, liveness,
version and each of those fields serve the filters.

Whole documents only. A document's tiles are written first, not yet live, under a new version; its
document point is the commit; then the new tiles turn live and the old version's are deleted.
Searches see live tiles only. Each write is noted as pending in the index point first, so the
next writer finishes or undoes what a killed one left.

Modules: ``store.py`` (the ``Store``: connection, writer, retrievers), ``catalog.py`` (documents
and tiles), ``lease.py`` (the single writer's lease), ``bm25.py`` (sparse BM25 weights),
``schema.py`` (collections, payloads, scrolling), ``points.py`` (a document's points as written),
``fields.py`` (the ``where`` fields and filters) and ``vectors.py`` (the retrievers' searches).
"""

from pagesight.store.qdrant.catalog import QdrantCatalog
from pagesight.store.qdrant.store import QdrantStore

__all__ = ["QdrantCatalog", "QdrantStore"]
