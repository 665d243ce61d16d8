"""A commit that only deletes: the pointer moves to the new generation with the tiles gone listed,
no retriever file rewritten, and neither bm25s nor FAISS imported (``pagesight delete`` stays fast
on any index size)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pagesight.store.local.layout import FOLDER, POINTER, readable, write_pointer

if TYPE_CHECKING:
    from pagesight.store.catalog import Catalog


def removals(root: Path, catalog: Catalog) -> np.ndarray | None:
    """The tiles to list as removed so that the saved files hold exactly the catalog's tiles now,
    or None when the catalog has tiles the files lack (they must be built). A tile id above every
    saved one is new (ids only grow), found without reading every id."""
    folder = root / FOLDER
    try:
        pointer = json.loads((folder / POINTER).read_text())
        if not readable(pointer):
            return None
        saved = [np.load(folder / name / "tile_ids.npy") for name in pointer["segments"]]
    except FileNotFoundError:
        return None
    saved = np.concatenate(saved) if saved else np.zeros(0, dtype=np.int64)
    if len(catalog.tile_ids(above=int(saved.max()) if len(saved) else None)):
        return None
    tile_ids = catalog.tile_ids()
    if not np.isin(tile_ids, saved).all():
        return None
    return np.setdiff1d(saved, tile_ids, assume_unique=True)  # a tile is in one segment, once


def save_removals(root: Path, generation: int, removed: np.ndarray) -> None:
    """Point at the same files for ``generation``, with ``removed`` tiles left out at load."""
    folder = root / FOLDER
    pointer = json.loads((folder / POINTER).read_text())
    pointer.update(generation=generation, removed=[int(i) for i in removed])
    write_pointer(folder, pointer)
