"""The web page in real Chromium, served by a real ``pagesight serve`` process with an API key from
the environment: give the key, ask a question, see the hits and the answer, open a citation and see
its box, upload a document and watch it being ingested.

``PAGESIGHT_SCREENSHOT=docs/web.png`` also saves the page with a citation open (the README's).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from pagesight import Index
from pagesight.answer.show import BOX_COLOUR
from pagesight.render.web.jobs import CHROMIUM
from pagesight.settings import Settings
from tests.conftest import SAMPLES, make_pdf
from tests.serve.live import free_port, serve_command

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"
)

KEY = "web-key-51f0"

# Pixels of a canvas close to a colour (the evidence boxes' outline).
PIXELS_OF = """(canvas, [r, g, b]) => {
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let n = 0;
  for (let i = 0; i < data.length; i += 4)
    if (Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b) < 40) n++;
  return n;
}"""
sync_api.expect.set_options(timeout=60_000)  # the first answer loads the reader's model


@contextmanager
def serving(index_dir: Path):
    """``pagesight serve`` on a free loopback port over ``index_dir``; its URL."""
    port = free_port()
    process = subprocess.Popen(
        serve_command(index_dir, port),
        env={**os.environ, "PAGESIGHT_API_KEY": KEY},
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/api/health").status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "pagesight serve did not answer within 30 s"
        time.sleep(0.1)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``pagesight serve`` over the lexical sample index."""
    root = tmp_path_factory.mktemp("web")
    with Index.open(root / "index", settings=Settings(dense_model=None)) as index:
        assert index.add([SAMPLES], jobs=1).ok
    with serving(root / "index") as url:
        yield url, root


@pytest.fixture()
def page(server):
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.set_default_timeout(60_000)  # a busy machine; a failure still ends the test
        yield page
        browser.close()
    assert not errors, errors


@pytest.mark.timeout(120)
def test_ask_see_hits_open_a_citation_see_the_box(server, page):
    url, _ = server
    page.goto(url)
    page.locator("#key-form").wait_for()  # the API answered 401: the page asks for the key
    page.fill("#key", KEY)
    page.click("#key-form button")
    sync_api.expect(page.locator("#summary")).to_contain_text("5 documents")
    assert page.evaluate("sessionStorage.getItem('pagesight-api-key')") == KEY

    page.fill("#question", "What was the West region revenue?")
    page.click("#ask")
    first = page.locator(".hit").first
    sync_api.expect(first).to_contain_text("quarterly-report_1")
    page.wait_for_function("() => document.querySelector('.hit img').naturalWidth > 0")
    sync_api.expect(page.locator("#hits-cost")).to_contain_text("image tokens")
    sync_api.expect(page.locator("#answer-text")).to_contain_text("18,150")
    sync_api.expect(page.locator("#answer-cost")).to_contain_text("extractive reader: 0 image tokens")

    page.locator("a.citation").first.click()
    sync_api.expect(page.locator("#viewer")).to_be_visible()
    sync_api.expect(page.locator("#viewer-caption")).to_have_text("quarterly-report_1, cited region")
    canvas = page.locator("#viewer-canvas")
    assert canvas.evaluate(PIXELS_OF, list(BOX_COLOUR)) > 200  # the cited box, drawn and enlarged
    region = canvas.evaluate("c => [c.width, c.height]")
    page.click("#viewer-whole")
    sync_api.expect(page.locator("#viewer-caption")).to_have_text("quarterly-report_1, whole page")
    assert canvas.evaluate("c => c.height / c.width") > region[1] / region[0]  # the page is taller
    page.click("#viewer-whole")
    if os.environ.get("PAGESIGHT_SCREENSHOT"):
        page.screenshot(path=os.environ["PAGESIGHT_SCREENSHOT"], full_page=True)

    page.select_option("#mode", "lexical")
    page.select_option("#doc", "retrieval-primer")
    page.click("#search")
    sync_api.expect(page.locator("#answer")).to_be_hidden()
    # The ask's hits stay on show until the search's arrive: wait for those, every one filtered.
    labels = page.locator(".hit .label b")
    sync_api.expect(labels.filter(has_not_text=re.compile("^retrieval-primer_"))).to_have_count(0)
    sync_api.expect(labels.first).to_contain_text("retrieval-primer_")

    # the document filter: the list shows what passes, searches keep to it
    page.select_option("#doc", "")
    page.fill("#where", "id ^= quarterly")
    page.press("#where", "Enter")
    sync_api.expect(page.locator("#documents li")).to_have_count(1)
    sync_api.expect(labels.filter(has_not_text=re.compile("^quarterly-report_"))).to_have_count(0)
    sync_api.expect(labels.first).to_contain_text("quarterly-report_")
    page.fill("#where", "id ~ x")
    page.locator("#where").dispatch_event("change")
    sync_api.expect(page.locator("#status")).to_contain_text("expected an operator after 'id'")


@pytest.mark.timeout(120)
def test_upload_with_progress(server, page, tmp_path):
    url, root = server
    page.goto(url)
    page.evaluate(f"sessionStorage.setItem('pagesight-api-key', '{KEY}')")
    page.reload()
    sync_api.expect(page.locator("#summary")).to_contain_text("documents")
    page.click("#library summary")
    pdf = make_pdf(tmp_path / "lighthouse.pdf", [["The lighthouse keeper logs 12 ships a night."]])
    page.set_input_files("#files", str(pdf))
    page.fill("#upload-meta", "coast=north, year=1899")
    page.click("#upload-form button")
    sync_api.expect(page.locator("#upload-status")).to_contain_text("1 added", timeout=90_000)
    fields = page.evaluate(
        f"fetch('/api/documents/lighthouse', {{headers: {{'x-api-key': '{KEY}'}}}}).then(r => r.json())"
    )["fields"]
    assert fields["coast"] == "north" and fields["year"] == "1899"
    sync_api.expect(page.locator("#documents")).to_contain_text("lighthouse")
    assert page.locator("#doc option[value=lighthouse]").count() == 1
    assert (root / "index" / "uploads" / "lighthouse.pdf").exists()

    page.set_input_files("#files", __file__)
    page.click("#upload-form button")
    sync_api.expect(page.locator("#upload-status")).to_contain_text("unsupported file type")


@pytest.mark.timeout(60)
def test_the_same_process_serves_mcp_behind_the_key(server):
    url, _ = server
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    refused = httpx.post(f"{url}/mcp/", json=initialize, headers=headers, timeout=30)
    assert refused.status_code == 401
    answered = httpx.post(f"{url}/mcp/", json=initialize, headers={**headers, "X-API-Key": KEY}, timeout=30)
    assert answered.status_code == 200 and '"tools"' in answered.text


@pytest.mark.timeout(120)
def test_a_hit_on_a_table_shows_the_whole_table(tmp_path, page):
    pytest.importorskip("rapid_layout", reason="an index with layout regions needs the 'layout' extra")
    with Index.open(tmp_path / "index", settings={"dense_model": None, "layout": True}) as index:
        assert index.add([SAMPLES / "quarterly-report.pdf"], jobs=1).ok
        (hit,) = index.search("Region Q1 Q2 Q3 Q4 Total", k=1, mode="lexical")
        assert hit.region.kind == "table"
        table = hit.region.box
    with serving(tmp_path / "index") as url:
        page.goto(url)
        page.locator("#key-form").wait_for()
        page.fill("#key", KEY)
        page.click("#key-form button")
        page.fill("#question", "Region Q1 Q2 Q3 Q4 Total")
        page.select_option("#mode", "lexical")
        page.click("#search")
        first = page.locator(".hit").first
        sync_api.expect(first.locator(".label")).to_contain_text("quarterly-report_1 tile 0, table")
        first.click()
        sync_api.expect(page.locator("#viewer-caption")).to_have_text("quarterly-report_1, cited region")
        canvas = page.locator("#viewer-canvas")
        page.wait_for_function("() => document.querySelector('#viewer-canvas').width > 0")
        # The view is cut around the table's outline (120 page pixels of margin on each side).
        width = min(827, table[2] + 120) - max(0, table[0] - 120)
        height = min(1170, table[3] + 120) - max(0, table[1] - 120)
        shown = canvas.evaluate("c => c.width / c.height")
        assert abs(shown - width / height) < 0.05, (shown, width / height)
        assert canvas.evaluate(PIXELS_OF, list(BOX_COLOUR)) > 200


@pytest.mark.timeout(240)
def test_a_visual_hit_shows_its_similarity_map(tmp_path: Path):
    """On an index with a (tiny, random-weight) ColQwen2, a visual hit's "similarity map" button
    loads its tile with the map of the question drawn, and puts the evidence back."""
    pytest.importorskip("torch")
    from pagesight.encode.visual.late_interaction import import_colpali
    from tests.encode.visual.conftest import build_qwen

    models = import_colpali()
    build_qwen(tmp_path / "colqwen2", "qwen2-vl", models.ColQwen2, models.ColQwen2Processor)
    make_pdf(tmp_path / "report.pdf", [["Quarterly revenue rose in the West region"]])
    settings = Settings(dense_model=None, visual_encoder="colqwen2", visual_model=str(tmp_path / "colqwen2"))
    with Index.open(tmp_path / "index", settings=settings, device="cpu") as index:
        assert index.add([tmp_path / "report.pdf"], ocr="never", jobs=1).ok
    with serving(tmp_path / "index") as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page()
        page.set_default_timeout(60_000)
        asked = []
        page.on("request", lambda request: asked.append(request.url))
        page.goto(url)
        page.evaluate(f"sessionStorage.setItem('pagesight-api-key', '{KEY}')")
        page.reload()
        sync_api.expect(page.locator("#summary")).to_contain_text("documents")
        page.fill("#question", "quarterly revenue")
        page.select_option("#mode", "visual")
        page.click("#search")
        button = page.locator(".hit button.explain").first
        button.click()
        sync_api.expect(button).to_have_text("evidence")
        assert any("/api/tile?" in u and "explain=quarterly+revenue" in u for u in asked)
        button.click()
        sync_api.expect(button).to_have_text("similarity map")
        browser.close()
