"""The plain records that pass between stages (see DESIGN.md).

Boxes are ``(x0, y0, x1, y1)`` in pixels of the rendered page, origin at the top left, at the
index's rendering DPI. Page numbers count from 1, tile indexes from 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

Box = tuple[float, float, float, float]


@dataclass
class Span:
    """A line of text on a page with its pixel box and where it came from."""

    text: str
    box: Box
    source: str  # "pdf" (text layer), "ocr", "dom" (a web page's own text) or "transcript" (given)
    conf: float = 1.0


def printed_rows(boxes: Sequence[Box], sources: Sequence[str]) -> list[range]:
    """The spans (by their ``boxes`` and ``sources``, in order) as the printed lines they make, as
    ranges of their indexes: the text layer's pieces of one line (``text/textlayer.py`` cuts a
    line where its pieces stand apart) follow one another on one row, left to right, and read as
    that line; any other span is a line of its own. So a tile's text, its search evidence and
    BM25 read a table row as the line it is, whatever the pieces the reader sees."""
    rows: list[range] = []
    for i, (box, source) in enumerate(zip(boxes, sources)):
        if (
            rows
            and source == "pdf"
            and sources[i - 1] == "pdf"
            and same_row(boxes[i - 1], box)
            and box[0] >= boxes[i - 1][2] - 2
        ):
            rows[-1] = range(rows[-1].start, i + 1)
        else:
            rows.append(range(i, i + 1))
    return rows


def union(boxes: Sequence[Box]) -> Box:
    """The smallest box holding every box of ``boxes``."""
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def same_row(a: Box, b: Box) -> bool:
    """Two boxes share most of the lower one's height: they stand on one row."""
    overlap = min(a[3], b[3]) - max(a[1], b[1])
    return overlap >= 0.5 * min(a[3] - a[1], b[3] - b[1])


@dataclass
class Link:
    """A hyperlink on a web page: anchor text, resolved target, one box per line it covers."""

    text: str
    url: str
    boxes: list[Box]


@dataclass
class Region:
    """A block of a page found by layout detection (``text/layout.py``): its kind (table, figure,
    table_caption, figure_caption, title, text, header, footer, reference, equation), its pixel box
    and the detector's score. Web pages take theirs from the DOM (table, figure, infobox, list,
    code: the outermost such elements, score 1)."""

    kind: str
    box: Box
    score: float = 1.0


@dataclass
class Tile:
    """A horizontal band of a page: the unit that is indexed and retrieved."""

    index: int
    box: Box
    spans: list[Span] = field(default_factory=list)
    kind: str = ""  # web pages: the content covering most of the tile (paragraph, table, list, ...)
    links: list[Link] = field(default_factory=list)  # web pages: hyperlinks inside the tile
    image: bytes | None = None  # PNG kept in the index (web pages captured with images kept)
    # A layout region searched as its own unit (a table or figure with its caption's lines); None
    # for the page's bands. Its box is the region's, its index follows the bands' indexes.
    region: Region | None = None

    @property
    def text(self) -> str:
        """The printed lines, one per line (a text-layer line's pieces joined again:
        ``text.lines.printed_rows``); a word split by a soft hyphen at a line's end joined again."""
        rows = printed_rows([s.box for s in self.spans], [s.source for s in self.spans])
        lines = (" ".join(self.spans[i].text for i in row) for row in rows)
        return "\n".join(lines).replace("\u00ad\n", "")


@dataclass
class Page:
    number: int  # from 1
    width: int  # pixels at the index DPI
    height: int
    text_source: str  # "pdf", "ocr", "dom", "transcript" (text.transcripts) or "none"
    tiles: list[Tile] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)  # layout detection's blocks (index setting)
    language: str = "en"  # its text's (text.language), which BM25 analyses it in


@dataclass
class Document:
    id: str
    source: str  # path of the source file
    sha256: str
    type: str  # "pdf", "image", or a web source: "html", "zim", "url"
    size: int
    mtime_ns: int
    pages: list[Page] = field(default_factory=list)
    meta: dict = field(default_factory=dict)


@dataclass
class Hit:
    doc_id: str
    page: int
    tile: int
    score: float
    scores: dict[str, float]  # score per retriever that found the tile
    snippet: str
    boxes: list[Box]
    page_size: tuple[int, int]
    tile_box: Box
    # The table or figure (with its caption) that matched best, when that unit was a layout region
    # inside the tile (indexes made with layout regions); the boxes then lie in it.
    region: Region | None = None

    @property
    def page_id(self) -> str:
        """The evaluation id of the page: ``<doc id>_<page>``."""
        return f"{self.doc_id}_{self.page}"

    def to_dict(self) -> dict:
        d = asdict(self)
        if self.region is None:  # only indexes made with layout regions have them
            del d["region"]
        d["page_id"] = self.page_id
        return d
