"""Answers made visible: cited pages with their evidence boxes drawn, as images or one HTML file.

A cited page is shown whole when it is page-shaped. A long one (a web page captured full length, a
tall infographic) is shown as bands around what is cited: the full width of the page, from a margin
above the cited boxes to a margin below them, one band per group of citations that lie close
together, so the reader sees the evidence and not the top of a 14,000 px page.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw

from pagesight.answer.base import Answer
from pagesight.errors import PagesightError
from pagesight.records import Box

BOX_COLOUR = (220, 30, 60)
MARGIN = 300  # page pixels of context shown above and below the cited boxes
SHORT_PAGE = 1.5  # pages at most this many times as tall as wide are shown whole
MOST_OF_PAGE = 0.75  # bands that would show this much of a page together: the whole page instead


def draw_boxes(page: Image.Image, boxes: Sequence[Box], width: int = 3) -> Image.Image:
    """A copy of ``page`` with each box outlined and its inside lightly tinted."""
    base = page.convert("RGB")
    tint = Image.new("RGBA", base.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(tint)
    for x0, y0, x1, y1 in boxes:
        draw.rectangle((x0, y0, x1, y1), fill=(*BOX_COLOUR, 40), outline=(*BOX_COLOUR, 255), width=width)
    return Image.alpha_composite(base.convert("RGBA"), tint).convert("RGB")


@dataclass
class Figure:
    """A band of a cited page as shown: rows ``top`` to ``bottom`` (page pixels), the full width.

    ``boxes`` are the cited boxes inside it in page pixels; ``image`` is the band with them drawn,
    in its own pixels (a box at page row y is drawn at row y - ``top``).
    """

    doc_id: str
    page: int
    page_size: tuple[int, int]  # (width, height) of the whole page
    top: int
    bottom: int
    boxes: list[Box]
    image: Image.Image

    @property
    def page_id(self) -> str:
        return f"{self.doc_id}_{self.page}"

    @property
    def whole(self) -> bool:
        return self.top == 0 and self.bottom >= self.page_size[1]

    @property
    def caption(self) -> str:
        """``long-infographic_1, y 5,200-6,400 of 14,000``, or the page id and size when whole."""
        width, height = self.page_size
        if self.whole:
            return f"{self.page_id}, whole page ({width:,} x {height:,} px)"
        return f"{self.page_id}, y {self.top:,}-{self.bottom:,} of {height:,}"


def bands(
    page_size: tuple[int, int], boxes: Sequence[Box], tiles: Sequence[Box] = (), margin: int = MARGIN
) -> list[tuple[int, int]]:
    """The rows ``(top, bottom)`` of a page to show for citations of ``boxes`` and of whole
    ``tiles`` (citations without boxes), top to bottom.

    Each box wants itself plus ``margin`` rows above and below, each tile itself, clamped to the
    page; wants that overlap or are less than ``margin`` apart become one band. A short page (at
    most ``SHORT_PAGE`` times as tall as wide), a page with nothing cited on it, or bands that
    would cover ``MOST_OF_PAGE`` of it anyway give the whole page, ``[(0, height)]``.
    """
    width, height = page_size
    whole = [(0, height)]
    if height <= SHORT_PAGE * width:
        return whole
    wanted = [(box[1] - margin, box[3] + margin) for box in boxes] + [(tile[1], tile[3]) for tile in tiles]
    found: list[tuple[int, int]] = []
    for top, bottom in sorted(wanted):
        top, bottom = max(0, math.floor(top)), min(height, math.ceil(bottom))
        if bottom <= top:  # off the page
            continue
        if found and top - found[-1][1] < margin:
            found[-1] = (found[-1][0], max(found[-1][1], bottom))
        else:
            found.append((top, bottom))
    if not found or sum(bottom - top for top, bottom in found) >= MOST_OF_PAGE * height:
        return whole
    return found


def cited_figures(index, answer: Answer, margin: int = MARGIN) -> list[Figure]:
    """What an answer cites, ready to show: for each cited page (in citation order) its
    ``bands`` from top to bottom, each with the boxes cited in it drawn where the words are.

    A citation without boxes (a reader that cited a tile as a whole) shows its tile. Only the tiles
    under a band are read, so a band of a long web page does not render the whole page again.
    """
    cited: dict[tuple[str, int], tuple[list[Box], list[int]]] = {}
    for citation in answer.citations:
        boxes, tiles = cited.setdefault((citation.doc_id, citation.page), ([], []))
        if citation.boxes:
            boxes.extend(tuple(box) for box in citation.boxes)
        else:
            tiles.append(citation.tile)
    figures = []
    for (doc_id, page), (boxes, tiles) in cited.items():
        rows = index.catalog.page_tiles(doc_id, page)
        if not rows:
            raise PagesightError(f"{index.root}: no page {page} of '{doc_id}'")
        page_size = tuple(rows[0].page_size)
        tile_boxes = [row.box for row in rows if row.idx in tiles]
        for top, bottom in bands(page_size, boxes, tile_boxes, margin):
            inside = [box for box in boxes if box[3] > top and box[1] < bottom]
            image = _band(index, doc_id, page, rows, page_size, top, bottom)
            drawn = [(x0, y0 - top, x1, y1 - top) for x0, y0, x1, y1 in inside]
            figures.append(Figure(doc_id, page, page_size, top, bottom, inside, draw_boxes(image, drawn)))
    return figures


def _band(
    index, doc_id: str, page: int, rows, page_size: tuple[int, int], top: int, bottom: int
) -> Image.Image:
    """Rows ``top`` to ``bottom`` of a page, put together from the tiles under them."""
    width, height = page_size
    if top <= 0 and bottom >= height:
        return index.page_image(doc_id, page)
    under = [row for row in rows if row.box[3] > top and row.box[1] < bottom]
    if not under:  # tiles that do not cover the page: cut the page itself
        return index.page_image(doc_id, page).crop((0, top, width, bottom))
    first = round(under[0].box[1])
    image = Image.new("RGB", (width, round(under[-1].box[3]) - first), "white")
    for row in under:
        tile = index.tile_image(doc_id, page, row.idx).convert("RGB")
        image.paste(tile, (round(row.box[0]), round(row.box[1]) - first))
    return image.crop((0, top - first, width, bottom - first))


def cited_pages(index, answer: Answer) -> list[tuple[str, Image.Image]]:
    """Each cited page whole, rendered again, with the boxes cited on it drawn; labelled by page id.
    ``cited_figures`` shows long pages by the bands cited instead."""
    boxes: dict[tuple[str, int], list[Box]] = {}
    for citation in answer.citations:
        boxes.setdefault((citation.doc_id, citation.page), []).extend(citation.boxes)
    return [
        (f"{doc_id}_{page}", draw_boxes(index.page_image(doc_id, page), page_boxes))
        for (doc_id, page), page_boxes in boxes.items()
    ]


def write_html(index, answer: Answer, path: Path, margin: int = MARGIN) -> Path:
    """One self-contained HTML file: the answer, the cited regions with their boxes (long pages
    cropped to the bands cited, see ``cited_figures``), the hits."""
    figures = []
    for figure in cited_figures(index, answer, margin):
        buffer = io.BytesIO()
        figure.image.save(buffer, format="PNG")
        data = base64.b64encode(buffer.getvalue()).decode()
        caption = html.escape(figure.caption)
        anchor = html.escape("-".join(f"{figure.page_id}-y{figure.top}".split()))
        figures.append(
            f'<figure id="{anchor}"><img src="data:image/png;base64,{data}" alt="{caption}">'
            f"<figcaption>{caption}</figcaption></figure>"
        )
    hits = "".join(
        f"<tr><td>{rank}</td><td>{html.escape(hit.page_id)}</td><td>{hit.tile}</td>"
        f"<td>{hit.score:.4f}</td><td>{html.escape(hit.snippet)}</td></tr>"
        for rank, hit in enumerate(answer.hits, start=1)
    )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(answer.question)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem}}
img{{max-width:100%;border:1px solid #ccc}}figure{{margin:1rem 0}}
td,th{{padding:.2rem .6rem;text-align:left;vertical-align:top}}</style></head><body>
<h1>{html.escape(answer.question)}</h1>
<p><strong>Answer</strong> ({html.escape(answer.reader)}): {html.escape(answer.text) or "<em>none found</em>"}</p>
{"".join(figures)}
<h2>Retrieved</h2><table><tr><th>#</th><th>page</th><th>tile</th><th>score</th><th>snippet</th></tr>{hits}</table>
</body></html>
"""
    path.write_text(page, encoding="utf-8")
    return path
