"""Retriever files derived from the catalog: BM25 and FAISS, tagged with a catalog generation.

Layout inside the index directory::

    retrievers/current.json       {"generation": G, "lexical": "bm25-G", "dense": "dense-G.faiss",
                                   "visual": "visual-G"}
    retrievers/bm25-G/            bm25s index + tile_ids.npy
    retrievers/dense-G.faiss      FAISS IndexIDMap2 whose ids are tile ids
    retrievers/visual-G           the visual encoder's vectors: a VectorIndex file, or a MUVERA folder

New files are written under new names and ``current.json`` is replaced atomically, so a reader
sees either the old set or the new one. Files that ``current.json`` does not name are leftovers of
a crash or of an older generation and are removed by the next writer.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pagesight.store.base import Retrievers

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
            return Retrievers(pointer["generation"], lexical, dense, visual)
        except FileNotFoundError:
            if not (folder / POINTER).exists():
                return None
    return None


def build(catalog: Catalog, previous: Retrievers | None, dim: int | None) -> Retrievers:
    """Retrievers for the catalog as it is now; the dense and visual indexes are updated from
    ``previous``."""
    from pagesight.store.bm25 import LexicalRetriever
    from pagesight.store.dense import DenseRetriever
    from pagesight.store.visual import VisualRetriever

    with catalog.snapshot():
        generation = catalog.generation()
        pairs = list(catalog.tile_texts())
        tile_ids = np.array([p[0] for p in pairs], dtype=np.int64)
        lexical = LexicalRetriever.build(tile_ids, [p[1] for p in pairs])
        dense = None
        if dim is not None:
            dense = (previous.dense if previous is not None else None) or DenseRetriever.empty(dim)
            _sync(dense, tile_ids, catalog.vectors)
        visual = None
        spec = catalog.visual_spec()
        if spec is not None:
            visual = (previous.visual if previous is not None else None) or VisualRetriever.empty(
                spec["dim"], spec["multi_vector"], catalog.settings.visual_index
            )
            _sync(visual, tile_ids, catalog.visual_vectors)
    return Retrievers(generation, lexical, dense, visual)


def _sync(retriever, tile_ids: np.ndarray, fetch) -> None:
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
        pointer["dense"] = f"dense-{tag}.faiss"
        retrievers.dense.save(folder / pointer["dense"])
    if retrievers.visual is not None:
        pointer["visual"] = f"visual-{tag}"
        retrievers.visual.save(folder / pointer["visual"])
    _fsync_tree(folder)
    temporary = folder / f"{POINTER}.new-{os.getpid()}"
    temporary.write_text(json.dumps(pointer))
    os.replace(temporary, folder / POINTER)
    keep = {POINTER, pointer["lexical"], pointer["dense"], pointer["visual"]}
    for entry in folder.iterdir():
        if entry.name not in keep:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink(missing_ok=True)


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
