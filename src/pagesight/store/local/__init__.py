"""The local store: an index in one directory, its BM25 and vectors in segments (Lucene's and
tantivy's design), the mirror of ``store/qdrant/``.

Layout (``layout.py`` names every entry)::

    DIR/catalog.sqlite          the catalog, the source of truth (``store/catalog.py``)
    DIR/write.lock              the single writer's flock (``lock.py``)
    DIR/retrievers/current.json the pointer: {"format": 4, "generation": G, "segments": [names],
                                "deletes": {name: {"file": "deletes-G-R.npy", "count": N}},
                                "lexical": {...}, "dense": DIM, "visual": {...}}
    DIR/retrievers/bm25-G-PID-R/ a segment (``segment.py``): its tiles' BM25 postings
                                (``postings.py``), ``dense``, their text chunks' vectors
                                (``dense.py``), ``visual``, their visual vectors (``visual.py``),
                                and ``deletes-G-R.npy``, its delete bitset once a tile of it is
                                deleted (a new file each time, the pointer naming one)
    DIR/retrievers/merging.lock held by the merging process while it runs (``merging.py``)
    DIR/retrievers/bm25-merged-PID-R/, ...-R.ready.json
                                a merging process's segment, and its manifest once it is ready
                                for a writer to adopt

The life of a segment: a commit writes the segment of its new tiles under a new name, syncs it
and its folder, then replaces the pointer (synced, renamed, the folder synced again), so readers
and a power loss see the old set or the new one. A segment is never changed again: a delete writes
a new bitset for each segment it reaches (synced, renamed, its folder synced) and moves the
pointer to the new generation (``deletes.py``; a pointer of format 3 listed every deleted tile
instead, read as each segment's bitset until the next commit writes them). Segments merge ten of a tier into one (``bm25.
plan_merges``): up to ``merging.INLINE_MERGE`` tiles by the commit, larger ones by a merging
process beside the writer. What no pointer names is removed by the next writer (``layout.
removable``). A reader opens the segments the pointer names and searches them for as long as it
holds them (a mapping outlives its file); one finding the files behind the catalog builds what
they lack in memory and leaves the files to the next writer: no reader takes a lock.

The three locks and markers, by state (the writer holds ``write.lock`` for a commit; the merger
``merging.lock`` for its whole run, and ``write.lock`` only for the moment of a swap):

    state                    write.lock   merging.lock   .ready.json   what a crash leaves
    -----------------------  -----------  -------------  ------------  -----------------------------
    idle                     free         free           none          nothing
    commit: segment written  writer       any            any           an unnamed segment: removed
                                                                       by the next writer
    commit: pointer swap     writer       any            any           the old pointer or the new
    merge: segment written   any          merger         none          an unnamed bm25-merged-*:
                                                                       removed by the next writer
                                                                       once no merger runs
    merge: ready             writer       merger         written       the manifest and segment:
                                                                       adopted or dropped by the
                                                                       next writer's save
    merge: swap              merger       merger         written       the old pointer or the new
    adopt (writer's save)    writer       any            read, removed the old pointer or the new
    garbage collection       writer       tested, not    -             leftovers, removed next time
                                          taken
    repair (files behind)    next writer  any            any           nothing new: readers search
                                                                       from memory until it saves

``merging.lock`` is an open file description lock, so a writer asks whether a merger runs
(``layout.merger_running``, ``F_OFD_GETLK``) without taking it.

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
