"""Tables read as tables: a tile's lines read back as rows of cells, each cell with its row's
label, its column's headers, the table's unit and its box.

The reader has the tile's spans, not the PDF: a piece of a printed line (``text/textlayer.py``),
or an OCR line or cell; one row's spans are read back as one line, each piece boxed. So a row is a label followed by a run of cells (figures, bracketed negatives,
dashes for nil, footnote marks set aside), read from the right: the pieces of figures at a line's
right, or, in a line that is one piece (an index made before the text layer was cut), its figures
at the right. Rows that follow one another with mostly the same number of cells make a table, and
each row's cells take the columns they stand under (right-aligned when the line tells no places).
A label-only line above a row whose label goes on in lower case is that label's first part; any
other is the section of the rows below it ("Current:", "Assets"). A column's headers are the lines above its first row: each piece of a line heads the columns under
it, a spanning heading all of them; a line of one piece ending in one heading per column (years,
"FY2019", quarters, single words) gives each column its own, read in order; any other line heads
every column (a "Years ended December 31" over the years). The unit ("(in millions)", "£m",
"$'000", "%") is read from the headers and the caption above them.

Not pdfplumber's finder (benchmarks/tables.py, BENCHMARKS.md "Tables read as tables"): it reads
the PDF's characters, which the catalog does not keep and a scan lacks, and found fewer cells right
on the typeset corpus; img2table installs opencv-contrib-python over the OpenCV builds here. The
extractive reader answers from the cells (``answer/extractive/``); BM25 indexes them (``cell_text``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from pagesight.records import Box, Span, union
from pagesight.text.lines import PRINTED_YEAR, Line, characters, read_lines

_CURRENCY = "$€£¥"
_FOOTNOTE_TAIL = re.compile(r"(?:(?<![*†‡§¹²³⁴⁵⁶⁷⁸⁹⁰])[*†‡§¹²³⁴⁵⁶⁷⁸⁹⁰]+|\([a-z]\))$")
_FOOTNOTE = re.compile(r"^(?:\(\d\)|\([a-z]\)|[*†‡§¹²³⁴⁵⁶⁷⁸⁹⁰]+)$")
_FIGURE = re.compile(r"^[$€£¥]?\(?[-+−–]?[$€£¥]?(\d[\d,]*(?:\.\d+)?|\.\d+)\)?%?\)?$")
_NIL = re.compile(r"^[—–-]{1,3}$")
_HEADING = re.compile(r"^(?:(?:FY|Q[1-4])?'?\d{2,4}|Q[1-4]|H[12]|%)$")
_UNIT = re.compile(
    r"\b(?:in\s+|dollars\s+in\s+|amounts\s+in\s+)?(thousands|millions|billions)\b"
    # after a currency: "£m", "$'000", "US$ 000", "USDm", "€ million"
    r"|(?:[$€£¥]|(?-i:\b[A-Z]{1,3}\$|\b(?:USD|EUR|GBP|JPY|CNY|RMB|CHF|AUD|CAD|SGD|HKD|INR|SEK|NOK|DKK)))"
    r"\s?(million|thousand|billion|m|mn|bn|['’]?000s?)(?!\w)",
    re.IGNORECASE,
)
_SHORT_UNITS = {"m": "million", "mn": "million", "million": "million", "bn": "billion", "billion": "billion"}
MAX_LABEL_WORDS = 16
_DATED = re.compile(r"^(?:[A-Z][a-z]+\.? )?(?:\d{1,2},?|(?:FY|Q[1-4] )?'?\d{2,4})$")


@dataclass
class Cell:
    """One figure of a table: its text as printed, its value (negative when bracketed; None for a
    dash), its row's label, its column's headers and its box in page pixels."""

    text: str
    value: float | None
    label: str
    column: str
    box: Box
    percent: bool = False
    section: str = ""  # the label-only line above its row's run ("Current:", "Assets")
    index: int = 0  # its column's, from 0
    row_box: Box | None = None  # the line of its row: what a reading of it cites

    @property
    def figure(self) -> str:
        """The text without its footnote mark ("1,234*" -> "1,234")."""
        return _FOOTNOTE_TAIL.sub("", self.text) or self.text


@dataclass
class Table:
    """The cells of one table, row by row, with its unit ("million", "%" or "") and caption."""

    rows: list[list[Cell]]
    columns: list[str]
    unit: str = ""
    caption: str = ""
    lines: list[str] = field(default_factory=list)  # each row's line as printed
    heads: list[Line] = field(default_factory=list)  # the lines its headings were read from
    # the lines each row was read from: its own, after the label lines above it since the last row
    sources: list[list[Line]] = field(default_factory=list)

    def cells(self) -> list[Cell]:
        return [cell for row in self.rows for cell in row]


@dataclass
class _Row:
    line: Line
    label: str
    cells: list[tuple[str, int, int]]  # each cell's text and its characters in the line


def read_tables(spans: list[Span], lines: list[Line] | None = None) -> list[Table]:
    """The tables among a tile's spans (``lines``: their lines, when already read)."""
    lines = read_lines(spans) if lines is None else lines
    parsed = [_row(line) for line in lines]
    tables = []
    for start, end in _runs(lines, parsed):
        table = _table(lines, parsed, start, end)
        if table is not None:
            tables.append(table)
    return tables


# A column heading of more words than this is a table's title or a run of headings read as one
# (a text-layer line of several headings): no cell of its column is indexed with it.
MAX_HEADING_WORDS = 4


def cell_text(spans: list[Span]) -> str:
    """The tables among a tile's spans as BM25 reads them beside its text, a line a cell: the
    cell's column heading (the nearest, "2019" under "Year ended December 31,") and its row label
    ("2019 Total inventories"). A question names a figure by its row and its year ("FY2019 total
    inventories", read as "fy2019 2019 total inventori"), which the page prints a row and a column
    apart, often under a heading 30 lines above; here they are neighbours, so BM25's phrase terms
    ("2019 total") meet them, and the next line's heading follows the label ("inventori 2018"),
    so the label and the year meet in either order. The heading comes first because questions
    put the period before the item more often than after it. The figure is left out: questions
    seldom hold it, and on financebench-dev it cost more in length than it found (BENCHMARKS.md,
    "Table cells as BM25 fields"). Cells with no heading, or a heading too long to be one
    column's, add nothing the tile's own lines do not hold, and are left out too."""
    found = []
    for table in read_tables(spans):
        for cell in table.cells():
            heading = cell.column.split(" / ")[-1]
            if cell.label and heading and len(heading.split()) <= MAX_HEADING_WORDS:
                found.append(f"{heading} {cell.label}")
    return "\n".join(dict.fromkeys(found))


def _row(line: Line) -> _Row | None:
    """A line as a label and the cells at its right; None when it is a sentence. In a line of
    pieces, a piece that holds words ends the cells (a label's own "19.0%" is no cell)."""
    tokens = _tokens(line.text)
    worded = [(lo, hi) for lo, hi, _ in line.parts if not _figures_only(line.text[lo:hi])]
    cells: list[tuple[str, int, int]] = []
    while tokens:
        text, lo, hi = tokens[-1]
        if len(line.parts) > 1 and any(a <= lo < b for a, b in worded):
            break
        if _is_cell(text):
            cells.insert(0, (text, lo, hi))
        elif text in _CURRENCY and cells:  # "$ 5,363": the sign set apart from its figure
            cells[0] = (f"{text}{cells[0][0]}", lo, cells[0][2])
        else:
            break
        tokens.pop()
    label = line.text[: tokens[-1][2]].strip() if tokens else ""
    parsed = _Row(line, label, cells)
    if (
        label.endswith((".", ":", ";"))
        and cells
        and not _years(parsed)
        or len(label.split()) > MAX_LABEL_WORDS
    ):
        return None  # a sentence that ends in figures; "Year ended December 31: 2019 2018" heads columns
    if not cells and label[-1:] in ".;":
        return None
    return parsed


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """The words of ``text`` (runs without blanks) with their places."""
    found, start = [], None
    for i, ch in enumerate(f"{text} "):
        if ch.isspace():
            if start is not None:
                found.append((text[start:i], start, i))
                start = None
        elif start is None:
            start = i
    return found


def _figures_only(text: str) -> bool:
    """A piece of a line that is figures alone ("$ 1,234", "(18)", "—"), currency signs aside."""
    return all(_is_cell(token) or token in _CURRENCY for token in text.split())


def _is_cell(token: str) -> bool:
    token = _FOOTNOTE_TAIL.sub("", token) or token
    return bool(_FIGURE.match(token) or _NIL.match(token))


def value(text: str) -> tuple[float | None, bool]:
    """A cell's number (bracketed or minus-signed: negative) and whether it is a percentage."""
    core = _FOOTNOTE_TAIL.sub("", text) or text
    match = _FIGURE.match(core)
    if not match:
        return None, False
    number = float(match.group(1).replace(",", ""))
    sign = core[1:2] if core[:1] in _CURRENCY else core[:1]
    negative = "(" in core and ")" in core or sign in "-−–" and bool(sign)
    return (-number if negative else number), core.endswith("%") or core.endswith("%)")


def _runs(lines: list[Line], parsed: list[_Row | None]) -> list[tuple[int, int]]:
    """Runs of lines that hold at least two rows of two or more cells, unbroken by a sentence or a
    wide gap, as (first, last + 1)."""
    runs, start = [], None
    for j in range(len(lines) + 1):
        ok = j < len(lines) and parsed[j] is not None
        if ok and start is not None and _gap(lines[j - 1], lines[j]) > 3.0:
            ok = False
            runs.append((start, j))
            start = j
        if ok and start is None:
            start = j
        if not ok and start is not None:
            runs.append((start, j))
            start = None
    return [(a, b) for a, b in runs if sum(len(parsed[k].cells) >= 2 for k in range(a, b)) >= 2]


def _gap(above: Line, below: Line) -> float:
    height = max(above.box[3] - above.box[1], 1.0)
    return (below.box[1] - above.box[3]) / height


def _table(lines: list[Line], parsed: list, start: int, end: int) -> Table | None:
    """The table of the run ``start`` to ``end``: its columns counted from its rows, its headers
    from the lines above its first row, each row's label (a label-only line above a row of cells
    alone is that row's label), footnote marks left in the labels."""
    counts = Counter(len(parsed[k].cells) for k in range(start, end) if len(parsed[k].cells) >= 2)
    n = max(counts, key=lambda c: (counts[c], c))
    first = next((k for k in range(start, end) if len(parsed[k].cells) >= 2 and not _years(parsed[k])), None)
    if first is None:  # rows of years only: dates, a table's headings without its body
        return None
    above = _above(lines, parsed, first)
    centres = _centres([parsed[k] for k in range(first, end) if len(parsed[k].cells) == n], n)
    reach = min(centres) - 0.5 * (max(centres) - min(centres)) / max(n - 1, 1)
    pitch = (max(centres) - min(centres)) / max(n - 1, 1)
    # a heading stands over the columns: a line reaching into them but starting well left of them
    # (a title, a caption at the margin) heads none, unless it ends in one heading per column
    header_lines = [
        line
        for line in above
        if line.box[2] >= reach
        and (len(line.parts) > 1 or line.box[0] >= reach - 0.5 * pitch or _heads_each(line, n))
    ]
    for band in _bands(above):  # a date per column side by side: all of them, the first too
        if _dated(band, n) and any(line in header_lines for line in band):
            header_lines = [line for line in above if line in header_lines or line in band]
    columns = _headers(header_lines, n, centres, reach)
    caption = " ".join(line.text for line in above if line not in header_lines)
    if first - len(above) > 0:
        caption = f"{lines[first - len(above) - 1].text} {caption}".strip()
    unit = _unit(" ".join([caption] + [h.text for h in header_lines]))
    table = Table([], columns, unit, caption, heads=header_lines)
    rights = _rights([parsed[k] for k in range(first, end) if len(parsed[k].cells) == n], n)
    # a label-only line below the headings heads the first rows ("Operating costs:")
    bottom = max((line.box[3] for line in header_lines), default=0.0)
    below = [line for line in above if line not in header_lines and line.box[1] >= bottom]
    labelled = _row(below[-1]) if below else None
    section = below[-1].text if labelled is not None and not labelled.cells else ""
    pending, held = "", []
    for k in range(first, end):
        row = parsed[k]
        held.append(lines[k])
        if not row.cells:
            if pending:
                section = pending
            pending = row.label
            continue
        cells = row.cells
        label = row.label
        if pending and (not label or label[:1].islower()):  # the label's first part is the line above
            label = f"{pending} {label}".strip()
        elif pending:
            section = pending
        while len(cells) > n and _FOOTNOTE.match(cells[0][0]):  # "Revenue (1)": a mark, not a cell
            label, cells = f"{label} {cells[0][0]}".strip(), cells[1:]
        pending = ""
        table.rows.append(_cells(row.line, label, cells[-n:], columns, rights, section))
        table.lines.append(row.line.text)
        table.sources.append(held)
        held = []
    if unit != "%" and table.rows and all(c.percent for c in table.cells() if c.value is not None):
        table.unit = "%"
    return table if table.rows else None


def _years(row: _Row) -> bool:
    """A row of years and days of the month: the dates heading the columns ("(Millions) 2018
    2017 2016", "As of December 31, 2017 2016", "Year ended December 31,")."""
    texts = [text.strip("*") for text, _, _ in row.cells if not _FOOTNOTE.match(text)]
    return bool(texts) and all(PRINTED_YEAR.fullmatch(t) or _day(t) for t in texts)


def _day(text: str) -> bool:
    """A day of the month before its comma ("31,")."""
    return text.endswith(",") and text[:-1].isdigit() and 1 <= int(text[:-1]) <= 31


def _above(lines: list[Line], parsed: list, first: int) -> list[Line]:
    """Header lines right above a table's first row: up to four printed lines (a date on two,
    two columns), each near the next (a sentence, a long line or one with figures other than
    years ends them). Headings side by side are one printed line, however the text layer cut
    them ("August 29," over "2021" beside "August 30," over "2020")."""
    found: list[Line] = []
    k = first - 1
    while k >= 0:
        line, row = lines[k], parsed[k]
        below = found[0] if found else lines[first]
        if _gap(line, below) > 2.0 or len(line.text.split()) > 12 or row is None:
            break
        if row.cells and not _years(row):
            break
        if not any(_beside(line, other) for other in found) and len(_bands(found)) == 4:
            break
        found.insert(0, line)
        k -= 1
    return found


def _beside(line: Line, other: Line) -> bool:
    """The two lines share most of their height: one printed line."""
    overlap = min(line.box[3], other.box[3]) - max(line.box[1], other.box[1])
    return overlap > 0.5 * min(line.box[3] - line.box[1], other.box[3] - other.box[1])


def _bands(lines: list[Line]) -> list[list[Line]]:
    """``lines`` grouped into printed lines (those beside one another), top first."""
    bands: list[list[Line]] = []
    for line in sorted(lines, key=lambda line: line.box[1]):
        band = next((b for b in bands if any(_beside(line, other) for other in b)), None)
        if band is None:
            bands.append([line])
        else:
            band.append(line)
    return bands


def _centres(rows: list[_Row], n: int) -> list[float]:
    """Each column's middle, from the boxes of its cells in the rows with every cell."""
    centres = []
    for c in range(n):
        xs = sorted((b[0] + b[2]) / 2 for b in (_box(r.line, r.cells[c][1], r.cells[c][2]) for r in rows))
        centres.append(xs[len(xs) // 2] if xs else 0.0)
    return centres


def _headers(header_lines: list[Line], n: int, centres: list[float], reach: float) -> list[str]:
    """Each column's headers, top line first, joined by " / ". A printed line cut into as many
    pieces as there are columns gives them one each, left to right: a cell's place is estimated
    from its characters' place in its line, which a long row label skews, the pieces' order is not."""
    heads: list[list[str]] = [[] for _ in range(n)]
    for band in _bands(header_lines):
        if _dated(band, n):
            for c, line in enumerate(sorted(band, key=lambda line: line.box[0])):
                heads[c].append(line.text)
            continue
        for line in band:
            _line_heads(heads, line, n, centres, reach)
    return [" / ".join(h for h in head if h) for head in heads]


def _dated(band: list[Line], n: int) -> bool:
    """A printed line of ``n`` > 1 pieces, each a date or a part of one ("August 29,", "2021",
    "FY2019"): a heading per column."""
    return n > 1 and len(band) == n and all(_DATED.search(line.text) for line in band)


def _heads_each(line: Line, n: int) -> bool:
    """A line of one piece ending in one heading per column ("(in millions) 2024 2023"), or
    naming as many years."""
    words = line.text.split()
    return (
        len(words) >= n
        and all(_HEADING.match(w) for w in words[-n:])
        or len(PRINTED_YEAR.findall(line.text)) == n
    )


def _line_heads(heads: list[list[str]], line: Line, n: int, centres: list[float], reach: float) -> None:
    """The headings one header line gives the columns; a piece left of the columns ("Region"
    over the row labels) heads none."""
    words = line.text.split()
    if len(line.parts) > 1:  # cut into spans: each to the columns under it
        for lo, hi, box in line.parts:
            if box[2] >= reach:
                _head(heads, line.text[lo:hi], _under(box, centres))
    elif (
        len(words) >= n
        and all(_HEADING.match(w) for w in words[-n:])  # "30," of a date is no heading of its own
        or (
            len(words) == n and all(w[:1].isupper() for w in words)  # "Americas Europe Asia"
        )
    ):
        for c, word in enumerate(words[-n:]):
            heads[c].append(word)
    elif len(years := list(PRINTED_YEAR.finditer(line.text))) == n:  # "February 2, 2019 February 3, 2018"
        starts = [0] + [m.end() for m in years[:-1]]
        for c, (lo, m) in enumerate(zip(starts, years)):
            heads[c].append(line.text[lo : m.end()].strip(" ,"))
    else:
        _head(heads, line.text, _under(line.box, centres))


def _head(heads: list[list[str]], text: str, columns: list[int]) -> None:
    """A heading over ``columns``: one word each when it has as many ("Americas Europe Asia"),
    else the whole of it over every one ("Year ended December 31," over two years)."""
    words = text.split()
    if len(columns) > 1 and len(words) == len(columns):
        for c, word in zip(columns, words):
            heads[c].append(word)
        return
    for c in columns:
        heads[c].append(text)


def _under(box: Box, centres: list[float]) -> list[int]:
    """The columns a header span stands over: those whose middle it covers, else the nearest."""
    covered = [c for c, x in enumerate(centres) if box[0] <= x <= box[2]]
    if covered:
        return covered
    middle = (box[0] + box[2]) / 2
    return [min(range(len(centres)), key=lambda c: abs(centres[c] - middle))]


def stated_unit(lines: list[str]) -> str:
    """The unit a page states its figures in ("All amounts expressed in thousands of U.S.
    Dollars", "(in millions)"), for its tables that give none ("" when it states none)."""
    for line in lines:
        for match in _UNIT.finditer(line):
            if match.group(1) and match.group(0).lower().startswith(("in", "dollars in", "amounts in")):
                return match.group(1).lower().rstrip("s")
    return ""


def _unit(text: str) -> str:
    match = _UNIT.search(text)
    if match and match.group(1):
        return match.group(1).lower().rstrip("s")
    if match:
        return _SHORT_UNITS.get(match.group(2).lower(), "thousand")
    lowered = text.lower()
    return "%" if "(%)" in lowered or " in %" in f" {lowered}" or "percent" in lowered else ""


def _rights(rows: list[_Row], n: int) -> list[float] | None:
    """Each column's right edge, from the rows with every cell, when their lines are cut into
    pieces (else their cells' places are estimates: None)."""
    if not rows or any(len(r.line.parts) < 2 for r in rows):
        return None
    edges = []
    for c in range(n):
        xs = sorted(_box(r.line, r.cells[c][1], r.cells[c][2])[2] for r in rows)
        edges.append(xs[len(xs) // 2])
    return edges


def _cells(
    line: Line, label: str, cells: list, columns: list[str], rights: list[float] | None, section: str
) -> list[Cell]:
    """A row's cells, each in the column it stands under (``rights``: the columns' right edges),
    or right-aligned to the columns when the line tells no places (a row with fewer fills the last
    ones). A cell of a column headed "%" is a percentage."""
    n = len(columns)
    boxes = [_box(line, lo, hi) for _, lo, hi in cells]
    places = list(range(n - len(cells), n))
    if rights is not None and len(line.parts) > 1 and len(cells) < n:
        places = _placed([box[2] for box in boxes], rights)
    found = []
    for (text, _, _), box, c in zip(cells, boxes, places):
        number, percent = value(text)
        percent = percent or columns[c].rsplit(" / ", 1)[-1].strip() == "%"
        found.append(Cell(text, number, label, columns[c], box, percent, section, c, line.box))
    return found


def _placed(edges: list[float], rights: list[float]) -> list[int]:
    """The columns of cells whose right edges are ``edges``, left to right: each the nearest
    column right of the one before."""
    places, start = [], 0
    for k, edge in enumerate(edges):
        last = len(rights) - (len(edges) - k)  # leave a column for each cell to come
        c = min(range(start, last + 1), key=lambda c: abs(rights[c] - edge))
        places.append(c)
        start = c + 1
    return places


def _box(line: Line, lo: int, hi: int) -> Box:
    """The box of characters ``lo`` to ``hi`` of a line: the spans they fall in, each span's width
    shared evenly among its characters (a text-layer row is one span)."""
    boxes = [
        characters(box, a, b, max(lo, a), min(hi, b)) for a, b, box in line.parts if min(hi, b) > max(lo, a)
    ]
    return union(boxes) if boxes else line.box
