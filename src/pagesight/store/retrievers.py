"""Retriever files derived from the catalog: BM25 and FAISS, tagged with a catalog generation.

Layout inside the index directory::

    retrievers/current.json       {"generation": G, "lexical": "bm25-G", "dense": "dense-G",
                                   "visual": "visual-G", "removed": [tile ids]}
    retrievers/bm25-G/            bm25s index + tile_ids.npy
    retrievers/dense-G            the text chunks' vectors: a VectorIndex file (store/dense.py)
    retrievers/visual-G           the visual encoder's vectors: a VectorIndex file, or a MUVERA folder

New files are written under new names and ``current.json`` is replaced atomically, so a reader
sees either the old set or the new one. Files that ``current.json`` does not name are leftovers of
a crash or of an older generation and are removed by the next writer.

Deleting documents rewrites no file: the pointer moves to the new generation and lists the tiles
gone (``removed``), which every reader drops from the loaded stores (Lucene's deleted documents).
So a delete costs a pointer write, whatever the index size, and BM25 statistics count the removed
tiles until the next ingestion rebuilds the files without them.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pagesight.store.base import MutableVectorStore, Retrievers

if TYPE_CHECKING:
    from pagesight.store.catalog import Catalog

FOLDER = "retrievers"
POINTER = "current.json"


def current_generation(root: Path) -> int | None:
    """The catalog generation the saved retrievers match, None when there are none."""
    try:
        return json.loads((root / FOLDER / POINTER).read_text())["generation"]
    except FileNotFoundError:
        return None


def load(root: Path) -> Retrievers | None:
    """The retrievers ``current.json`` names, or None when there are none (or they vanished)."""
    from pagesight.store.bm25 import LexicalRetriever
    from pagesight.store.dense import DenseRetriever
    from pagesight.store.visual import VisualRetriever

    folder = root / FOLDER
    for _ in range(3):  # a writer may swap the files between reading the pointer and the files
        try:
            pointer = json.loads((folder / POINTER).read_text())
            lexical = LexicalRetriever.load(folder / pointer["lexical"])
            dense = DenseRetriever.load(folder / pointer["dense"]) if pointer.get("dense") else None
            visual = VisualRetriever.load(folder / pointer["visual"]) if pointer.get("visual") else None
            removed = np.array(pointer.get("removed", []), dtype=np.int64)
            for store in (lexical, dense, visual):
                if store is not None and len(removed):
                    store.remove(removed)
            return Retrievers(pointer["generation"], lexical, dense, visual)
        except FileNotFoundError:
            if not (folder / POINTER).exists():
                return None
    return None


def removals(root: Path, tile_ids: np.ndarray) -> np.ndarray | None:
    """The tiles to list as removed so that the saved files hold exactly ``tile_ids`` (the catalog's
    tiles now), or None when the catalog has tiles the files lack (they must be built)."""
    folder = root / FOLDER
    try:
        pointer = json.loads((folder / POINTER).read_text())
        saved = np.load(folder / pointer["lexical"] / "tile_ids.npy")
    except FileNotFoundError:
        return None
    if not np.isin(tile_ids, saved).all():
        return None
    return np.setdiff1d(saved, tile_ids)


def save_removals(root: Path, generation: int, removed: np.ndarray) -> None:
    """Point at the same files for ``generation``, with ``removed`` tiles left out at load."""
    folder = root / FOLDER
    pointer = json.loads((folder / POINTER).read_text())
    pointer.update(generation=generation, removed=[int(i) for i in removed])
    _write_pointer(folder, pointer)


def build(catalog: Catalog, previous: Retrievers | None, dim: int | None) -> Retrievers:
    """Retrievers for the catalog as it is now; the dense and visual indexes are updated from
    ``previous``."""
    from pagesight.encode.lexical import indexed_text
    from pagesight.store.bm25 import LexicalRetriever
    from pagesight.store.dense import DenseRetriever
    from pagesight.store.visual import VisualRetriever

    with catalog.snapshot():
        generation = catalog.generation()
        settings = catalog.settings
        rows = list(catalog.tile_contexts())
        tile_ids = np.array([row[0] for row in rows], dtype=np.int64)
        languages = catalog.tile_languages()
        lexical = LexicalRetriever.build(
            tile_ids,
            [indexed_text(text, named, heading, settings) for _, text, named, heading in rows],
            phrases=settings.phrases,
            term_weights=settings.term_weights,
            languages=[languages.get(tile_id, "en") for tile_id in tile_ids.tolist()],
        )
        dense = None
        if dim is not None:
            dense = (previous.dense if previous is not None else None) or DenseRetriever.empty(dim)
            _sync(dense, tile_ids, catalog.vectors)
        visual = None
        spec = catalog.visual_spec()
        if spec is not None:
            visual = (previous.visual if previous is not None else None) or VisualRetriever.empty(
                spec["dim"],
                spec["multi_vector"],
                catalog.settings.visual_index,
                settings.multi_vector_storage,
            )
            _sync(visual, tile_ids, catalog.visual_vectors)
    return Retrievers(generation, lexical, dense, visual)


def _sync(retriever: MutableVectorStore, tile_ids: np.ndarray, fetch) -> None:
    """Bring ``retriever`` to hold exactly ``tile_ids``: drop the tiles gone, add the new ones from
    ``fetch`` (the catalog's vectors for a list of tile ids)."""
    have = np.unique(retriever.tile_ids())
    retriever.remove(np.setdiff1d(have, tile_ids))
    retriever.add(*fetch(np.setdiff1d(tile_ids, have).tolist()))


def save(root: Path, retrievers: Retrievers) -> None:
    """Write ``retrievers`` under fresh names, switch ``current.json`` to them, drop the rest."""
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    tag = f"{retrievers.generation}-{os.getpid()}"
    pointer = {"generation": retrievers.generation, "lexical": f"bm25-{tag}", "dense": None, "visual": None}
    retrievers.lexical.save(folder / pointer["lexical"])
    if retrievers.dense is not None:
        pointer["dense"] = f"dense-{tag}"
        retrievers.dense.save(folder / pointer["dense"])
    if retrievers.visual is not None:
        pointer["visual"] = f"visual-{tag}"
        retrievers.visual.save(folder / pointer["visual"])
    _fsync_tree(folder)
    _write_pointer(folder, pointer)
    keep = {POINTER, pointer["lexical"], pointer["dense"], pointer["visual"]}
    for entry in folder.iterdir():
        if entry.name not in keep:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink(missing_ok=True)


def _write_pointer(folder: Path, pointer: dict) -> None:
    """Replace ``current.json`` atomically and durably: readers see the old pointer or the new."""
    temporary = folder / f"{POINTER}.new-{os.getpid()}"
    with temporary.open("w") as handle:
        handle.write(json.dumps(pointer))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, folder / POINTER)


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
