"""Web pages the tests write, and the skip for machines without Chromium."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pagesight.render.web.jobs import chromium_missing

MISSING = chromium_missing()
needs_chromium = pytest.mark.skipif(MISSING is not None, reason=f"web rendering needs Chromium: {MISSING}")

TALL_PAGE = 16 + 20 + 400000 + 16  # tall.html: the body's margins, its line and its block
STYLE = "body { font-family: sans-serif; font-size: 16px; margin: 16px; } td, th { border: 1px solid #444; }"


def page(title: str, body: str, head: str = "") -> str:
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{STYLE}</style>{head}</head><body>{body}</body></html>"
    )


def png_bytes(color: tuple[int, int, int], size: tuple[int, int] = (200, 100)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def not_blank(image: Image.Image) -> bool:
    """A tile with something on it: its grey levels vary."""
    return float(np.asarray(image.convert("L"), dtype=np.float32).std()) > 2.0


def outside_urls(folder: Path) -> set[str]:
    """What outside.html of ``write_site(folder)`` asks for from outside its folder."""
    return {
        "https://example.org/pixel.png",
        "file:///etc/hostname",
        (folder.parent / "elsewhere.png").resolve().as_uri(),
        "http://tracker.example.com/style.css",
    }


BLOCKED = re.compile(r"(\d+) request\(s\) outside the source blocked, e\.g\. (\S+)")


def write_site(folder: Path) -> Path:
    """A small saved site: table, list, chrome, links, figure, tall, hanging, broken, outside pages."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = "".join(
        f"<tr><td>{name}</td><td>{moons}</td><td>{period}</td></tr>"
        for name, moons, period in [
            ("Quetzalcoatl", 4, "3.2 years"),
            ("Tezcatlipoca", 11, "12.9 years"),
            ("Xochiquetzal", 0, "0.4 years"),
        ]
        * 6
    )
    (folder / "table.html").write_text(
        page(
            "Planet table",
            "<h1>Planets of the Aztec system</h1><table><tr><th>Planet</th><th>Moons</th>"
            f"<th>Orbital period</th></tr>{rows}</table>",
        )
    )
    items = "".join(f"<li>Ingredient {n}: marzipan and cardamom number {n}</li>" for n in range(40))
    (folder / "list.html").write_text(page("Recipe", f"<h2>Ingredients</h2><ul>{items}</ul>"))
    (folder / "chrome.html").write_text(
        page(
            "Chrome",
            '<header style="position: fixed; top: 0">Siteheaderword banner</header>'
            '<nav><a href="list.html">Navigationword menu</a></nav>'
            '<div id="cookie-banner">Cookieconsentword accept all</div>'
            "<main><h1>Lighthouse keeping</h1>"
            "<p>The lighthouse keeper trims the wick at dusk. See the "
            '<a href="table.html">planet table</a> and the <a href="sub/deep.html#part">deep page</a>.</p>'
            "<p>Fog signals sound every thirty seconds in poor visibility.</p></main>"
            "<footer>Footerword copyright</footer>",
        )
    )
    (folder / "sub").mkdir(exist_ok=True)
    (folder / "sub" / "deep.html").write_text(page("Deep", '<p id="part">Abyssal anglerfish glow.</p>'))
    (folder / "red.png").write_bytes(png_bytes((200, 30, 30), (600, 700)))
    (folder / "figure.html").write_text(
        page("Figure", '<figure><img src="red.png"><figcaption>A crimson rectangle</figcaption></figure>')
    )
    (folder / "script.html").write_text(
        page(
            "Script",
            "<p>Static text about walruses.</p><script>document.write('<p>Scriptword added</p>')</script>",
        )
    )
    stripes = "repeating-linear-gradient(#fff 0 40px, #9ab 40px 80px)"
    (folder / "tall.html").write_text(
        page(
            "Tall",
            # Every height declared, so the page is TALL_PAGE px tall whatever font the machine has.
            '<p style="height: 20px; margin: 0; overflow: hidden">Top of the endless page</p>'
            f'<div style="height: 400000px; background: {stripes}"></div>',
        )
    )
    (folder / "hang.html").write_text(page("Hang", "<p>Never finishes</p><script>while (true) {}</script>"))
    (folder / "broken.html").write_bytes(
        b'<!doctype html><html><head><meta charset="utf-8"><title>Broken</title></head><body>'
        b"<p>caf\xe9 cr\xe8me br\xfbl\xe9e \xff\xfe marmalade</p></body></html>"
    )
    (folder / "outside.html").write_text(
        page(
            "Outside",
            '<p>Periwinkle page with outside requests.</p><img src="https://example.org/pixel.png">'
            '<img src="file:///etc/hostname"><img src="../elsewhere.png">',
            head='<link rel="stylesheet" href="http://tracker.example.com/style.css">',
        )
    )
    (folder.parent / "elsewhere.png").write_bytes(png_bytes((0, 0, 255)))
    return folder
