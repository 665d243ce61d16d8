"""What a web page render is asked for and gives back: the options (``RenderOptions``), one page's
job (``RenderJob``) and its capture (``Capture``), and whether Chromium can run here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from pagesight.records import Box, Link, Span
from pagesight.render.web.sites import Site
from pagesight.spec import check_fields, option

CHROMIUM = Path("/usr/bin/chromium")


@dataclass(frozen=True)
class RenderOptions:
    """How pages are rendered; every field but the last four changes the pixels or what is kept.

    The pixel fields are stored with each document, so a tile re-rendered on demand is rendered the
    same way as at ingestion.
    """

    # ``pagesight ingest`` offers the fields whose ``Spec`` says so (``IngestOptions.web``)
    width: int = option(
        875, "Viewport width, CSS pixels at device scale 1 (Settings.viewport_width).", cli=False
    )
    tile_height: int = option(1024, "Tile height, also the viewport's (Settings.tile_height).", cli=False)
    javascript: bool = option(
        True, "Web pages: run the pages' scripts.", flags=("--javascript/--no-javascript",)
    )
    allow_network: bool = option(
        False,
        "Web pages: let pages load resources from outside their folder or archive.",
        flags=("--allow-network/--no-allow-network",),
    )
    max_height: int = option(
        60_000,
        "Web pages: capture at most this many pixels of a page, noting the cut.",
        ge=1,
        flags=("--max-page-height",),
    )
    keep_images: bool = option(
        True,
        "Web pages: keep tile images in the index, or render them again on demand.",
        flags=("--keep-images/--no-keep-images",),
    )
    settle: float = option(5.0, "Seconds to wait after load for images and fonts.", ge=0, cli=False)
    # Run-only fields: they change how fast pages render, never their pixels.
    timeout: float = option(
        60.0, "Seconds for one page, load to last tile (IngestOptions.timeout).", cli=False
    )
    retries: int = option(
        1, "More attempts after a crash (a timeout is not retried: it would hang again).", ge=0, cli=False
    )
    # one tab per core keeps a 2-core machine busy
    concurrency: int = option(2, "Web pages: browser tabs rendering at once.", ge=1, flags=("--tabs",))
    executable: str = option(str(CHROMIUM), "The Chromium binary.", cli=False)

    def __post_init__(self) -> None:
        check_fields(self, "web: ")

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
