"""The records a catalog gives back, the same for every store (``store/base.py``'s ``Catalog``): a
document's row and a tile's, with its spans, links and region."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pagesight.records import Region


@dataclass
class DocumentRow:
    id: str
    source: Path
    sha256: str
    type: str
    size: int
    mtime_ns: int
    n_pages: int
    meta: dict = field(default_factory=dict)


@dataclass
class TileRow:
    id: int
    doc_id: str
    page: int
    idx: int
    box: tuple[float, float, float, float]
    spans: list
    page_size: tuple[int, int]
    kind: str = ""
    links: list = field(default_factory=list)  # [anchor text, url, [box, ...]] per link
    region: Region | None = None  # a table or figure searched as its own unit; its box is the tile's
