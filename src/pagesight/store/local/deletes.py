"""A commit that only deletes: the pointer moves to the new generation, the segments holding tiles
gone get a new delete bitset each (``layout.write_deletes``; the others keep theirs), no other
file is written, and neither bm25s nor FAISS is imported (``pagesight delete`` stays fast on any
index size).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pagesight.store.local.layout import FOLDER, TILE_IDS, Pointer, collect, write_deletes

if TYPE_CHECKING:
    from pagesight.store.catalog import SQLiteCatalog


def delete(root: Path, catalog: SQLiteCatalog) -> bool:
    """Point at the same segments for the catalog's generation now, the tiles it no longer holds
    deleted; False (nothing written) when it holds tiles the files lack: they must be built. A tile
    id above every saved one is new (ids only grow), found without reading every id."""
    folder = root / FOLDER
    try:
        pointer = Pointer.read(folder)
        if pointer is None:
            return False
        saved = {name: np.load(folder / name / TILE_IDS) for name in pointer.segments}
        every = np.concatenate(list(saved.values())) if saved else np.zeros(0, dtype=np.int64)
        if len(catalog.tile_ids(above=int(every.max()) if len(every) else None)):
            return False
        tile_ids = catalog.tile_ids()
        if not np.isin(tile_ids, every).all():
            return False
        gone = np.setdiff1d(every, tile_ids, assume_unique=True)  # a tile is in one segment, once
        deletes = {}
        for name, held in saved.items():
            was = pointer.deleted(folder, name, held)
            now = was | np.isin(held, gone)
            entry = pointer.deletes.get(name)
            if now.any():
                changed = entry is None or (now != was).any()
                deletes[name] = write_deletes(folder, name, now, catalog.generation()) if changed else entry
    except FileNotFoundError:  # a segment's files gone (a crash): built again
        return False
    pointer.generation, pointer.deletes, pointer.deleted_list = catalog.generation(), deletes, None
    pointer.write(folder)
    collect(folder, pointer)
    return True
