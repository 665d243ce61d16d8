"""Answers made visible: cited pages with their evidence boxes drawn, as images or one HTML file."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw

from pagesight.answer.base import Answer
from pagesight.records import Box

BOX_COLOUR = (220, 30, 60)


def draw_boxes(page: Image.Image, boxes: Sequence[Box], width: int = 3) -> Image.Image:
    """A copy of ``page`` with each box outlined and its inside lightly tinted."""
    base = page.convert("RGB")
    tint = Image.new("RGBA", base.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(tint)
    for x0, y0, x1, y1 in boxes:
        draw.rectangle((x0, y0, x1, y1), fill=(*BOX_COLOUR, 40), outline=(*BOX_COLOUR, 255), width=width)
    return Image.alpha_composite(base.convert("RGBA"), tint).convert("RGB")


def cited_pages(index, answer: Answer) -> list[tuple[str, Image.Image]]:
    """Each cited page, rendered again, with the boxes cited on it drawn; labelled by page id."""
    boxes: dict[tuple[str, int], list[Box]] = {}
    for citation in answer.citations:
        boxes.setdefault((citation.doc_id, citation.page), []).extend(citation.boxes)
    return [
        (f"{doc_id}_{page}", draw_boxes(index.page_image(doc_id, page), page_boxes))
        for (doc_id, page), page_boxes in boxes.items()
    ]


def write_html(index, answer: Answer, path: Path) -> Path:
    """One self-contained HTML file: the answer, its cited pages with boxes, the hits."""
    figures = []
    for label, image in cited_pages(index, answer):
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        data = base64.b64encode(buffer.getvalue()).decode()
        figures.append(
            f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(label)}">'
            f"<figcaption>{html.escape(label)}</figcaption></figure>"
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
