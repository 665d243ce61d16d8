"""The Qdrant store: the ``Store`` contract (``store/base.py``) over a Qdrant server or a local-mode
folder; see the package docstring for the collections."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pagesight.errors import IndexFormatError, IndexLockedError
from pagesight.settings import Settings, check_settings
from pagesight.store.base import Retrievers
from pagesight.store.qdrant.catalog import QdrantCatalog
from pagesight.store.qdrant.schema import connect
from pagesight.store.qdrant.vectors import Bm25Vectors, DenseVectors, VisualVectors


class QdrantStore:
    """The ``Store`` contract over Qdrant collections (see the module docstring)."""

    def __init__(self, location: str | Path, *, create: bool, settings: Settings | Mapping[str, Any] | None):
        self.location = str(location)
        self.client, self.name, self.path = connect(self.location)
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
        client, name, _ = connect(str(location))
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
            lexical=Bm25Vectors(catalog, catalog.bursts(), tuple(record.get("languages", ["en"]))),
            dense=DenseVectors(catalog) if catalog.settings.dense_model else None,
            visual=VisualVectors(catalog, bool(spec["multi_vector"])) if spec else None,
        )

    def refresh(self) -> None:
        """The vectors are written with their documents; only BM25 weights can lag: tiles written
        while the average tile length was another are weighed again, and the bursty words are
        counted again when the collection has grown or shrunk enough."""
        self.catalog.reweigh_bm25()
        self.catalog.update_bursts()

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
