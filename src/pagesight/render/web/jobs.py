"""What a web page render is asked for and gives back: the options (``RenderOptions``), one page's
job (``RenderJob``) and its capture (``Capture``), and whether Chromium can run here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from pagesight.records import Box, Link, Span
from pagesight.render.web.sites import Site

CHROMIUM = Path("/usr/bin/chromium")


@dataclass(frozen=True)
class RenderOptions:
    """How pages are rendered; every field but the last four changes the pixels or what is kept.

    The pixel fields are stored with each document, so a tile re-rendered on demand is rendered the
    same way as at ingestion.
    """

    width: int = 875  # viewport width, CSS pixels at device scale 1 (PixelRAG's default)
    tile_height: int = 1024  # also the viewport height
    javascript: bool = True
    allow_network: bool = False  # let pages load what their site does not serve
    max_height: int = 60_000  # pages taller than this are cut here, with a note
    keep_images: bool = True  # capture and keep tile PNGs; False: DOM only, pixels on demand
    settle: float = 5.0  # seconds to wait after load for images and fonts
    # Run-only fields: they change how fast pages render, never their pixels.
    timeout: float = 60.0  # seconds for one page, load to last tile
    retries: int = 1  # more attempts after a crash (a timeout is not retried: it would hang again)
    concurrency: int = 2  # tabs rendering at once (one per core keeps a 2-core machine busy)
    executable: str = str(CHROMIUM)

    def pixel_dict(self) -> dict:
        """The fields that decide the pixels (stored per document, folded into its content hash)."""
        data = asdict(self)
        for run_only in ("timeout", "retries", "concurrency", "executable"):
            data.pop(run_only)
        return data

    @classmethod
    def from_pixel_dict(cls, data: dict, **run) -> RenderOptions:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known}, **run)


@dataclass
class RenderJob:
    key: object  # the caller's handle, returned with the result
    url: str
    site: Site


@dataclass
class Capture:
    """What rendering one page gives: its size, DOM text and links, content blocks and tile images."""

    url: str
    title: str
    width: int
    height: int  # captured height (at most max_height)
    full_height: int  # the page's own height
    spans: list[Span]
    links: list[Link]
    blocks: list[tuple[str, Box]]  # (kind, box): paragraph lines, regions (table, list, ...), figures
    tiles: list[tuple[Box, bytes | None]]  # tile box and its PNG (None when images are not kept)
    notes: list[str] = field(default_factory=list)


def chromium_missing() -> str | None:
    """Why web pages cannot be rendered here, or None when they can."""
    if not CHROMIUM.exists():
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install 'pagesight[web]')"
    return None
