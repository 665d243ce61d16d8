"""Text vectors of a document's tiles at ingestion, the same in the local loop (``pipeline.py``)
and in Ray's encoder actors (``distributed.py``)."""

from __future__ import annotations

import numpy as np

from pagesight.encode.dense import chunk_words
from pagesight.records import Document
from pagesight.settings import Settings
from pagesight.text.titles import context


def encode_text(document: Document, encoder, settings: Settings) -> dict[tuple[int, int], np.ndarray]:
    """Each tile's chunk vectors. With ``settings.dense_context`` every chunk is read after the
    line that names its document (``text.titles.context``: title, file name words), so a question
    naming a document finds its pages by meaning too, as BM25 does with its context field."""
    if encoder is None:
        return {}
    named = context(document.id, document.meta) if settings.dense_context else ""
    keys, chunks, owners = [], [], []
    for page in document.pages:
        for tile in page.tiles:
            pieces = chunk_words(tile.text, settings.chunk_words, settings.chunk_overlap)
            if pieces:
                keys.append((page.number, tile.index))
                owners.extend([len(keys) - 1] * len(pieces))
                chunks.extend(f"{named}\n{piece}" if named else piece for piece in pieces)
    if not chunks:
        return {}
    matrix = encoder.encode(chunks)
    owners_array = np.array(owners)
    return {key: matrix[owners_array == i] for i, key in enumerate(keys)}
