"""Web sources: where web pages come from, and the site that serves each page's requests.

Three sources ship, in a registry that new ones (a crawl, a sitemap) join with
:func:`register_web_source`:

- ``html``: a local ``.html``/``.htm`` file, or every one below a folder (a saved site, a mirror,
  the Python docs). Pages load from ``file://``; Chromium reads the folder's files itself, and requests
  for files outside the folder named on the command line (the file's own folder when a file is
  named) are refused.
- ``zim``: a Kiwix ZIM archive (libzim). Every HTML article is a page; it and its images and CSS
  are served from the archive under ``http://zim.pagesight.invalid/<entry path>`` (the layout of
  ``kiwix-serve``, so the archive's relative links resolve), never from a disk folder.
- ``url``: an ``http(s)`` URL. The first render fetches the page and everything it loads into a
  cache folder under the index; every render after that, and every re-render of a tile, is
  served from the cache alone, so it is offline and gives the same pixels.

A :class:`Site` answers one request: CONTINUE (let Chromium load it, e.g. a local file inside the
folder), ABORT, a response ``(status, content type, body)``, or None (not the site's: blocked
unless the network is allowed).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, unquote, urldefrag, urlsplit
from urllib.request import url2pathname

from pagesight.errors import InputError

CONTINUE = "continue"
ABORT = "abort"
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
ZIM_SUFFIXES = {".zim"}
ZIM_ORIGIN = "http://zim.pagesight.invalid/"
CACHE_FOLDER = "web-cache"

Answer = str | tuple[int, str, bytes] | None


class Site(Protocol):
    # Optional: a URL prefix whose requests Chromium loads itself without asking ``serve`` (a local
    # folder's files); every other request still comes to ``serve``.
    local: str | None

    async def serve(self, url: str, route) -> Answer: ...


@dataclass
class WebPage:
    """One page to render: its document id, where the browser goes, and how to find it again."""

    doc_id: str
    type: str  # the web source's name: html, zim, url
    source: str  # the file (HTML file, ZIM archive) or the URL
    label: str  # how messages name it: the path, "archive.zim#entry", the URL
    url: str
    meta: dict = field(default_factory=dict)  # source-specific locator, stored with the document
    content_sha256: str | None = None  # None: known only once fetched (URLs)
    size: int = 0
    mtime_ns: int = 0


# Local HTML ------------------------------------------------------------------------------------


class HtmlSite:
    """Files below ``root``, loaded by Chromium itself; nothing outside it.

    The test is on the path as written (``..`` collapsed), not with symbolic links followed: a
    link the folder's owner put inside it is part of the site (Debian's Python docs link
    ``_static/jquery.js`` to ``/usr/share/javascript``), while a page cannot name a path outside.
    """

    def __init__(self, root: Path):
        self.root = root.resolve()
        # Chromium normalises a file URL (``..`` and its percent-encoded forms) before requesting
        # it, so a request under this prefix is a file below the root.
        self.local = self.root.as_uri().rstrip("/") + "/"

    async def serve(self, url: str, route) -> Answer:
        if not url.startswith("file:"):
            return None
        path = Path(os.path.normpath(url2pathname(urlsplit(url).path)))
        return CONTINUE if path.is_relative_to(self.root) else None


class HtmlSource:
    name = "html"

    @staticmethod
    def claims(path: Path) -> bool:
        return path.suffix.lower() in HTML_SUFFIXES

    @staticmethod
    def pages(path: Path, root: Path | None = None) -> Iterator[WebPage]:
        """The page of one HTML file; ``root`` is the folder it was found under (its id is relative to it)."""
        folder = root or path.parent
        relative = path.relative_to(folder) if root else Path(path.name)
        doc_id = relative.with_suffix("").as_posix()
        try:
            stat = path.stat()
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read file ({exc.strerror or exc})") from None
        if not data.strip():
            raise InputError("file is empty")
        yield WebPage(
            doc_id=doc_id,
            type="html",
            source=str(path),
            label=str(path),
            url=path.resolve().as_uri(),
            meta={"root": os.path.relpath(folder, path.parent)},
            content_sha256=hashlib.sha256(data).hexdigest(),
            size=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
        )

    @staticmethod
    def page_again(source: Path, meta: dict) -> tuple[str, Site]:
        root = (source.parent / meta.get("root", ".")).resolve()
        return source.resolve().as_uri(), HtmlSite(root)


# Kiwix ZIM ---------------------------------------------------------------------------------------


def _open_zim(path: Path):
    """The archive at ``path``, opened once while the file stays the same (ingestion builds a site
    for every article, and every tile rendered on demand builds one)."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise InputError(f"not a readable ZIM archive ({exc.strerror or exc})") from None
    return _archive(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _archive(path: str, mtime_ns: int, size: int):
    try:
        from libzim.reader import Archive
    except ImportError:
        raise InputError("reading ZIM archives needs the libzim package (pip install libzim)") from None
    try:
        return Archive(path)
    except Exception as exc:
        raise InputError(f"not a readable ZIM archive ({exc})") from None


def _resolve(archive, entry, hops: int = 8):
    while entry.is_redirect and hops > 0:
        entry = entry.get_redirect_entry()
        hops -= 1
    return entry


class ZimSite:
    """Entries of one archive, by path, under :data:`ZIM_ORIGIN`."""

    local = None

    def __init__(self, path: Path):
        self.archive = _open_zim(path)

    async def serve(self, url: str, route) -> Answer:
        if not url.startswith(ZIM_ORIGIN):
            return None
        path = unquote(urldefrag(url)[0][len(ZIM_ORIGIN) :].split("?", 1)[0])
        try:
            item = _resolve(self.archive, self.archive.get_entry_by_path(path)).get_item()
        except KeyError:
            return 404, "text/plain", b"not in the archive"
        return 200, item.mimetype or "application/octet-stream", bytes(item.content)


class ZimSource:
    name = "zim"

    @staticmethod
    def claims(path: Path) -> bool:
        return path.suffix.lower() in ZIM_SUFFIXES

    @staticmethod
    def pages(path: Path, root: Path | None = None) -> Iterator[WebPage]:
        """Every HTML article of the archive (redirects left out), in the archive's path order."""
        archive = _open_zim(path)
        stat = path.stat()
        found = 0
        for number in range(archive.entry_count):
            entry = archive._get_entry_by_id(number)
            if entry.is_redirect:
                continue
            item = entry.get_item()
            if not item.mimetype.startswith("text/html"):
                continue
            content = bytes(item.content)
            found += 1
            yield WebPage(
                doc_id=f"{path.stem}/{entry.path}",
                type="zim",
                source=str(path),
                label=f"{path}#{entry.path}",
                url=ZIM_ORIGIN + quote(entry.path),
                meta={"entry": entry.path},
                content_sha256=hashlib.sha256(content).hexdigest(),
                size=len(content),
                mtime_ns=stat.st_mtime_ns,
            )
        if not found:
            raise InputError("ZIM archive has no HTML articles")

    @staticmethod
    def page_again(source: Path, meta: dict) -> tuple[str, Site]:
        return ZIM_ORIGIN + quote(meta["entry"]), ZimSite(source)


# URLs through a cache -----------------------------------------------------------------------------


class UrlSite:
    """Responses recorded in ``folder``: fetched on a miss while ``fetch``, else served only from it."""

    local = None

    def __init__(self, folder: Path, fetch: bool):
        self.folder = folder
        self.fetch = fetch
        self.manifest_path = folder / "manifest.json"
        try:
            self.manifest: dict[str, list] = json.loads(self.manifest_path.read_text())
        except (OSError, ValueError):
            self.manifest = {}
        self.errors: list[str] = []

    async def serve(self, url: str, route) -> Answer:
        if not url.startswith(("http:", "https:")):
            return None
        key = urldefrag(url)[0]
        known = self.manifest.get(key)
        if known is not None:
            status, content_type, name = known
            return status, content_type, (self.folder / name).read_bytes()
        if not self.fetch:
            return None
        try:
            response = await route.fetch(timeout=30_000)
            body = await response.body()
        except Exception as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.errors.append(f"{key}: {message.removeprefix('Route.fetch: ')}")
            return ABORT
        name = hashlib.sha1(key.encode()).hexdigest()
        self.folder.mkdir(parents=True, exist_ok=True)
        _write_atomic(self.folder / name, body)
        content_type = response.headers.get("content-type", "application/octet-stream")
        self.manifest[key] = [response.status, content_type, name]
        return response.status, content_type, body

    def save(self) -> None:
        """Write the manifest (after a render), so later renders find what was fetched."""
        self.folder.mkdir(parents=True, exist_ok=True)
        _write_atomic(self.manifest_path, json.dumps(self.manifest, indent=0).encode())

    def body(self, url: str) -> bytes | None:
        known = self.manifest.get(urldefrag(url)[0])
        return (self.folder / known[2]).read_bytes() if known else None


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def url_doc_id(url: str) -> str:
    """A URL's document id: without scheme, fragment or trailing slash (``example.org/wiki/Foo``)."""
    rest = urldefrag(url)[0].split("://", 1)[1]
    return rest.rstrip("/") or rest


def cache_folder(url: str) -> str:
    """The URL's cache folder, relative to the index."""
    return f"{CACHE_FOLDER}/{hashlib.sha256(urldefrag(url)[0].encode()).hexdigest()[:24]}"


class UrlSource:
    """A URL; its document's source is its cache folder in the index, the URL is in its meta."""

    name = "url"

    @staticmethod
    def pages(url: str, index_root: Path) -> Iterator[WebPage]:
        yield WebPage(
            doc_id=url_doc_id(url),
            type="url",
            source=str(index_root / cache_folder(url)),
            label=url,
            url=url,
            meta={"url": url},
        )

    @staticmethod
    def page_again(source: Path, meta: dict) -> tuple[str, Site]:
        return meta["url"], UrlSite(source, fetch=False)


def _write_atomic(path: Path, data: bytes) -> None:
    temporary = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    temporary.write_bytes(data)
    os.replace(temporary, path)


# Registry ----------------------------------------------------------------------------------------

WEB_SOURCES: dict[str, type] = {"html": HtmlSource, "zim": ZimSource, "url": UrlSource}


def register_web_source(source: type) -> None:
    """Add a web source: a class with ``name``, ``page_again`` and, for files, ``claims`` and ``pages``."""
    WEB_SOURCES[source.name] = source


def web_type(path: Path) -> str | None:
    """The web source that reads file ``path``, or None when it is not a web file."""
    for name, source in WEB_SOURCES.items():
        claims = getattr(source, "claims", None)
        if claims is not None and claims(path):
            return name
    return None


def page_again(type: str, source: Path, meta: dict) -> tuple[str, Site]:
    """Where to point the browser, and the site serving the page, for an indexed web document."""
    if type not in WEB_SOURCES:
        raise InputError(f"unknown web source '{type}'")
    return WEB_SOURCES[type].page_again(source, meta)
