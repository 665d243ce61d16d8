"""A Kiwix ZIM archive built here with libzim's writer: every article ingested, its images and CSS
served from the archive, the MediaWiki layout stripped, re-render equal to the stored tile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.settings import Settings
from tests.render.web.conftest import needs_chromium, not_blank, png_bytes

libzim_writer = pytest.importorskip("libzim.writer", reason="ZIM archives need the libzim package")

pytestmark = needs_chromium

CSS = b"h1 { color: rgb(0, 128, 0); font-size: 40px; } .infobox { background: rgb(250, 240, 200); }"


def article(title: str, body: str) -> bytes:
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>'
        '<link rel="stylesheet" href="-/style.css"></head><body class="mediawiki">'
        f'<div id="content" class="mw-body"><h1>{title}</h1><div id="toc">Contents tocword</div>'
        f'<div id="mw-content-text">{body}</div>'
        '<div class="navbox">Navboxword related articles</div></div></body></html>'
    ).encode()


class _Item(libzim_writer.Item):
    def __init__(self, path: str, title: str, mimetype: str, content: bytes, front: bool):
        super().__init__()
        self.path, self.title, self.mimetype, self.content, self.front = path, title, mimetype, content, front

    def get_path(self) -> str:
        return self.path

    def get_title(self) -> str:
        return self.title

    def get_mimetype(self) -> str:
        return self.mimetype

    def get_contentprovider(self):
        return libzim_writer.StringProvider(self.content)

    def get_hints(self) -> dict:
        return {libzim_writer.Hint.FRONT_ARTICLE: self.front}


def build_zim(path: Path) -> Path:
    alpaca = article(
        "Alpaca",
        '<table class="infobox"><tr><th>Alpaca</th></tr><tr><td><img src="I/alpaca.png"></td></tr>'
        "<tr><td>Kingdom: Animalia</td></tr><tr><td>Genus: Vicugna</td></tr></table>"
        '<p>The alpaca is a domesticated camelid of the Andes. <span class="mw-editsection">[edit]</span></p>'
        '<p>See also the <a href="Llama">llama</a>.</p>',
    )
    llama = article(
        "Llama",
        "<p>The llama carries loads across the altiplano.</p>"
        "<ul>" + "".join(f"<li>Llama fibre grade {n}</li>" for n in range(30)) + "</ul>",
    )
    with libzim_writer.Creator(str(path)).config_indexing(False, "eng") as creator:
        creator.set_mainpath("Alpaca")
        creator.add_metadata("Title", "Camelids")
        creator.add_metadata("Language", "eng")
        creator.add_item(_Item("Alpaca", "Alpaca", "text/html", alpaca, True))
        creator.add_item(_Item("Llama", "Llama", "text/html", llama, True))
        creator.add_item(_Item("-/style.css", "", "text/css", CSS, False))
        creator.add_item(_Item("I/alpaca.png", "", "image/png", png_bytes((160, 20, 160), (300, 200)), False))
        creator.add_redirection(
            "Lama_glama", "Lama glama", "Llama", {libzim_writer.Hint.FRONT_ARTICLE: False}
        )
    return path


@pytest.fixture(scope="module")
def zim_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("zim")
    archive = build_zim(root / "camelids.zim")
    index = Index.open(root / "index", settings=Settings(dense_model=None))
    report = index.add(root)  # the folder: the ZIM is found next to nothing else
    yield index, report, archive
    index.close()


def test_every_article_is_a_document(zim_index):
    index, report, _ = zim_index
    assert report.failed == []
    assert sorted(index.documents()) == ["camelids/Alpaca", "camelids/Llama"]  # no redirect, no CSS
    assert index.catalog.document("camelids/Alpaca").type == "zim"
    assert index.search("domesticated camelid Andes")[0].page_id == "camelids/Alpaca_1"
    assert index.search("altiplano loads")[0].page_id == "camelids/Llama_1"


def test_images_and_css_come_from_the_archive(zim_index):
    index, _, _ = zim_index
    image = np.asarray(index.tile_image("camelids/Alpaca", 1, 0)).astype(int)
    purple = (np.abs(image - (160, 20, 160)).sum(axis=2) == 0).sum()
    assert purple >= 300 * 200  # the <img> was served from the archive
    green = (np.abs(image - (0, 128, 0)).sum(axis=2) < 30).sum()
    assert green > 50  # the stylesheet colours the heading
    assert not_blank(index.tile_image("camelids/Llama", 1, 0))


def test_mediawiki_layout_is_stripped_and_kinds_found(zim_index):
    index, _, _ = zim_index
    row = index.catalog.tile_at("camelids/Alpaca", 1, 0)
    text = " ".join(span[0] for span in row.spans)
    assert "Genus: Vicugna" in text
    for word in ("tocword", "Navboxword", "[edit]"):
        assert word not in text
    assert row.kind == "infobox"
    assert row.links == [["llama", "http://zim.pagesight.invalid/Llama", row.links[0][2]]]
    assert index.catalog.tile_at("camelids/Llama", 1, 0).kind == "list"


def test_rerender_equals_stored_and_reingest_is_incremental(zim_index):
    index, _, archive = zim_index
    stored = np.asarray(index.tile_image("camelids/Alpaca", 1, 0))
    again = np.asarray(index.tile_image("camelids/Alpaca", 1, 0, rerender=True))
    assert np.array_equal(stored, again)
    report = index.add(archive)
    assert report.added == [] and report.replaced == [] and len(report.unchanged) == 2


def test_unreadable_archive_fails_alone(tmp_path: Path):
    (tmp_path / "broken.zim").write_bytes(b"ZIM? no, just bytes" * 10)
    index = Index.open(tmp_path / "index", settings=Settings(dense_model=None))
    report = index.add(tmp_path / "broken.zim")
    ((path, reason),) = report.failed
    assert path == str(tmp_path / "broken.zim")
    assert reason.startswith("not a readable ZIM archive")
    index.close()
