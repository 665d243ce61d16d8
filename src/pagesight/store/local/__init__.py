"""The local store: an index in one directory, its BM25 and vectors in segments (Lucene's and
tantivy's design), the mirror of ``store/qdrant/``.

docs/segments.md is the one account of the folder, the pointer, the life of a segment, its locks
and markers by state, and what a crash or a power loss leaves. ``layout.py`` names every entry of
the folder and reads and writes the pointer (``layout.Pointer``, ``retrievers/current.json``).

Modules: ``store.py`` (the ``Store``: catalog, retrievers shared in a process, refresh), ``layout.py``
(names, pointer, delete bitsets, syncs, what may be removed), ``lock.py`` (the write lock),
``retrievers.py`` (load, build and save a generation), ``deletes.py`` (a commit that only
deletes), ``segment.py`` (``Segment``: postings, parts and deletes of some tiles; ``parts.py``: how
it holds its parts), ``postings.py``, ``bm25.py`` and ``maxscore.py`` (BM25 over segments),
``dense.py`` and ``visual.py`` (the vector parts and their searches over segments) and
``merging.py`` (segments merged into one, by the commit or beside the writers).
"""

from pagesight.store.local.store import LocalStore

__all__ = ["LocalStore"]
