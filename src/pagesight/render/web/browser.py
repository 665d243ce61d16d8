"""Render web pages with one headless Chromium (Playwright, Debian's ``/usr/bin/chromium``).

One browser and a few tabs, each in a context (and window) of its own, render pages concurrently:
Chromium puts each tab in its own renderer process, so the cores stay busy while Python waits on
one tab's I/O, and a tab that hangs (a script in an endless loop) or crashes is closed and replaced
while the others go on. The Playwright driver runs in a background thread with its own event loop;
callers stay synchronous.

Each page is loaded, stripped of chrome and measured by ``capture.js``, then captured tile by
tile: the page is scrolled so that the tile is in view and the tile's clip is taken as PNG. That
costs one raster of the visible area per tile (a full-page capture re-lays the page out at full
size), and it is exactly what an on-demand re-render of one tile repeats, so both give the same
pixels. Before each tile the viewport's size is checked, so a tile is never cut short silently.

Every request a page makes goes through the tab's route handler, which asks the page's
:class:`~pagesight.render.web.sites.Site` (local folder, ZIM archive, URL cache) to serve it; what the
site does not serve is aborted unless the network is allowed; the handler sits on the tab's
context, so pop-up windows (closed as soon as they open) are fenced the same way. Only the files
of a local folder skip the handler: Chromium reads them itself. As a second fence, the browser is
launched with an unreachable proxy when the network is not allowed, so nothing the route handler
cannot see (WebSockets, prefetches) gets out either.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import queue
import re
import threading
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

from pagesight.errors import InputError, PagesightError
from pagesight.records import Box, Link, Span
from pagesight.render.tiles import cut_tiles
from pagesight.render.web.chrome import rules_json
from pagesight.render.web.jobs import CHROMIUM, Capture, RenderJob, RenderOptions, chromium_missing
from pagesight.render.web.sites import ABORT, CONTINUE, Site

_CAPTURE_JS = Path(__file__).with_name("capture.js")


@cache
def _capture_js() -> str:
    return _CAPTURE_JS.read_text(encoding="utf-8")


class _Tab:
    """One browser tab in a context and window of its own, its CDP session and the site serving it.

    A tab gets its own context, hence its own window: tabs that share a window are not all the
    window's active tab, and a tab that is not was seen to lose its emulated viewport height now and
    then (``innerHeight`` 937 instead of 1024), so the bottom of a tile came out blank.
    """

    def __init__(self, context, page, cdp):
        self.context = context
        self.page = page
        self.cdp = cdp
        self.site: Site | None = None
        self.blocked: list[str] = []
        self.handler = None  # the route handler, asking ``site``
        self.local: str | None = None  # the prefix the route handler is not asked about
        self.key: object = None  # the job whose page is loaded, for tiles rendered on demand


class WebRenderer:
    """A headless Chromium that renders pages into :class:`Capture` records.

    Use as a context manager, or call :meth:`close`. Not thread-safe: one caller at a time.
    """

    def __init__(self, options: RenderOptions | None = None):
        self.options = options or RenderOptions()
        missing = chromium_missing() if self.options.executable == str(CHROMIUM) else None
        if missing:
            raise PagesightError(f"cannot render web pages: {missing}")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pagesight-chromium", daemon=True)
        self._thread.start()
        self._playwright = None
        self._browser = None
        self._relaunch = asyncio.Lock()
        self._warm: _Tab | None = None  # the page last rendered on demand, still loaded
        try:
            self._call(self._launch())
        except BaseException:
            self.close()
            raise

    # Plumbing ----------------------------------------------------------------------------------

    def _call(self, coroutine, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _launch(self) -> None:
        from playwright.async_api import async_playwright

        if self._playwright is None:
            self._playwright = await async_playwright().start()
        args = [
            "--force-color-profile=srgb",
            "--disable-features=Translate,MediaRouter,OptimizationHints",
            # A capture waits for the next frame; unthrottled, a tile takes ~30 ms instead of ~40 in
            # one tab (an on-demand re-render); with two tabs on two cores the CPU is the limit.
            "--disable-gpu-vsync",
            "--disable-frame-rate-limit",
        ]
        if not self.options.allow_network:
            # Everything the route handler does not serve goes to a proxy that is not there.
            args += ["--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
        try:
            self._browser = await self._playwright.chromium.launch(
                executable_path=self.options.executable, headless=True, args=args
            )
        except Exception as exc:
            raise PagesightError(f"cannot start Chromium ({_first_line(exc)})") from None

    def _context_options(self) -> dict:
        return dict(
            viewport={"width": self.options.width, "height": self.options.tile_height},
            device_scale_factor=1,
            java_script_enabled=self.options.javascript,
            service_workers="block",
            accept_downloads=False,
            reduced_motion="reduce",
            color_scheme="light",
            locale="en-US",
            timezone_id="UTC",
        )

    async def _ensure_browser(self) -> None:
        """Start a new browser when the old one died (a crash takes every tab with it)."""
        async with self._relaunch:
            if self._browser is not None and self._browser.is_connected():
                return
            with contextlib.suppress(Exception):
                await self._browser.close()
            await self._launch()

    async def _new_tab(self) -> _Tab:
        await self._ensure_browser()
        context = await self._browser.new_context(**self._context_options())
        page = await context.new_page()
        cdp = await context.new_cdp_session(page)
        tab = _Tab(context, page, cdp)

        async def handler(route) -> None:
            await self._route(tab, route)

        async def close_popup(popup) -> None:
            if popup is not page:
                with contextlib.suppress(Exception):
                    await popup.close()

        tab.handler = handler
        # On the context, so pop-up windows the page opens are fenced too; they are closed at once.
        await context.route("**/*", handler)
        context.on("page", close_popup)
        return tab

    async def _serve_locally(self, tab: _Tab, site: Site) -> None:
        """Route every request of ``tab`` to its site, but those under the site's ``local`` prefix.

        Those Chromium loads itself: Playwright matches the pattern in its driver, so they skip
        the round trip to Python (a Sphinx page makes about 17 requests).
        """
        local = getattr(site, "local", None)
        if local == tab.local:
            return
        await tab.context.unroute_all()
        pattern = re.compile("^(?!" + re.escape(local) + ")") if local else "**/*"
        await tab.context.route(pattern, tab.handler)
        tab.local = local

    async def _route(self, tab: _Tab, route) -> None:
        """Serve a request from the tab's site; abort it, or let it out when the network is allowed."""
        url = route.request.url
        try:
            answer = await tab.site.serve(url, route) if tab.site is not None else None
            if answer is CONTINUE:
                await route.continue_()
            elif answer is ABORT:
                await route.abort("blockedbyclient")
            elif answer is not None:
                status, content_type, body = answer
                await route.fulfill(status=status, content_type=content_type, body=body)
            elif self.options.allow_network and url.startswith(("http:", "https:")):
                await route.continue_()
            else:
                tab.blocked.append(url)
                await route.abort("blockedbyclient")
        except Exception:  # the page went away meanwhile; nothing to answer
            with contextlib.suppress(Exception):
                await route.abort("failed")

    async def _close_tab(self, tab: _Tab | None) -> None:
        if tab is None:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(tab.context.close(), 10)

    # Rendering ---------------------------------------------------------------------------------

    async def _load(self, tab: _Tab, job: RenderJob) -> dict:
        """Go to the page and run the DOM pass; returns what capture.js measured."""
        options = self.options
        tab.site = job.site
        tab.blocked = []
        await self._serve_locally(tab, job.site)
        try:
            response = await tab.page.goto(job.url, wait_until="load", timeout=options.timeout * 1000)
        except Exception as exc:
            message = _first_line(exc)
            if "net::ERR_" in message:  # the page could not be loaded; a crash reads otherwise
                raise InputError(f"cannot load page ({message.split('net::', 1)[1].split()[0]})") from None
            raise
        if response is not None and response.status >= 400:
            raise InputError(f"page answered HTTP {response.status}")
        measured = await tab.page.evaluate(
            _capture_js(), {"rules": rules_json(), "width": options.width, "settle": options.settle * 1000}
        )
        return json.loads(measured)

    async def _shoot(self, tab: _Tab, box: Box) -> bytes:
        """The PNG of ``box`` (page pixels): scrolled into view, then clipped."""
        x0, y0, x1, y1 = box
        size = await tab.page.evaluate("(top) => (window.scrollTo(0, top), [innerWidth, innerHeight])", y0)
        if size != [self.options.width, self.options.tile_height]:
            # The tile would be cut short; a new tab (in a new window) renders the page again.
            raise _ViewportLost(
                f"viewport is {size[0]}x{size[1]}, not the {self.options.width}x{self.options.tile_height} asked for"
            )
        shot = await tab.cdp.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "optimizeForSpeed": True,
                "clip": {"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0, "scale": 1},
            },
        )
        return base64.b64decode(shot["data"])

    async def _render(self, tab: _Tab, job: RenderJob) -> Capture:
        options = self.options
        data = await self._load(tab, job)
        full_height = int(data["height"])
        height = max(1, min(full_height, options.max_height))
        notes = []
        if full_height > options.max_height:
            notes.append(f"page is {full_height} px tall; cut at {options.max_height} px")
        boxes = cut_tiles(options.width, height, options.tile_height, min_tail=0)
        tiles = []
        for box in boxes:
            tiles.append((box, await self._shoot(tab, box) if options.keep_images else None))
        if tab.blocked:
            first = tab.blocked[0] if len(tab.blocked[0]) <= 120 else tab.blocked[0][:119] + "…"
            notes.append(f"{len(tab.blocked)} request(s) outside the source blocked, e.g. {first}")
        if not data.get("settled", True):
            notes.append(f"images or fonts still loading after {options.settle:g} s")
        return _capture(job.url, data, options.width, height, full_height, tiles, notes)

    async def _render_tiles(self, job: RenderJob, boxes: list[Box]) -> list[bytes]:
        """Tiles of one page, rendered again. The loaded page stays open for the next call, so
        asking for a page's tiles one by one (a reader's top tiles) loads it once, not per tile.
        ``job.key`` names the page (its site included); a job without one is not kept."""
        tab, self._warm = self._warm, None
        try:
            if tab is None or job.key is None or tab.key != job.key:
                await self._close_tab(tab)
                tab = await self._new_tab()
                await self._load(tab, job)
                tab.key = job.key
            shots = [await self._shoot(tab, box) for box in boxes]
        except BaseException:
            await self._close_tab(tab)
            raise
        if job.key is None:
            await self._close_tab(tab)
        else:
            self._warm = tab
        return shots

    async def _run(self, jobs: Iterator[RenderJob], out: queue.Queue, credits: asyncio.Semaphore) -> None:
        """Render ``jobs`` on ``concurrency`` tabs; put (job, Capture | Exception) on ``out``."""
        options = self.options
        retry: list[tuple[RenderJob, int]] = []
        exhausted = False

        def next_job() -> tuple[RenderJob, int] | None:
            nonlocal exhausted
            if retry:
                return retry.pop(0)
            if exhausted:
                return None
            try:
                return next(jobs), 0
            except StopIteration:
                exhausted = True
                return None
            except Exception as exc:  # the job source itself failed (an unreadable archive, say)
                exhausted = True
                out.put((None, exc))
                return None

        async def worker() -> None:
            tab = None
            while True:
                await credits.acquire()
                taken = next_job()
                if taken is None:
                    credits.release()
                    break
                job, attempt = taken
                try:
                    if tab is None:
                        tab = await self._new_tab()
                    result = await asyncio.wait_for(self._render(tab, job), options.timeout)
                except InputError as exc:  # the page's own fault; the tab is fine
                    result = exc
                except (asyncio.TimeoutError, TimeoutError):
                    await self._close_tab(tab)
                    tab = None
                    result = InputError(f"timed out after {options.timeout:g} s")
                except Exception as exc:  # a crashed tab or browser: start afresh and try again
                    await self._close_tab(tab)
                    tab = None
                    if attempt < options.retries:
                        retry.append((job, attempt + 1))
                        credits.release()
                        continue
                    result = InputError(f"page crashed or the browser failed ({_first_line(exc)})")
                out.put((job, result))
            await self._close_tab(tab)

        workers = [asyncio.ensure_future(worker()) for _ in range(max(1, options.concurrency))]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            out.put(_DONE)

    # Public ------------------------------------------------------------------------------------

    def render(
        self, jobs: Iterable[RenderJob], window: int | None = None
    ) -> Iterator[tuple[RenderJob, object]]:
        """(job, Capture or InputError) for every job, in the order they finish.

        At most ``window`` results wait for the caller at a time (default: twice the concurrency), so
        a slow consumer holds the rendering back instead of piling up images in memory. A failure of
        the job source itself comes out as ``(None, exception)``.
        """
        out: queue.Queue = queue.Queue()
        window = window or 2 * max(1, self.options.concurrency)

        async def start() -> tuple[asyncio.Future, asyncio.Semaphore]:
            credits = asyncio.Semaphore(window)
            return asyncio.ensure_future(self._run(iter(jobs), out, credits)), credits

        task, credits = self._call(start())
        try:
            while True:
                item = out.get()
                if item is _DONE:
                    break
                self._loop.call_soon_threadsafe(credits.release)
                yield item
        finally:
            if not task.done():
                self._loop.call_soon_threadsafe(task.cancel)

    def render_one(self, job: RenderJob) -> Capture:
        """Render one page; raises InputError naming the reason when it fails."""
        for _, result in self.render([job]):
            if isinstance(result, Exception):
                raise result
            return result
        raise InputError("page was not rendered")

    def render_tiles(self, job: RenderJob, boxes: list[Box]) -> list[bytes]:
        """The PNGs of tiles of a page, rendered again the way ingestion rendered them."""
        try:
            return self._call(asyncio.wait_for(self._render_tiles(job, boxes), self.options.timeout))
        except (asyncio.TimeoutError, TimeoutError):
            raise InputError(f"timed out after {self.options.timeout:g} s") from None

    def close(self) -> None:
        async def shutdown() -> None:
            if self._browser is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._browser.close(), 10)
            if self._playwright is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._playwright.stop(), 10)

        if self._loop.is_running():
            with contextlib.suppress(Exception):
                self._call(shutdown(), timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._loop.is_running():
            self._loop.close()

    def __enter__(self) -> WebRenderer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_DONE = object()


class _ViewportLost(RuntimeError):
    """The tab's viewport is not the size asked for; handled like a crash (retried in a new tab)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 200 else line[:199] + "…"


def _capture(url: str, data: dict, width: int, height: int, full_height: int, tiles, notes) -> Capture:
    """The measured DOM as records, limited to the captured area (spans and links past it dropped)."""

    def inside(box) -> bool:
        return box[1] < height and box[0] < width and box[3] > 0 and box[2] > 0

    def clamp(box) -> Box:
        return (max(0.0, box[0]), max(0.0, box[1]), min(float(width), box[2]), min(float(height), box[3]))

    spans, blocks = [], []
    for item in data["spans"]:
        if inside(item["box"]):
            box = clamp(item["box"])
            spans.append(Span(item["text"], box, "dom"))
            if item["kind"] == "paragraph":  # other kinds count through their whole region below
                blocks.append((item["kind"], box))
    for item in data.get("regions", []):
        if inside(item["box"]):
            blocks.append((item["kind"], clamp(item["box"])))
    links = []
    for item in data["links"]:
        boxes = [clamp(b) for b in item["boxes"] if inside(b)]
        if boxes:
            links.append(Link(item["text"], item["url"], boxes))
    for item in data["figures"]:
        if inside(item["box"]):
            blocks.append((item["kind"], clamp(item["box"])))
    undecodable = sum(span.text.count("\ufffd") for span in spans)
    if undecodable:
        notes.append(f"{undecodable} character(s) could not be decoded (broken encoding); shown as U+FFFD")
    return Capture(url, data.get("title", ""), width, height, full_height, spans, links, blocks, tiles, notes)
