"""``pagesight ingest`` on a folder of web pages, run as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.render.web.conftest import needs_chromium, page
from tests.test_cli import pagesight

pytestmark = needs_chromium


def test_ingest_folder_with_html_and_a_hanging_page(tmp_path: Path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "guide.html").write_text(page("Guide", "<p>Snorkelling guide for coral reefs.</p>"))
    (site / "hang.html").write_text(page("Hang", "<script>while (true) {}</script>"))
    index = str(tmp_path / "ix")
    result = pagesight(
        "ingest", str(site), "--index", index, "--no-dense", "--json", "--timeout", "3",
        "--viewport-width", "640", "--no-javascript", check=False,
    )  # fmt: skip
    # With scripts off the endless loop never runs: both pages render.
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added"] == 2
    result = pagesight(
        "ingest", str(site), "--index", str(tmp_path / "ix2"), "--no-dense", "--timeout", "3", check=False
    )
    assert result.returncode == 1
    assert f"{site / 'hang.html'}: timed out after 3 s" in result.stderr.splitlines()
    hits = json.loads(pagesight("search", "snorkelling coral", "--index", index, "--json").stdout)
    assert hits[0]["page_id"] == "guide_1"
    info = json.loads(pagesight("info", "--index", index, "--json").stdout)
    assert info["settings"]["viewport_width"] == 640
