"""Retriever files derived from the catalog: BM25 segments and FAISS, tagged with a catalog
generation.

Layout inside the index directory::

    retrievers/current.json       {"format": 3, "generation": G, "segments": ["bm25-...", ...],
                                   "dense": DIM, "visual": {how its parts are made} or null,
                                   "removed": [tile ids]}
    retrievers/bm25-G-PID-R/      one segment: its tiles' BM25 postings (store/bm25.py),
                                  dense, their text chunks' vectors (store/dense.py), and
                                  visual, their visual encoder's vectors (store/visual.py: a
                                  VectorIndex file, or a MUVERA folder)

A commit adds a segment of its new tiles: their terms, analysed alone, their chunk vectors and
their visual vectors, so a commit costs what it adds; segments are merged by ``bm25.plan_merges``
as they pile up, the small merges by the commit and the larger ones by ``store.merging``, a
merged segment written before the pointer names it. New files are written under new names and ``current.json`` is replaced atomically, so a reader sees
either the old set or the new one, and a process killed while writing a segment or a merge leaves
the old set. Files that ``current.json`` does not name are leftovers of a crash or of an older
generation and are removed by the next writer.

Deleting documents rewrites no file: the pointer moves to the new generation and lists the tiles
gone (``removed``), tombstones that every reader drops from the loaded stores (Lucene's deleted
documents) and BM25's statistics leave out. So a delete costs a pointer write, whatever the index
size; a merge drops the tombstoned tiles for good.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pagesight.encode.lexical import indexed_text
from pagesight.store.base import Retrievers
from pagesight.store.local import layout, merging
from pagesight.store.local.bm25 import LexicalRetriever, segment
from pagesight.store.local.dense import DenseRetriever, DenseSegments
from pagesight.store.local.layout import DENSE, FOLDER, POINTER, VISUAL, collect, sync_new, write_pointer
from pagesight.store.local.segment import segments
from pagesight.store.local.visual import VisualSegments

if TYPE_CHECKING:
    from pagesight.store.catalog import Catalog


def load(root: Path) -> Retrievers | None:
    """The retrievers ``current.json`` names, or None when there are none (or they vanished)."""
    folder = root / FOLDER
    for _ in range(3):  # a writer or a merge may swap the files between reading the pointer and them
        try:
            pointer = json.loads((folder / POINTER).read_text())
            if not layout.readable(pointer):  # an older build's files: built again
                return None
            lexical, dense, visual = segments(folder, pointer)
            return Retrievers(pointer["generation"], lexical, dense, visual)
        except FileNotFoundError:
            if not (folder / POINTER).exists():
                return None
    return None


def build(catalog: Catalog, previous: Retrievers | None, dim: int | None) -> Retrievers:
    """Retrievers for the catalog as it is now, from ``previous``: a new segment of the tiles it
    lacks (BM25, and the dense and visual parts beside it), tombstones for the tiles gone
    (everything is read again when there is no ``previous``)."""
    with catalog.snapshot():
        generation = catalog.generation()
        settings = catalog.settings
        spec = catalog.visual_spec()
        lexical = previous.lexical if previous is not None else None
        dense = previous.dense if previous is not None else None
        visual = previous.visual if previous is not None else None
        if (
            lexical is None
            or (lexical.phrases, lexical.term_weights) != (settings.phrases, settings.term_weights)
            or (dim is not None) != (dense is not None)
            or (spec is not None) != (visual is not None)
        ):
            lexical = LexicalRetriever([], phrases=settings.phrases, term_weights=settings.term_weights)
            dense = DenseSegments([], dim) if dim is not None else None
            visual = VisualSegments([], visual_config(settings, spec)) if spec is not None else None
        have = lexical.tile_ids
        # ids only grow: the tiles above every one held are the new ones; and when the catalog
        # holds just those besides the live ones held, none is gone, found without reading every id
        new = catalog.tile_ids(above=int(have.max()) if len(have) else None)
        if catalog.tile_count() != lexical.live_tiles + len(new):
            # both unique: no sorting of a million ids to find the few that differ
            gone = np.setdiff1d(have, catalog.tile_ids(), assume_unique=True)
            lexical = lexical.remove(gone)
            for parts in (dense, visual):
                if parts is not None:
                    parts.remove(gone)
        if len(new):
            wanted = set(new.tolist())
            rows = [row for row in catalog.tile_contexts(since=int(new[0])) if row[0] in wanted]
            languages = catalog.languages_since(int(new[0]))
            added = np.array([row[0] for row in rows], dtype=np.int64)
            lexical = lexical.with_segment(
                segment(
                    added,
                    [indexed_text(text, named, heading, settings) for _, text, named, heading in rows],
                    settings.phrases,
                    [languages.get(row[0], "en") for row in rows],
                )
            )
            if dense is not None:
                part = DenseRetriever.empty(dim)
                part.add(*catalog.vectors(added.tolist()))
                dense = dense.with_part(part)
            if visual is not None:
                part = visual.empty()
                part.add(*catalog.visual_vectors(added.tolist()))
                visual = visual.with_part(part)
    return Retrievers(generation, lexical, dense, visual)


def visual_config(settings, spec: dict) -> dict:
    """How the visual parts of an index are made (``VisualRetriever.empty``'s arguments): the
    encoder's width and kind from its ``spec``, the structure and MUVERA's encoding from the
    index's ``settings``."""
    return {
        "dim": spec["dim"],
        "multi_vector": bool(spec["multi_vector"]),
        "kind": settings.visual_structure(spec["multi_vector"]),
        "multi_vector_storage": settings.multi_vector_storage,
        "muvera": {
            "reps": settings.muvera_reps,
            "k_sim": settings.muvera_k_sim,
            "d_proj": settings.muvera_d_proj,
        },
    }


def save(root: Path, retrievers: Retrievers) -> Retrievers:
    """Write what ``retrievers`` hold that is not on disk yet under fresh names (segments merged
    first where a merge of at most ``merging.INLINE_MERGE`` tiles is due; a larger one is left to
    ``store.merging``), switch ``current.json`` to them, drop the rest; the retrievers as saved
    (their segments named)."""
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    tag = f"{retrievers.generation}-{os.getpid()}"
    lexical, parts = merging.adopt(folder, retrievers.lexical, beside(retrievers))
    plans = [plan for plan in lexical.merges() if lexical.live(plan) <= merging.INLINE_MERGE]
    if plans:
        lexical = lexical.merged(plans)
        kept = [i for i, part in enumerate(lexical.segments) if len(part)]  # all deleted: gone
        lexical = lexical.taking(kept)
        parts = {name: held.merged(plans).taking(kept) for name, held in parts.items()}
    segments, written = [], set()
    for i, part in enumerate(lexical.segments):
        if part.name is None or not (folder / part.name).is_dir():
            part = part.save(folder / f"bm25-{tag}-{uuid.uuid4().hex[:8]}")
            for name, held in parts.items():
                held.part(i).save(folder / part.name / name)
            written.add(part.name)
        segments.append(part)
    lexical = lexical.named(segments)
    removed = lexical.tile_ids[np.concatenate(lexical.removed)] if segments else np.zeros(0, dtype=np.int64)
    dense, visual = parts.get(DENSE), parts.get(VISUAL)
    pointer = {
        "format": layout.FORMAT,
        "generation": retrievers.generation,
        "segments": [part.name for part in segments],
        "lexical": {"phrases": lexical.phrases, "term_weights": lexical.term_weights},
        "dense": dense.dim if dense is not None else None,
        "visual": visual.config if visual is not None else None,
        "removed": [int(i) for i in removed],
    }
    sync_new(folder, written)
    write_pointer(folder, pointer)
    collect(folder, pointer)
    if lexical.merges():  # larger merges: beside the writers and the searches
        merging.start(root)
    return Retrievers(retrievers.generation, lexical, dense, visual)


def beside(retrievers: Retrievers) -> dict:
    """The parts kept beside the BM25 segments, by their name in a segment's folder."""
    found = {DENSE: retrievers.dense, VISUAL: retrievers.visual}
    return {name: parts for name, parts in found.items() if parts is not None}
