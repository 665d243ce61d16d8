"""A document's title and what names it: the words a question uses to point at one document.

Most pages of a report, a filing or a paper never repeat its name, so a question that names the
document ("the Halvorsen 2021 annual report", "what does Query2doc do") matches only the pages
that do. Each page is therefore indexed with its document's *context*: the title (the largest
line at the top of the first page, which beats PDF metadata: empty or "Microsoft Word - draft3"
more often than not) and the file name with its separators split.

A page has a heading of its own too (indexed with its first band and its table and figure units):
the short lines it opens with ("Consolidated Statements of
Cash Flows", "NOTE 7. Supplemental Balance Sheet Information", a slide's title), which say what the
page is about better than the numbers below them. Lines that open many pages of the document (a
running header, "Table of Contents", the company's name) are no heading.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from pagesight.records import Span
from pagesight.text.lines import FIGURE, YEAR

TOP = 0.4  # the title sits in the top part of the first page
SAME_SIZE = 0.6  # lines at least this tall, relative to the tallest, may continue the title block
GAP = 0.5  # ... when at most this much of its height apart (a section heading sits further off)
MAX_CHARS = 300
HEADING_LINES = 6  # a page's heading is among its first lines
HEADING_WORDS = 10  # ... each of them short: a sentence of prose ends the heading
RUNNING_SHARE = 0.2  # a line opening this share of a document's pages (and 3 at least) is running
_SEPARATORS = re.compile(r"[_\-.+]+|(?<=[a-z])(?=[A-Z])")


def heading(spans: list[Span], page_height: float) -> str:
    """The first page's title block: its tallest horizontal line in the top part of the page (line
    height follows the font size) and the lines that continue it above and below, as tall as
    ``SAME_SIZE`` of it and at most ``GAP`` of its height apart (a subtitle, a second title line,
    not the authors or a section heading further off). Vertical text (the arXiv stamp on the
    margin) and lines of fewer than four letters are left out."""
    lines = sorted(
        (
            s
            for s in spans
            if s.box[1] < page_height * TOP
            and (s.box[2] - s.box[0]) > 2 * (s.box[3] - s.box[1])
            and sum(c.isalpha() for c in s.text) > 3
        ),
        key=lambda s: s.box[1],
    )
    if not lines:
        return ""
    height = [s.box[3] - s.box[1] for s in lines]
    top = bottom = max(range(len(lines)), key=lambda n: height[n])
    tallest = height[top]

    def continues(n: int, gap: float) -> bool:
        return height[n] >= SAME_SIZE * tallest and gap <= GAP * tallest

    while bottom + 1 < len(lines) and continues(bottom + 1, lines[bottom + 1].box[1] - lines[bottom].box[3]):
        bottom += 1
    while top > 0 and continues(top - 1, lines[top].box[1] - lines[top - 1].box[3]):
        top -= 1
    title = " ".join(s.text for s in lines[top : bottom + 1])
    return title.replace("\u00ad ", "")[:MAX_CHARS]


def name_words(stem: str) -> str:
    """A file name as words: "acme_10-K.2021" -> "acme 10 K 2021", "AnnualReport" -> "Annual Report"."""
    return " ".join(_SEPARATORS.sub(" ", stem).split())


def context(doc_id: str, meta: dict) -> str:
    """The text that names a document: its title and the words of its file name (its id)."""
    title = meta.get("title") or ""
    return "\n".join(part for part in (title, name_words(doc_id)) if part)


def tile_fields(named: str, tiles: Sequence[tuple[int, int, bool, str]]) -> list[tuple[str, str]]:
    """Each tile's (document context, page heading) as BM25 indexes it, for one document's tiles
    given as (page, index, is a region unit, text) in page order, bands before units.

    - The context (``named``, the document's ``context``) goes with every tile but those without
      text below a page's first (the empty foot of a tall page, a picture between a web page's
      paragraphs), which would otherwise match a question naming the document better than the
      tiles that answer it, being the shortest; a page's first tile keeps it, text or not, so a
      page with no text at all is still found by its document's name.
    - The heading (``page_headings``) goes with a page's first band and its table and figure units.
    """
    firsts = {page: text for page, index, region, text in tiles if index == 0 and not region}
    headings = dict(zip(firsts, page_headings(list(firsts.values()))))
    return [
        (
            named if index == 0 or text.strip() else "",
            headings.get(page, "") if index == 0 or region else "",
        )
        for page, index, region, text in tiles
    ]


def page_headings(first_texts: Sequence[str]) -> list[str]:
    """Each page's heading, from the text of its first tile, the pages of one document in order.

    The heading is the run of short lines (``HEADING_WORDS`` words at most, not ending like a
    sentence or like a table's row, in an amount) the page opens with, running lines left out: those
    that open at least ``RUNNING_SHARE`` of the document's pages and three of them (a running
    header, a company name), and lines that are a number alone (a page number).
    """
    openings = [
        [line.strip() for line in text.split("\n")[:HEADING_LINES] if line.strip()] for text in first_texts
    ]
    seen = Counter(line.lower() for lines in openings for line in set(lines))
    running = max(3, RUNNING_SHARE * len(first_texts))
    headings = []
    for lines in openings:
        heading_lines = []
        for line in lines:
            words = line.split()
            if seen[line.lower()] >= running or FIGURE.fullmatch(line):
                continue
            if len(words) > HEADING_WORDS or _sentence_end(words) or _amount(words[-1]):
                break
            heading_lines.append(line)
        headings.append("\n".join(heading_lines))
    return headings


def _sentence_end(words: list[str]) -> bool:
    """Whether a line ends like a sentence, or a clause of one: in a comma or a semicolon, or in a
    full stop after words that are not all capitalised, as a name's are ("NETFLIX, INC.", "Walmart
    Inc." above a statement; "of the agreement." is a sentence's end)."""
    last = words[-1]
    if last.endswith((",", ";")):
        return True
    if not last.endswith("."):
        return False
    return not all(word[0].isupper() or not word[0].isalpha() for word in words if word.lower() not in _SMALL)


_SMALL = frozenset({"a", "an", "and", "for", "in", "of", "on", "the", "to"})  # lower case in a title


def _amount(word: str) -> bool:
    """Whether ``word`` is a number other than a year: the value that ends a table's row."""
    return bool(FIGURE.fullmatch(word)) and not YEAR.fullmatch(word)
