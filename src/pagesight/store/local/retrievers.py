"""The retrievers of a generation: the segments the pointer names, opened (``load``); the catalog's
tiles a writer or a reader lacks, made into a segment and deletes (``build``); what a writer built,
written and pointed at (``save``). The layout, the locks and what a crash leaves:
docs/segments.md.

A commit adds a segment of its new tiles: their terms, analysed alone, their chunk vectors and
their visual vectors, so a commit costs what it adds. Deleted tiles are bits of their segments'
delete bitsets, and a commit writes the bitsets of the segments its deletes reached, no other
(``Segment.with_deletes_saved``), so a delete costs what it deletes. Segments merge as they pile
up (``merging.due``): the small merges by the commit, the larger ones by the merging process.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pagesight.encode.lexical import indexed_text
from pagesight.store.base import Retrievers
from pagesight.store.local import merging
from pagesight.store.local.bm25 import LexicalRetriever
from pagesight.store.local.dense import DenseRetriever, DenseSegments
from pagesight.store.local.layout import DENSE, FOLDER, POINTER, VISUAL, Pointer, collect, sync_new
from pagesight.store.local.postings import analysed
from pagesight.store.local.segment import Segment, joins, opened
from pagesight.store.local.visual import VisualRetriever, VisualSegments

if TYPE_CHECKING:
    from pagesight.store.catalog import SQLiteCatalog


def views(
    generation: int, segments: list[Segment], lexical: Mapping, dim: int | None, config: Mapping | None
):
    """The retrievers of ``generation`` over ``segments``: BM25 with the ``lexical`` options
    (``phrases``, ``term_weights``), the dense parts ``dim`` wide and the visual ones made by
    ``config`` where the index has them."""
    return Retrievers(
        generation,
        LexicalRetriever(segments, phrases=lexical["phrases"], term_weights=lexical["term_weights"]),
        DenseSegments(segments, dim) if dim else None,
        VisualSegments(segments, config) if config else None,
    )


def load(root: Path) -> Retrievers | None:
    """The retrievers ``current.json`` names, or None when there are none (or they vanished)."""
    folder = root / FOLDER
    for _ in range(3):  # a writer or a merge may swap the files between reading the pointer and them
        try:
            pointer = Pointer.read(folder)
            if pointer is None:  # none, or an older build's: built again
                return None
            segments = opened(folder, pointer)
            return views(pointer.generation, segments, pointer.lexical, pointer.dense, pointer.visual)
        except FileNotFoundError:
            if not (folder / POINTER).exists():
                return None
    return None


def build(catalog: SQLiteCatalog, previous: Retrievers | None, dim: int | None) -> Retrievers:
    """Retrievers for the catalog as it is now, from ``previous``: a new segment of the tiles it
    lacks (BM25, and the dense and visual parts beside it), the tiles gone deleted from their
    segments (everything is read again when there is no ``previous``)."""
    with catalog.snapshot():
        generation = catalog.generation()
        settings = catalog.settings
        spec = catalog.visual_spec()
        config = visual_config(settings, spec) if spec is not None else None
        options = {"phrases": settings.phrases, "term_weights": settings.term_weights}
        segments = []
        if previous is not None and (
            (previous.lexical.phrases, previous.lexical.term_weights)
            == (settings.phrases, settings.term_weights)
            and (dim is not None) == (previous.dense is not None)
            and (spec is not None) == (previous.visual is not None)
        ):
            segments = list(previous.lexical.segments)
        have = np.concatenate([s.tile_ids for s in segments]) if segments else np.zeros(0, dtype=np.int64)
        # ids only grow: the tiles above every one held are the new ones; and when the catalog
        # holds just those besides the live ones held, none is gone, found without reading every id
        new = catalog.tile_ids(above=int(have.max()) if len(have) else None)
        if catalog.tile_count() != sum(s.live for s in segments) + len(new):
            # both unique: no sorting of a million ids to find the few that differ
            gone = np.setdiff1d(have, catalog.tile_ids(), assume_unique=True)
            segments = [s.deleting(gone) for s in segments]
        if len(new):
            segments.append(_segment_of(catalog, new, dim, config))
    return views(generation, segments, options, dim, config)


def indexed_tiles(catalog: SQLiteCatalog, tile_ids: np.ndarray) -> tuple[np.ndarray, list[str], list[str]]:
    """The catalog's tiles ``tile_ids`` (ascending) as BM25 analyses them: their ids, each one's
    indexed text (``encode.lexical.indexed_text``) and its language."""
    settings = catalog.settings
    wanted = set(tile_ids.tolist())
    cells = settings.table_weight > 0
    rows = [row for row in catalog.tile_contexts(since=int(tile_ids[0]), cells=cells) if row[0] in wanted]
    languages = catalog.languages_since(int(tile_ids[0]))
    return (
        np.array([row[0] for row in rows], dtype=np.int64),
        [indexed_text(text, named, heading, settings, table) for _, text, named, heading, table in rows],
        [languages.get(row[0], "en") for row in rows],
    )


def _segment_of(catalog: SQLiteCatalog, new: np.ndarray, dim: int | None, config: Mapping | None) -> Segment:
    """The segment of the catalog's tiles ``new``: their postings, and their dense and visual parts
    where the index has them."""
    added, texts, languages = indexed_tiles(catalog, new)
    postings = analysed(added, texts, catalog.settings.phrases, languages)
    parts = {}
    if dim is not None:
        parts[DENSE] = DenseRetriever.empty(dim)
        parts[DENSE].add(*catalog.vectors(added.tolist()))
    if config is not None:
        parts[VISUAL] = VisualRetriever.empty(**config)
        parts[VISUAL].add(*catalog.visual_vectors(added.tolist()))
    return Segment.of(postings, parts)


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
    the merging process), switch ``current.json`` to them, drop the rest; the retrievers as saved."""
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    generation, lexical = retrievers.generation, retrievers.lexical
    dim = retrievers.dense.dim if retrievers.dense is not None else None
    config = retrievers.visual.config if retrievers.visual is not None else None
    segments = merging.adopt(folder, list(lexical.segments))
    plans = [
        plan for plan in merging.due(segments) if sum(segments[i].live for i in plan) <= merging.INLINE_MERGE
    ]
    if plans:
        segments = [
            s for s in merging.merged(segments, plans, joins(dim, config)) if len(s)
        ]  # all deleted: gone
    tag, written = f"{generation}-{os.getpid()}", set()
    for i, segment in enumerate(segments):
        if segment.name is None or not (folder / segment.name).is_dir():
            segments[i] = segment.save(folder / f"bm25-{tag}-{uuid.uuid4().hex[:8]}")
            written.add(segments[i].name)
    sync_new(folder, written)
    segments = [segment.with_deletes_saved(folder, generation) for segment in segments]
    options = {"phrases": lexical.phrases, "term_weights": lexical.term_weights}
    pointer = Pointer(
        generation,
        [segment.name for segment in segments],
        {s.name: s.deletes_file for s in segments if s.deleted_count},
        options,
        dim,
        config,
    )
    pointer.write(folder)
    collect(folder, pointer)
    if merging.due(segments):  # larger merges: beside the writers and the searches
        merging.start(root)
    return views(generation, segments, options, dim, config)
