"""A tab whose renderer crashes is replaced and its page tried again; a page that keeps crashing
fails alone with a clear message, and the other pages of the batch render."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pagesight.errors import InputError
from pagesight.render.web.browser import WebRenderer
from pagesight.render.web.jobs import Capture, RenderJob, RenderOptions
from pagesight.render.web.sites import HtmlSite
from tests.render.web.conftest import needs_chromium, png_bytes, write_site

pytestmark = needs_chromium


class CrashingSite(HtmlSite):
    """The test site, but the image of ``crash.html`` crashes the tab's renderer (CDP ``Page.crash``,
    once the page has committed) the first ``times`` times it is asked for."""

    def __init__(self, root: Path, times: int):
        super().__init__(root)
        self.local = None  # every request comes to serve(), so the crash can be set off
        self.times = times
        self.crashed = 0
        self.served = 0

    async def serve(self, url: str, route):
        if url.endswith("/boom.png"):
            if self.crashed == self.times:
                self.served += 1
            else:
                self.crashed += 1
                page = route.request.frame.page
                cdp = await page.context.new_cdp_session(page)
                try:  # no answer comes back when it works: the renderer is gone
                    await asyncio.wait_for(cdp.send("Page.crash"), 5)
                except asyncio.TimeoutError:
                    pass
                except Exception as exc:
                    assert "not killing" not in str(exc), exc  # refused: the test would prove nothing
        return await super().serve(url, route)


def render(folder: Path, times: int, retries: int = 1) -> tuple[dict, CrashingSite]:
    (folder / "crash.html").write_text('<p>Crumbling page</p><img src="boom.png">')
    (folder / "boom.png").write_bytes(png_bytes((200, 30, 30)))
    site = CrashingSite(folder, times)
    names = ["table", "crash", "list", "chrome"]
    jobs = [RenderJob(name, (folder / f"{name}.html").as_uri(), site) for name in names]
    with WebRenderer(RenderOptions(concurrency=2, timeout=20, retries=retries)) as renderer:
        results = {job.key: result for job, result in renderer.render(jobs)}
        # The browser is still good for more work afterwards.
        results["after"] = renderer.render_one(RenderJob("after", (folder / "table.html").as_uri(), site))
    return results, site


def test_a_crashed_tab_is_replaced_and_the_page_rendered_again(tmp_path):
    results, site = render(write_site(tmp_path / "site"), times=1)
    assert (site.crashed, site.served) == (1, 1)
    assert all(isinstance(result, Capture) for result in results.values()), results
    assert any("Crumbling page" in span.text for span in results["crash"].spans)


def test_a_missing_page_is_not_taken_for_a_crash(tmp_path):
    folder = write_site(tmp_path / "site")
    missing = RenderJob("gone", (folder / "crash-report.html").as_uri(), HtmlSite(folder))
    with (
        WebRenderer(RenderOptions(timeout=20)) as renderer,
        pytest.raises(InputError, match=r"^cannot load page \(ERR_FILE_NOT_FOUND\)$"),
    ):
        renderer.render_one(missing)


def test_a_page_that_keeps_crashing_fails_alone(tmp_path):
    results, site = render(write_site(tmp_path / "site"), times=5, retries=1)
    assert (site.crashed, site.served) == (2, 0)  # the first attempt and one retry
    failure = results.pop("crash")
    assert isinstance(failure, InputError)
    assert str(failure) == "page crashed or the browser failed (Page.goto: Page crashed)"
    assert all(isinstance(result, Capture) for result in results.values()), results
