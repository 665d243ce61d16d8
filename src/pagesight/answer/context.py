"""Building a reader's context from hits, and what it costs in image tokens.

The cost model is the reader's: ``qwen2-vl`` (Qwen2-VL, Qwen2.5-VL and Qwen3-VL's family: the image
is resized to multiples of 28 px within a pixel budget, one token per 28 x 28 patch) and
``openai-high`` (OpenAI's high-detail images: fit in 2048 px, shortest side 768 px, 170 tokens per
512-px tile plus 85). Compression divides each side by sqrt(c), so tokens fall about c-fold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING

from pagesight.answer.base import ContextItem, Searchable
from pagesight.choices import TOKEN_MODELS
from pagesight.encode.visual.processors import qwen_resize
from pagesight.errors import PagesightError
from pagesight.records import Box, Hit, Region, Span

if TYPE_CHECKING:
    from pagesight.store.base import Catalog


def build_context(index: Searchable, hits: Sequence[Hit], compression: float = 1.0) -> list[ContextItem]:
    """One context item per hit: the tile's text spans now, its image when a reader asks for it,
    the first line of its document's first page (its title, for the extractive reader's check), its
    document's text when the reader asks for it (``ContextItem.load_document``), and the layout
    regions that overlap the tile (an index made with layout regions)."""
    if compression < 1:
        raise PagesightError(f"compression must be at least 1, got {compression}")
    items = []
    titles: dict[str, str] = {}
    documents: dict[str, Callable[[], dict[int, str]]] = {}
    layout = bool(index.settings.layout)
    regions: dict[tuple[str, int], list[Region]] = {}
    for hit in hits:
        row = index.catalog.tile_at(hit.doc_id, hit.page, hit.tile)
        spans = [Span(text, tuple(box), source, conf) for text, box, source, conf in row.spans] if row else []
        if hit.doc_id not in titles:
            first = row if (hit.page, hit.tile) == (1, 0) else index.catalog.tile_at(hit.doc_id, 1, 0)
            titles[hit.doc_id] = first.spans[0][0] if first and first.spans else ""

        def load(hit=hit):
            return index.tile_image(hit.doc_id, hit.page, hit.tile, compression)

        item = ContextItem(hit=hit, spans=spans, compression=compression, load_image=load, layout=layout)
        item.title = titles[hit.doc_id]
        if hit.doc_id not in documents:
            documents[hit.doc_id] = _document_reader(index.catalog, hit.doc_id)
        item.load_document = documents[hit.doc_id]
        if layout:
            if (hit.doc_id, hit.page) not in regions:
                regions[hit.doc_id, hit.page] = index.catalog.page_regions(hit.doc_id, hit.page)
            item.regions = [r for r in regions[hit.doc_id, hit.page] if _overlaps(r.box, hit.tile_box)]
        items.append(item)
    return items


def _document_reader(catalog: Catalog, doc_id: str) -> Callable[[], dict[int, str]]:
    """A function giving ``doc_id``'s text page by page (page -> its tiles' lines), read from the
    catalog on its first call and kept."""

    @cache
    def read() -> dict[int, str]:
        rows = catalog.tiles([int(i) for i in catalog.tile_ids_of([doc_id])]).values()
        pages: dict[int, list[str]] = {}
        for row in sorted(rows, key=lambda row: (row.page, row.idx)):
            pages.setdefault(row.page, []).extend(span[0] for span in row.spans)
        return {page: "\n".join(lines) for page, lines in pages.items()}

    return read


def _overlaps(a: Box, b: Box) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def image_tokens(width: int, height: int, model: str = "qwen2-vl") -> int:
    """Image tokens a reader of family ``model`` spends on one ``width`` x ``height`` image."""
    if model == "qwen2-vl":
        h, w = qwen_resize(height, width)
        return (h // 28) * (w // 28)
    if model == "openai-high":
        scale = min(1.0, 2048 / max(width, height))
        w, h = width * scale, height * scale
        scale = min(1.0, 768 / min(w, h))
        w, h = w * scale, h * scale
        return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)
    raise PagesightError(f"token model must be one of {', '.join(TOKEN_MODELS)}, got '{model}'")


def context_tokens(context: Sequence[ContextItem], model: str = "qwen2-vl") -> int:
    """Image tokens of a whole context, from the images' sizes (nothing is rendered)."""
    return sum(image_tokens(*item.image_size(), model) for item in context)
