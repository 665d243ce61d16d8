"""Web pages in an index made with layout regions: the DOM's tables, figures and infoboxes are the
page's regions and searchable units, found where the page draws them, with no detector run."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.ingest.web import dom_regions
from pagesight.records import Region
from tests.render.web.conftest import needs_chromium, page, png_bytes

pytest.importorskip("rapid_layout", reason="an index with layout regions needs the 'layout' extra")

PROSE = "<p>" + "The expedition logged weather, ice and the ship's position every watch. " * 6 + "</p>"
ROWS = "".join(f"<tr><td>quokka-{n}</td><td>{20 + n} days</td><td>{3 * n} km</td></tr>" for n in range(8))


def report_page(folder: Path) -> Path:
    """A long page: prose, then a captioned table far enough down to lie in the second band, a
    captioned figure, a list and more prose."""
    picture = base64.b64encode(png_bytes((40, 120, 200), (300, 160))).decode()
    body = (
        "<h1>Voyage report</h1>"
        + PROSE * 12
        + f"<table><caption>Table 1: Orbits of the moons</caption>{ROWS}</table>"
        + PROSE * 2
        + f'<figure><img src="data:image/png;base64,{picture}" width="300" height="160">'
        "<figcaption>Figure 2: The zephyrine nebula over the pack ice</figcaption></figure>"
        + "<ul><li>sextant</li><li>chronometer</li></ul>"
        + PROSE * 4
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "voyage.html"
    path.write_text(page("Voyage report", body))
    return path


@needs_chromium
@pytest.mark.timeout(120)
def test_tables_and_figures_of_a_web_page_are_units_of_their_own(tmp_path: Path):
    html = report_page(tmp_path / "site")
    with Index.open(tmp_path / "ix", settings={"layout": True, "dense_model": None}) as index:
        assert index.add(html, web={"max_height": 6000}).added == ["voyage"]
        regions = index.catalog.page_regions("voyage", 1)
        assert [r.kind for r in regions] == ["table", "figure", "list"]
        table, figure, _ = (r.box for r in regions)
        counts = index.catalog.counts()
        assert counts["regions"] == 3 and counts["region_units"] == 2
        bands = index.catalog.page_tiles("voyage", 1)
        assert counts["tiles"] == len(bands) >= 2

        hits = index.search("quokka-5 days km", k=3)
        assert distinct_tiles(hits)
        hit = hits[0]
        assert hit.region.kind == "table" and hit.region.box == table
        middle = (table[1] + table[3]) / 2
        assert hit.tile_box[1] <= middle < hit.tile_box[3] and hit.tile >= 1  # the band holding it
        assert "quokka" in hit.snippet and hit.boxes
        assert all(table[1] - 1 <= box[1] and box[3] <= table[3] + 1 for box in hit.boxes)
        # Where the bands fall depends on the machine's fonts: the figure's band may hold its
        # caption or not, so the band can be a hit of its own, below the figure.
        hits = index.search("zephyrine nebula", k=3)
        assert distinct_tiles(hits)
        hit = hits[0]
        assert hit.region.kind == "figure" and hit.region.box == figure  # the caption is the figure's
        prose = index.search("expedition weather watch", k=1)[0]
        assert prose.region is None

        # A unit's image is its region cut from the page put together from the band screenshots.
        unit = next(
            i
            for i in range(len(bands), len(bands) + 2)
            if index.catalog.tile_at("voyage", 1, i).region.kind == "table"
        )
        image = index.tile_image("voyage", 1, unit)
        x0, y0, x1, y1 = (round(v) for v in table)
        assert image.size == (x1 - x0, y1 - y0)
        whole = index.page_image("voyage", 1)
        assert np.array_equal(np.asarray(image), np.asarray(whole)[y0:y1, x0:x1])


@needs_chromium
@pytest.mark.timeout(120)
def test_a_web_page_in_an_index_without_layout_has_no_regions(tmp_path: Path):
    html = report_page(tmp_path / "site")
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        assert index.add(html, web={"max_height": 6000}).ok
        assert index.catalog.page_regions("voyage", 1) == []
        hits = index.search("quokka-5 days km", k=3)
        assert hits and all(hit.region is None and "region" not in hit.to_dict() for hit in hits)


def distinct_tiles(hits) -> bool:
    """A region's unit and the band holding it make one hit, never two."""
    return len({(hit.page_id, hit.tile) for hit in hits}) == len(hits)


def test_dom_regions_keep_the_outermost_blocks_top_to_bottom():
    blocks = [
        ("paragraph", (0, 0, 800, 20)),
        ("figure", (100, 620, 400, 780)),  # the image inside the figure below
        ("figure", (80, 600, 500, 820)),
        ("table", (0, 100, 800, 500)),
        ("infobox", (600, 40, 800, 90)),
        ("code", (0, 900, 800, 980)),
    ]
    assert dom_regions(blocks) == [
        Region("infobox", (600.0, 40.0, 800.0, 90.0)),
        Region("table", (0.0, 100.0, 800.0, 500.0)),
        Region("figure", (80.0, 600.0, 500.0, 820.0)),
        Region("code", (0.0, 900.0, 800.0, 980.0)),
    ]
