"""Web pages as screenshots: HTML files and folders, URLs through a cache, Kiwix ZIM archives.

``sites`` says where pages come from and serves their requests, ``chrome`` which parts of a page are
stripped, ``browser`` renders pages in one headless Chromium, and :class:`OnDemand` renders a tile
of an indexed page again when its image was not kept.
"""

from __future__ import annotations

import json
from pathlib import Path

from pagesight.records import Box
from pagesight.render.web.browser import WebRenderer
from pagesight.render.web.jobs import Capture, RenderJob, RenderOptions, chromium_missing
from pagesight.render.web.sites import WEB_SOURCES, page_again, register_web_source, web_type


class OnDemand:
    """Renders tiles of indexed web pages again; one browser per render recipe stays open."""

    def __init__(self) -> None:
        self._renderers: dict[str, WebRenderer] = {}

    def tiles(self, type: str, source: Path, meta: dict, boxes: list[Box]) -> list[bytes]:
        """The PNGs of tiles ``boxes`` of the page stored as (``type``, ``source``, ``meta``)."""
        recipe = meta.get("render", {})
        key = json.dumps(recipe, sort_keys=True)
        renderer = self._renderers.get(key)
        if renderer is None:
            renderer = WebRenderer(RenderOptions.from_pixel_dict(recipe, concurrency=1))
            self._renderers[key] = renderer
        url, site = page_again(type, source, meta)
        return renderer.render_tiles(RenderJob((type, str(source), url), url, site), boxes)

    def close(self) -> None:
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()


__all__ = [
    "WEB_SOURCES",
    "Capture",
    "OnDemand",
    "RenderJob",
    "RenderOptions",
    "WebRenderer",
    "chromium_missing",
    "page_again",
    "register_web_source",
    "web_type",
]
