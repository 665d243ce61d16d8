"""Pages and tiles rendered again by one renderer: used alone on an index it gives the index's
tiles, and the tiles the visual encoder reads at ingestion are the pixels the readers get."""

from __future__ import annotations

import numpy as np
import pytest

from pagesight import Index, PagesightError
from pagesight.ingest.extract import extract
from pagesight.ingest.options import TextOptions
from pagesight.render.pages import PageRenderer, document_tiles
from tests.conftest import SAMPLES


def test_a_renderer_alone_cuts_the_tiles_ingestion_cut(sample_index: Index):
    renderer = PageRenderer(sample_index.catalog, sample_index.settings)
    try:
        for name in ("long-infographic.png", "quarterly-report.pdf"):
            doc_id = name.rsplit(".", 1)[0]
            fresh = extract(str(SAMPLES / name), doc_id, None, sample_index.settings, TextOptions("never"))
            tiles = document_tiles(fresh, sample_index.settings.dpi)
            assert len(tiles) == sum(len(page.tiles) for page in fresh.pages) > 0
            for (page, tile), image in tiles.items():
                again = renderer.tile_image(doc_id, page, tile)
                assert np.array_equal(np.asarray(again), np.asarray(image)), (doc_id, page, tile)
                assert np.array_equal(
                    np.asarray(again), np.asarray(sample_index.tile_image(doc_id, page, tile))
                )
        assert renderer.page_image("quarterly-report", 1).size == (827, 1170)
        with pytest.raises(PagesightError, match="index: no document 'nope'"):
            renderer.page_image("nope", 1)
        with pytest.raises(PagesightError, match="quarterly-report: page 9 out of range 1..2"):
            renderer.page_image("quarterly-report", 9)
        with pytest.raises(PagesightError, match="no tile 5 on page 1"):
            renderer.tile_image("quarterly-report", 1, 5)
    finally:
        renderer.close()
    renderer.close()  # closing twice, or a renderer that started no browser, is harmless
