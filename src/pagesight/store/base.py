"""The store contract: where an index keeps its records and its searchable vectors.

A store holds

- a **catalog**: the documents with their pages and tiles (each tile's box, text spans with
  boxes, content kind and links), the settings the index was made with, the visual encoder's spec,
  and a *generation* that every committed write increases. Each document is written whole or not
  at all. It is the source of truth.
- **vector stores**, one per retriever (``bm25`` over tile text, ``dense`` text chunks, ``visual``
  tile images), each answering ``search(query, n, allowed)`` with (tile id, score) pairs, best
  first, and kept in step with the catalog's generation (``Retrievers``).

Stores are chosen by the scheme of a location through ``STORES``, the way encoders and readers are
chosen by name: a plain path is the ``local`` store (SQLite, bm25s and FAISS files in one
directory). ``register_store`` adds one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pagesight.registry import Registry
from pagesight.settings import Settings

if TYPE_CHECKING:
    from pagesight.records import Document, Region
    from pagesight.store.rows import DocumentRow, TileRow
    from pagesight.where import Filter


class Catalog(Protocol):
    """Documents, pages and tiles of an index; what every stage reads and ingestion writes.

    A method given ids that it does not hold leaves them out of what it returns (a dict or an
    array) or returns None (one row); none raises for an unknown id. Writes happen inside the
    store's ``writing()``; a read never blocks on a writer. ``pagesight.testing.store`` checks
    these promises."""

    settings: Settings  # what the index was made with
    derived: Any  # a catalog.RowCache: what search stages derive from tiles, by id (search.words)

    def generation(self) -> int:
        """A number that every committed write increases (never decreases, never repeats)."""

    def snapshot(self) -> AbstractContextManager:
        """A context in which several reads see one committed state."""

    def document(self, doc_id: str) -> DocumentRow | None:
        """The document ``doc_id``, None when it is not held."""

    def documents(self) -> list[DocumentRow]:
        """Every document, by id."""

    def documents_where(self, given: Filter) -> list[DocumentRow]:
        """The documents whose fields (``where.document_fields``) pass ``given``, by id: exactly
        those, however the store narrows them (Qdrant: by payload conditions on the server)."""

    def document_count(self) -> int:
        """How many documents it holds."""

    def documents_from(self, source: str) -> list[DocumentRow]:
        """The documents read from file ``source`` (a ZIM archive holds one an article), by id."""

    def put_document(
        self,
        document: Document,
        vectors: dict[tuple[int, int], np.ndarray],
        visual: dict[tuple[int, int], np.ndarray] | None = None,
    ) -> None:
        """Store ``document`` whole, replacing an earlier version of the same id, in one
        transaction: its pages, tiles (new tile ids, above every id used before), text chunk
        ``vectors`` and ``visual`` vectors by (page, tile index). A failure leaves the catalog as
        it was."""

    def touch_document(self, doc_id: str, source: str, mtime_ns: int) -> None:
        """Record a new path or modification time of a document whose content is unchanged."""

    def delete_document(self, doc_id: str) -> bool:
        """Remove the document and its pages, tiles and vectors; whether it was held."""

    def tiles(self, tile_ids: list[int], spans: bool = True) -> dict[int, TileRow]:
        """Tile rows by id (``spans=False``: their text spans left out, empty)."""

    def headings(self, tile_ids: list[int]) -> dict[int, str]:
        """Each tile's page heading as BM25 indexed it (empty for the bands after a page's first)."""

    def tile_pages(self, tile_ids: list[int]) -> dict[int, tuple[str, int]]:
        """Each tile's (document id, page number)."""

    def tile_languages(self, tile_ids: list[int]) -> dict[int, str]:
        """Each tile's language: its page's (``text.language``, a code of ``choices.LANGUAGES``)."""

    def tile_at(self, doc_id: str, page: int, idx: int) -> TileRow | None:
        """Tile ``idx`` (band order, from 0) of page ``page`` (from 1) of ``doc_id``, with spans."""

    def page_tiles(self, doc_id: str, page: int) -> list[TileRow]:
        """The bands of a page in order, without spans (layout regions' units left out)."""

    def n_tiles(self, doc_id: str, page: int) -> int:
        """How many bands the page has (0 when it is not held)."""

    def page_regions(self, doc_id: str, page: int) -> list[Region]:
        """The layout regions found on a page, top to bottom (none without layout regions)."""

    def tile_ids_of(self, doc_ids: Iterable[str]) -> np.ndarray:
        """The tile ids (int64) of the documents ``doc_ids``, regions' units included."""

    def tile_texts(self) -> Iterator[tuple[int, str]]:
        """Every tile's (id, indexed text), by id."""

    def tile_image(self, tile_id: int) -> bytes | None:
        """The tile's kept image (PNG bytes); None when its pixels are rendered again on demand."""

    def vectors(self, tile_ids: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Text chunk vectors of the tiles (all: None) as (tile id per row, float32 matrix), a
        tile's chunks together and in order."""

    def visual_vectors(self, tile_ids: Iterable[int]) -> tuple[np.ndarray, list[np.ndarray]]:
        """The visual vectors of the tiles that have them, by tile id: (tile ids, one float32 array
        each, ``(dim,)`` for a single-vector encoder, ``(n_tokens, dim)`` for a multi-vector one)."""

    def visual_spec(self) -> dict | None:
        """The visual encoder that wrote the visual vectors (``VisualEncoder.spec``), None if none."""

    def set_visual_spec(self, spec: dict) -> None:
        """Record the visual encoder, once, at its first use."""

    def counts(self) -> dict[str, int]:
        """How many documents, pages, tiles (bands), vectors, visual vectors and OCR'd pages it
        holds (and regions, with layout regions)."""

    def close(self) -> None:
        """Let go of its files and connections; it is not used after."""


class Allowed:
    """The tiles a search may return: those of the documents ``doc_ids``. A store that filters by
    document reads ``doc_ids`` (Qdrant: a condition on the tiles' indexed ``doc_id`` payload, so no
    tile is listed), or ``where``, the filter they are all the documents passing, when one is given
    and it can say it over its tiles (Qdrant: conditions on the tiles' indexed fields, so no
    document is listed either); the local vector stores read it as an array of tile ids
    (``np.asarray``), listed by ``tile_ids`` when first asked."""

    def __init__(
        self, doc_ids: Iterable[str], tile_ids: Callable[[], np.ndarray], where: Filter | None = None
    ):
        self.doc_ids = tuple(doc_ids)
        self.where = where
        self._list = tile_ids
        self._tile_ids: np.ndarray | None = None

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if self._tile_ids is None:
            self._tile_ids = np.asarray(self._list(), dtype=np.int64)
        return self._tile_ids if dtype is None else self._tile_ids.astype(dtype)


@dataclass(frozen=True)
class Effort:
    """How widely a vector search looks, where its index has the structure a setting belongs to
    (None: the index's own; an exact search reads none): ``ef`` MUVERA candidates re-scored by
    exact MaxSim, ``nprobe`` IVF cells visited, ``ef_search`` an HNSW graph's beam. The
    ``SearchRequest`` fields of the same names."""

    ef: int | None = None
    nprobe: int | None = None
    ef_search: int | None = None


class VectorStore(Protocol):
    """The vectors of one retriever, identified by tile id (a tile may hold several vectors), as a
    search reads them. How they are written is the store's: the local store derives them from the
    catalog into files (``MutableVectorStore``), Qdrant writes them with their documents. ``allowed``
    is an array of tile ids or an ``Allowed``. A lexical store's ``search`` also takes the query's
    ``language`` (``text.language``; None: told from the query among its ``languages``, those of
    its pages); a dense or visual one's takes ``effort`` (an ``Effort``; None: the index's own),
    and refuses a setting that no index of its kind has (Qdrant's, nprobe) with a
    ``PagesightError`` naming it."""

    def tile_ids(self) -> np.ndarray:
        """The tiles it holds vectors of (int64)."""

    def search(
        self, query: Any, n: int, allowed: np.ndarray | Allowed | None = None
    ) -> list[tuple[int, float]]:
        """At most ``n`` (tile id, score) pairs, best first, each tile once, only ``allowed`` ones
        when given (an empty ``allowed`` gives none); a lexical store leaves out tiles scoring 0."""


class MutableVectorStore(VectorStore, Protocol):
    """A vector store brought up to its catalog by adding and removing tiles (``store/local/retrievers.py``)."""

    def add(self, tile_ids: np.ndarray, vectors: Any) -> None:
        """Hold ``vectors`` for ``tile_ids``, tiles it does not hold yet (a tile's rows together)."""

    def remove(self, tile_ids: np.ndarray) -> None:
        """Drop every vector of ``tile_ids``; a tile not held is ignored."""


@dataclass
class Retrievers:
    """The vector stores of one catalog generation: BM25 always, dense and visual when the index
    has them."""

    generation: int
    lexical: VectorStore
    dense: VectorStore | None
    visual: VectorStore | None = None


class Store(Protocol):
    """One index's catalog and vector stores, opened from a location."""

    location: str
    catalog: Catalog

    def writing(self) -> AbstractContextManager:
        """The single writer's hold on the index, for a ``with`` block; ``IndexLockedError`` naming
        the index when another writer holds it."""

    def retrievers(self) -> Retrievers:
        """The vector stores matching the catalog now, built first where they lag it (a reader
        builds them in memory, a writer saves them)."""

    def refresh(self) -> None:
        """Inside ``writing()``: bring the saved vector stores up to the catalog."""

    def retrievers_generation(self) -> int | None:
        """The catalog generation the vector stores match (the local store's saved files, Qdrant's
        catalog: its vectors are written with their documents); None when none are saved."""

    def size_bytes(self) -> int | None:
        """The bytes the index's files take; None where its storage is a server's (Qdrant's)."""

    def discard(self) -> None:
        """Remove a store this process created and stored nothing in (an open that failed)."""

    def close(self) -> None:
        """Let go of its files and connections; it is not used after."""


# Scheme -> "module:Class"; the class takes (location, create=, settings=) and is a Store, and its
# static ``exists(location)`` says whether an index is there.
STORES = Registry(
    "store",
    "pagesight.stores",
    {"local": "pagesight.store.local:LocalStore", "qdrant": "pagesight.store.qdrant:QdrantStore"},
)


def register_store(scheme: str, target: str) -> None:
    """Make a store available for locations ``scheme:...``; ``target`` is ``"module:factory"``."""
    STORES.register(scheme, target)


def open_store(location: str | Path, *, create: bool, settings: Settings | Mapping[str, Any] | None) -> Store:
    """The store at ``location`` (``scheme:rest``, or a path for the local store), created with
    ``settings`` when ``create`` and absent, else checked against them (``check_settings``)."""
    return _store_class(location)(location, create=create, settings=settings)


def store_exists(location: str | Path) -> bool:
    """Whether an index is at ``location`` already."""
    return _store_class(location).exists(location)


def _store_class(location: str | Path):
    return STORES.load(_scheme(str(location)))


def _scheme(location: str) -> str:
    head, sep, _ = location.partition(":")
    # "C:\\..." and plain paths are local; a registered scheme names another store
    return head if sep and head in STORES and len(head) > 1 else "local"
