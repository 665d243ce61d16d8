"""The parts of web ingestion that need no browser: input split, kinds, options, chrome rules."""

from __future__ import annotations

from pathlib import Path

from pagesight.ingest.web import content_hash, dominant_kind, split_inputs
from pagesight.render.web.chrome import StripRule, register_rule, rules_json
from pagesight.render.web.jobs import RenderOptions
from pagesight.render.web.sites import WebPage, url_doc_id


def test_split_inputs_sends_web_files_to_the_browser(tmp_path: Path):
    site = tmp_path / "site"
    (site / "img").mkdir(parents=True)
    (site / "index.html").write_text("<p>x</p>")
    (site / "img" / "logo.png").write_bytes(b"png")
    (site / "paper.pdf").write_bytes(b"%PDF")
    scans = tmp_path / "scans"
    scans.mkdir()
    (scans / "scan.png").write_bytes(b"png")
    web, rest = split_inputs([site, scans, "https://example.org/a", tmp_path / "x.pdf"])
    assert [(w.type, str(w.value), w.root) for w in web] == [
        ("html", str(site / "index.html"), site),
        ("url", "https://example.org/a", None),
    ]
    assert rest == [site / "paper.pdf", scans, tmp_path / "x.pdf"]  # the site's images are its own


def test_dominant_kind_weighs_area():
    blocks = [("paragraph", (0, 0, 800, 20)), ("table", (0, 30, 400, 600)), ("list", (0, 900, 800, 1200))]
    assert dominant_kind(blocks, (0, 0, 875, 1024)) == "table"
    assert dominant_kind(blocks, (0, 1024, 875, 2048)) == "list"
    assert dominant_kind(blocks, (0, 2048, 875, 3072)) == "none"


def test_content_hash_covers_the_pixel_options_only():
    page = WebPage("a", "html", "a.html", "a.html", "file:///a.html")
    base = content_hash(page, "abc", RenderOptions())
    assert content_hash(page, "abc", RenderOptions(concurrency=8, timeout=5)) == base
    assert content_hash(page, "abc", RenderOptions(javascript=False)) != base
    assert content_hash(page, "abd", RenderOptions()) != base
    assert content_hash(page, "abc", RenderOptions(), text="ocr") != base
    assert RenderOptions.from_pixel_dict(RenderOptions(width=640).pixel_dict()).width == 640


def test_url_ids_and_site_rules():
    assert url_doc_id("https://en.wikipedia.org/wiki/Alpaca#Diet") == "en.wikipedia.org/wiki/Alpaca"
    register_rule(StripRule("example", "body.example", (".promo",)))
    assert any(rule["name"] == "example" and rule["strip"] == [".promo"] for rule in rules_json())
    assert {"generic", "mediawiki", "sphinx"} <= {rule["name"] for rule in rules_json()}


def test_version_1_catalog_is_upgraded_in_place(tmp_path: Path):
    from pagesight.settings import Settings
    from pagesight.store.catalog import SQLiteCatalog
    from pagesight.store.schema import FORMAT_VERSION

    catalog = SQLiteCatalog(tmp_path, Settings(dense_model=None))
    for statement in (  # the version 1 tiles table, as pagesight 0.1 wrote it
        "DROP TABLE tile_images",
        "DROP TABLE tiles",
        "CREATE TABLE tiles (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE, page INTEGER NOT NULL, "
        "idx INTEGER NOT NULL, x0 REAL NOT NULL, y0 REAL NOT NULL, x1 REAL NOT NULL, y1 REAL NOT NULL, "
        "text TEXT NOT NULL, spans TEXT NOT NULL)",
        "ALTER TABLE pages DROP COLUMN language",
        "ALTER TABLE vectors DROP COLUMN half",
        "UPDATE meta SET value = '1' WHERE key = 'format_version'",
    ):
        catalog.db.execute(statement)
    catalog.close()
    upgraded = SQLiteCatalog(tmp_path)
    assert FORMAT_VERSION == 5 and upgraded._get("format_version") == "5"  # through 2, 3 and 4 to 5
    columns = [row[1] for row in upgraded.db.execute("PRAGMA table_info(tiles)")]
    assert columns[-3:] == ["kind", "links", "region"]
    assert upgraded.db.execute("SELECT name FROM sqlite_master WHERE name = 'tile_images'").fetchone()
    assert [row[1] for row in upgraded.db.execute("PRAGMA table_info(pages)")][-1] == "language"
    assert [row[1] for row in upgraded.db.execute("PRAGMA table_info(vectors)")][-1] == "half"
    upgraded.close()
