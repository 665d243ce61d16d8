"""The Python documentation Debian ships (python3-doc): a few real pages rendered here, found by
questions whose answer sits in a table or list on one page (checked by page id)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.settings import Settings
from tests.render.web.conftest import needs_chromium, not_blank

DOCS = Path("/usr/share/doc/python3/html")
PAGES = ["library/array.html", "library/struct.html", "library/http.html", "library/calendar.html"]
QUESTIONS = [
    ("array type code d C type double minimum size in bytes 8", "library/array_1"),
    ("struct format character q long long standard size 8", "library/struct_1"),
    ("HTTP status code 418 IM_A_TEAPOT", "library/http_1"),
    ("calendar firstweekday MONDAY TUESDAY constants", "library/calendar_1"),
]

pytestmark = [
    needs_chromium,
    pytest.mark.skipif(not (DOCS / PAGES[0]).exists(), reason=f"{DOCS} absent (apt-get install python3-doc)"),
]


@pytest.fixture(scope="module")
def docs_index(tmp_path_factory):
    """The pages copied with the shared stylesheets, as a smaller mirror of the docs folder."""
    root = tmp_path_factory.mktemp("pydocs")
    site = root / "html"
    shutil.copytree(DOCS / "_static", site / "_static")
    for name in PAGES:
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(DOCS / name, site / name)
    index = Index.open(root / "index", settings=Settings(dense_model=None))
    report = index.add(site)
    assert report.failed == []
    yield index, report
    index.close()


def test_pages_render_styled_into_tiles(docs_index):
    index, report = docs_index
    assert sorted(index.documents()) == sorted(name.removesuffix(".html") for name in PAGES)
    assert report.notes == []  # the stylesheets and scripts are inside the folder: nothing blocked
    for doc_id in index.documents():
        count = index.catalog.n_tiles(doc_id, 1)
        assert count >= 1
        assert all(not_blank(index.tile_image(doc_id, 1, tile)) for tile in range(count))
    kinds = {
        index.catalog.tile_at("library/struct", 1, t).kind
        for t in range(index.catalog.n_tiles("library/struct", 1))
    }
    assert "table" in kinds and "code" in kinds


def test_questions_find_the_page_holding_the_table(docs_index):
    index, _ = docs_index
    for question, page_id in QUESTIONS:
        hits = index.search(question, k=3, mode="lexical")
        assert hits[0].page_id == page_id, (question, [h.page_id for h in hits])
        assert hits[0].boxes  # evidence lines with their boxes on the page
