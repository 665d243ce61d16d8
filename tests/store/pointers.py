"""The local store's pointer as the tests read it: the pointer itself, and the tiles its segments'
delete bitsets hold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pagesight.store.local.layout import Pointer


def pointer(root: Path) -> dict:
    return json.loads((root / "retrievers" / "current.json").read_text())


def deleted(root: Path) -> list[int]:
    """The tiles deleted from the segments the pointer names, sorted."""
    folder = root / "retrievers"
    named = Pointer.read(folder)
    found = []
    for name in named.segments:
        tile_ids = np.load(folder / name / "tile_ids.npy")
        found += tile_ids[named.deleted(folder, name, tile_ids)].tolist()
    return sorted(found)
