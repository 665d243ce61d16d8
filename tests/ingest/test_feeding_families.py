"""Batching tiles across documents changes no vector: for every visual encoder family (tiny
random-weight models, float32 on the CPU), the tiles of several documents encoded through
``VisualFeed`` (calls of three tiles of several documents, longest first, prepared in another
thread) have the vectors each document's tiles had encoded alone, a document per call, as ingestion
encoded them before (cosine 0.9999 or more, every token of a multi-vector model)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from pagesight.ingest.extract import png
from pagesight.ingest.feeding import VisualFeed
from pagesight.ingest.outcome import Extracted
from pagesight.ingest.visual import extracted_tiles
from pagesight.records import Document, Page, Tile
from pagesight.settings import Settings

pytest.importorskip("transformers")
from tests.test_on_device import BUILDERS, make  # noqa: E402  (the tiny model of every family)

SETTINGS = Settings(dense_model=None)
LINES = ["Annual report", "Revenue +12%", "Outlook", "Costs -4%", "Staff 120", "Table 3"]
# (page width, tile heights): tiles of several sizes, so calls pad where the model's inputs vary
DOCUMENTS = [
    [(112, [56, 56, 28])],
    [(84, [56, 42]), (112, [28])],
    [(112, [84]), (84, [56, 56])],
]


def document(number: int, pages: list[tuple[int, list[int]]]) -> Extracted:
    """A document whose worker rendered its pages: lines of text and a grey box on each."""
    doc_id = f"doc{number}"
    found = Document(doc_id, f"/nowhere/{doc_id}.pdf", "0" * 64, "pdf", 1, 1)
    rendered = {}
    for page_number, (width, heights) in enumerate(pages, start=1):
        page = Page(page_number, width, sum(heights), "pdf")
        image = Image.new("RGB", (width, page.height), "white")
        draw = ImageDraw.Draw(image)
        for row in range(page.height // 14):
            draw.text((3, 2 + 14 * row), LINES[(row + number + page_number) % len(LINES)], fill="black")
        draw.rectangle((4 + 3 * number, page.height - 20, width // 2, page.height - 6), fill=(120, 120, 120))
        top = 0
        for index, height in enumerate(heights):
            page.tiles.append(Tile(index, (0.0, float(top), float(width), float(top + height))))
            top += height
        found.pages.append(page)
        rendered[page_number] = png(image)
    return Extracted(doc_id, doc_id, found, pages=rendered)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(BUILDERS))
def test_tiles_batched_across_documents_have_the_vectors_of_each_document_alone(name, tmp_path):
    BUILDERS[name](tmp_path)
    encoder = make(name, tmp_path, device="cpu", dtype="float32", batch_size=4)
    items = [document(number, pages) for number, pages in enumerate(DOCUMENTS)]
    alone = {}
    for item in items:  # the sequential path: a document's tiles alone, in its order
        tiles = extracted_tiles(item, SETTINGS)
        alone[item.doc_id] = dict(zip(tiles, encoder.encode_images(list(tiles.values()))))
    feed = VisualFeed([encoder], SETTINGS, batch=3, window=9, eager=False)
    out = list(feed(items))
    assert feed.summary()["calls"] == 3  # 9 tiles in one window, three a call, longest first
    for item in out:
        assert item.images.keys() == alone[item.doc_id].keys()
        for key, vectors in item.images.items():
            expected = alone[item.doc_id][key]
            assert vectors.shape == expected.shape and vectors.dtype == np.float32
            cosine = float(np.min(np.sum(vectors * expected, axis=-1)))
            assert cosine >= 0.9999, (name, item.doc_id, key, cosine)
