"""URLs fetched once into the index's cache (from a real local HTTP server), then rendered offline."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.settings import Settings
from tests.render.web.conftest import needs_chromium, page, png_bytes

pytestmark = needs_chromium


@pytest.fixture
def server(tmp_path: Path):
    """A local web server over a folder; stopped by the test to prove renders are offline."""
    folder = tmp_path / "www"
    folder.mkdir()
    (folder / "cat.png").write_bytes(png_bytes((10, 140, 90), (320, 160)))
    (folder / "news.html").write_text(
        page("News", '<h1>Harbour news</h1><p>The ferry timetable changes on Monday.</p><img src="cat.png">')
    )
    handler = functools.partial(_QuietHandler, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_url_is_cached_then_rendered_offline(tmp_path: Path, server):
    httpd, base = server
    index = Index.open(tmp_path / "index", settings=Settings(dense_model=None))
    report = index.add(f"{base}/news.html")
    assert report.failed == [] and len(report.added) == 1
    doc_id = f"127.0.0.1:{httpd.server_address[1]}/news.html"
    assert index.search("ferry timetable")[0].page_id == f"{doc_id}_1"
    document = index.catalog.document(doc_id)
    assert document.type == "url" and document.meta["url"] == f"{base}/news.html"
    assert (document.source / "manifest.json").exists()
    assert document.source.parent == tmp_path / "index" / "web-cache"
    stored = np.asarray(index.tile_image(doc_id, 1, 0))
    assert (np.abs(stored.astype(int) - (10, 140, 90)).sum(axis=2) == 0).sum() >= 320 * 160

    httpd.shutdown()  # from here on, nothing answers at that address
    again = np.asarray(index.tile_image(doc_id, 1, 0, rerender=True))
    assert np.array_equal(stored, again)
    assert index.add(f"{base}/news.html").unchanged == [doc_id]
    index.close()


def test_unreachable_url_fails_with_its_reason(tmp_path: Path):
    index = Index.open(tmp_path / "index", settings=Settings(dense_model=None))
    report = index.add("http://127.0.0.1:9/nothing.html")
    ((label, reason),) = report.failed
    assert label == "http://127.0.0.1:9/nothing.html"
    assert reason.startswith("cannot fetch http://127.0.0.1:9/nothing.html: ")
    assert "ECONNREFUSED" in reason
    assert index.documents() == []
    index.close()
