"""What a tile's text holds whatever the question, read once and kept by tile id.

A search reads the same few thousand tiles again and again: the lines of each hit that hold the
question's terms are its evidence (``engine.hits``), and how a candidate holds the question is what
the learned ranker scores (``search.ranking``). Both look for the question's stems in the tile's
words by line (``encode.lexical.line_words``), which are listed once per tile; a question's stems
are then found in a few bisections, not in a scan of the tile's text. The listing is kept in the
catalog's ``derived`` cache, shared by an index's stores in a process: a tile's text never changes
(ids are not reused and a document is stored whole).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from pagesight.encode.lexical import LineWords, line_words, stems_by_line
from pagesight.records import printed_rows
from pagesight.text.lines import FIGURE, YEAR

if TYPE_CHECKING:
    from pagesight.store.rows import TileRow

_FIGURE_START = frozenset("($€£-0123456789")


@dataclass(frozen=True)
class TileText:
    """A tile's text as search stages read it (``tile_text``)."""

    lines: LineWords  # its words by line: line i is the tile's span i
    words: int
    figures: float  # the share of its words that are figures
    years: frozenset[str]


def tile_text(text: str) -> TileText:
    """The ``TileText`` of a tile's text, its lines separated by line breaks."""
    words = text.split()
    figures = sum(1 for w in words if w[0] in _FIGURE_START and FIGURE.fullmatch(w))
    return TileText(line_words(text), len(words), figures / max(1, len(words)), frozenset(YEAR.findall(text)))


def spans_text(spans: list) -> str:
    """A tile's stored spans as one text, a printed line each (``records.printed_rows``: a
    text-layer line's pieces joined again; a line break inside a span is a space, so line i
    stays the printed row i)."""
    rows = printed_rows([span[1] for span in spans], [span[2] if len(span) > 2 else "" for span in spans])
    return "\n".join(" ".join(spans[i][0].replace("\n", " ") for i in row) for row in rows)


def tile_texts(
    catalog, tile_ids: list[int], rows: Mapping[int, TileRow] | None = None
) -> dict[int, TileText]:
    """The ``TileText`` of each tile of ``tile_ids`` that the catalog holds, kept in its ``derived``
    cache; a tile not kept yet is read from ``rows`` (tile rows with their spans, already read)
    when there, else from the catalog."""
    kept = catalog.derived
    found = kept.get(tile_ids)
    missing = [tile_id for tile_id in tile_ids if tile_id not in found]
    if missing:
        given = rows or {}
        unread = [tile_id for tile_id in missing if tile_id not in given]
        source = {tile_id: given[tile_id] for tile_id in missing if tile_id in given}
        source.update(catalog.tiles(unread) if unread else {})
        read = {tile_id: tile_text(spans_text(row.spans)) for tile_id, row in source.items()}
        kept.put(read)
        found.update(read)
    return found


@lru_cache(maxsize=4096)
def heading_words(heading: str) -> LineWords:
    """The words of a page's heading (``Catalog.headings``), shared by the tiles that carry it."""
    return line_words(heading)


def matching_lines(stems: list[str], text: TileText, n_lines: int) -> list[int]:
    """How many of ``stems`` (``encode.lexical.query_stems``) each of the tile's ``n_lines`` lines
    holds: what ``encode.lexical.term_matcher`` counts in the lines' text."""
    found = stems_by_line(stems, text.lines)
    return [len(found.get(line, ())) for line in range(n_lines)]
