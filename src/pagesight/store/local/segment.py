"""The segments a pointer names, opened."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pagesight.store.local.bm25 import LexicalRetriever, Segment
from pagesight.store.local.dense import DenseSegments
from pagesight.store.local.layout import DENSE, VISUAL
from pagesight.store.local.visual import VisualSegments


def segments(folder: Path, pointer: dict):
    """The BM25 segments and the dense and visual parts ``pointer`` names in ``folder``, its
    tombstones applied: the segments mapped, each part read when first searched (``store.parts``)."""
    names, settings = pointer["segments"], pointer["lexical"]
    lexical = LexicalRetriever(
        [Segment.load(folder / name) for name in names],
        phrases=settings["phrases"],
        term_weights=settings["term_weights"],
    )
    dense = (
        DenseSegments([folder / name / DENSE for name in names], pointer["dense"])
        if pointer.get("dense")
        else None
    )
    visual = (
        VisualSegments([folder / name / VISUAL for name in names], pointer["visual"])
        if pointer.get("visual")
        else None
    )
    removed = np.array(pointer.get("removed", []), dtype=np.int64)
    if len(removed):
        lexical = lexical.remove(removed)
        for parts in (dense, visual):
            if parts is not None:
                parts.remove(removed)
    return lexical, dense, visual
