"""The local store: one directory with the SQLite catalog and the retriever files derived from it
(the layout and the life of a segment: docs/segments.md).

Any number of processes search while one writes, and no reader takes the write lock: a reader
whose retriever files lag the catalog (a writer at work, or a crash) builds the missing part in
memory and leaves the files to the next writer, which repairs them under its lock.

The stores of one index in one process (a server's pool of connections) share what they built in
memory, so a commit costs one rebuild per process, not one per connection; and a store with
``max_lag`` > 0 serves retrievers up to that many seconds behind a writer at work, or twice as
long as the last rebuild took when that is longer, so a stream of commits costs a rebuild every
``max_lag`` seconds at most and never more than half a core (``pagesight serve`` uses this). There
the rebuild is made beside the searches, in a thread with a catalog connection of its own, and
the searches go on with the last build until it is ready: a commit never makes a search wait.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import weakref
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from pagesight.errors import IndexFormatError
from pagesight.priority import lower_this_thread
from pagesight.settings import Settings, check_settings
from pagesight.store.base import Retrievers
from pagesight.store.catalog import SQLiteCatalog
from pagesight.store.local import deletes
from pagesight.store.local.layout import CATALOG, FOLDER, WRITE_LOCK, Pointer, pointed_generation
from pagesight.store.local.lock import WriteLock
from pagesight.store.rows import RowCache

log = logging.getLogger(__name__)


class _Shared:
    """Retrievers built in memory for one index directory, shared by its stores in this process."""

    def __init__(self):
        self.lock = threading.Lock()  # one thread builds; the others wait for its result
        self.retrievers: Retrievers | None = None
        self.built = 0.0  # time.monotonic() of the build
        self.took = 0.0  # seconds the last build beside the searches took
        self.rows = RowCache()  # the tile rows the stores' searches read, with their lines
        self.derived = RowCache()  # what search stages derive from tiles (SQLiteCatalog.derived)
        self.building = False  # a build beside the searches is under way

    def lag(self, max_lag: float) -> float:
        """How far behind a writer the searches may be: ``max_lag``, or twice the last build's time
        when longer (a slow rebuild repeated every ``max_lag`` would take a core from the searches)."""
        return max(max_lag, 2 * self.took)


# Held by the stores open on each directory; gone with the last of them.
_SHARED: weakref.WeakValueDictionary[Path, _Shared] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def _files():
    """The retriever files' module (BM25, FAISS), imported when retrievers are first loaded or
    built: a delete reads and writes the pointer alone (``deletes``) and imports neither."""
    from pagesight.store.local import retrievers

    return retrievers


def _shared(root: Path) -> _Shared:
    with _SHARED_LOCK:
        shared = _SHARED.get(root.resolve())
        if shared is None:
            shared = _SHARED[root.resolve()] = _Shared()
        return shared


class LocalStore:
    def __init__(self, location: str | Path, *, create: bool, settings: Settings | Mapping[str, Any] | None):
        root = Path(location)
        self.root = root
        self.location = str(root)
        self.created: Path | None = None  # what this object made: removed again by discard()
        self._retrievers: Retrievers | None = None
        self.max_lag = 0.0  # seconds a search may lag a writer at work (see the module docstring)
        self._shared = _shared(root)
        self._refreshed: Retrievers | None = None  # the retrievers refresh() built, this store's own
        if not (root / CATALOG).exists():
            if not create:
                raise IndexFormatError(f"{root}: no pagesight index here")
            if root.exists() and (not root.is_dir() or any(root.iterdir())):
                raise IndexFormatError(f"{root}: exists and is not a pagesight index")
            self.created = root if not root.exists() else root / CATALOG
            self.catalog = SQLiteCatalog(root, Settings.given(settings))
            self.catalog.rows, self.catalog.derived = self._shared.rows, self._shared.derived
            return
        self.catalog = SQLiteCatalog(root)
        self.catalog.rows, self.catalog.derived = self._shared.rows, self._shared.derived
        check_settings(str(root), self.catalog.settings, settings)

    @staticmethod
    def exists(location: str | Path) -> bool:
        return (Path(location) / CATALOG).exists()

    def writing(self) -> AbstractContextManager:
        return WriteLock(self.root)

    def retrievers(self) -> Retrievers:
        """Retrievers matching the catalog now: loaded, or built in memory if the files lag."""
        generation = self.catalog.generation()
        if self._retrievers is not None and self._retrievers.generation == generation:
            return self._retrievers
        shared = self._shared
        if shared.retrievers is not None and shared.retrievers.generation == generation:
            self._retrievers = shared.retrievers
            return self._retrievers
        if pointed_generation(self.root) == generation:
            loaded = _files().load(self.root)
            if loaded is not None and loaded.generation == generation:
                with shared.lock:  # the other stores of this process take these instead of loading
                    shared.retrievers, shared.built = loaded, time.monotonic()
                self._retrievers = loaded
                return loaded
        # A writer at work, or one killed before it saved: search what is committed, built in
        # memory; the files are the next writer's to save (a reader never takes the write lock).
        self._retrievers = self._built_in_memory(generation)
        return self._retrievers

    def _built_in_memory(self, generation: int) -> Retrievers:
        """Retrievers for the catalog as committed while a writer is at work: built once per
        process for all its stores of this index, or the last ones built when they are at most
        ``max_lag`` seconds old."""
        shared = self._shared
        with shared.lock:
            current = shared.retrievers
            if current is not None and (
                current.generation == generation or time.monotonic() - shared.built < shared.lag(self.max_lag)
            ):
                return current
            if current is not None and self.max_lag > 0:  # a server: the next build made beside
                if not shared.building:
                    shared.building = True
                    threading.Thread(
                        target=self._build_beside, name="pagesight-retrievers", daemon=True
                    ).start()
                return current
            # Built from a copy of the files of its own: ``build`` updates the vector stores it is
            # given in place, and the shared ones are being searched by other threads.
            built = _files().build(self.catalog, _files().load(self.root), self._dense_dim())
            shared.retrievers, shared.built = built, time.monotonic()
            return built

    def _build_beside(self) -> None:
        """The committed catalog's retrievers, built through a connection of this thread's own
        (a store's connection is one transaction at a time) and shared when done."""
        shared = self._shared
        lower_this_thread()  # the searches go on meanwhile, and first
        try:
            started = time.monotonic()
            catalog = SQLiteCatalog(self.root)
            try:
                built = _files().build(catalog, _files().load(self.root), self._dense_dim())
            finally:
                catalog.close()
            with shared.lock:
                shared.retrievers, shared.built = built, time.monotonic()
                shared.took = shared.built - started
        except Exception:  # the searches go on with the last build; the next search tries again
            log.exception("%s: building the retrievers beside the searches failed", self.root)
        finally:
            with shared.lock:
                shared.building = False

    def refresh(self) -> None:
        generation = self.catalog.generation()
        if pointed_generation(self.root) == generation:  # the files, not what a reader built in memory
            return
        # Only deletions since the files were saved: a delete bitset for each segment they reach
        # (and neither bm25s nor FAISS loaded, so `pagesight delete` stays fast on any index size).
        if deletes.delete(self.root, self.catalog):
            self._retrievers = None  # loaded again, without the deleted tiles, by the next search
            return
        # ``build`` starts from saved segments (a new segment's parts are read by it alone): this
        # store's last save, or the files.
        mine = self._retrievers is not None and self._retrievers is self._refreshed
        pointer = Pointer.read(self.root / FOLDER)
        if mine and (
            pointer is None or [s.name for s in self._retrievers.lexical.segments] != pointer.segments
        ):
            mine = False  # a merge swapped segments in meanwhile (store.local.merging): start from the files
        previous = self._retrievers if mine else _files().load(self.root)
        built = _files().build(self.catalog, previous, self._dense_dim())
        self._retrievers = self._refreshed = _files().save(self.root, built)

    def _dense_dim(self) -> int | None:
        from pagesight.encode.dense import dense_dim

        name = self.catalog.settings.dense_model
        return dense_dim(name) if name else None

    def retrievers_generation(self) -> int | None:
        return pointed_generation(self.root)

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())

    def discard(self) -> None:
        """Remove the index this object created, before anything was stored in it."""
        if self.created is None or self.catalog.counts()["documents"]:
            return
        self.catalog.close()
        for name in (CATALOG, f"{CATALOG}-wal", f"{CATALOG}-shm", WRITE_LOCK):
            (self.root / name).unlink(missing_ok=True)
        shutil.rmtree(self.root / FOLDER, ignore_errors=True)
        if self.created == self.root and not any(self.root.iterdir()):
            self.root.rmdir()
        self.created = None

    def close(self) -> None:
        self.catalog.close()
