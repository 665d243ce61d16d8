"""Office files refused before LibreOffice opens them: a package that unpacks too large, a part
packed too tightly, or a document that would print too many pages.

An office file is small on the wire and can be enormous to convert: a 1 MB .docx whose
``word/document.xml`` inflates to a gigabyte (a zip bomb), or a 5 KB one holding 20,000 page
breaks, keeps LibreOffice busy until its time limit. ``check_office_file`` reads what the file says
of itself, with the standard library only and without LibreOffice, and raises ``InputError``
(which fails that file alone) when:

- its zip package (OOXML: .docx .pptx .xlsx; OpenDocument: .odt .odp .ods) unpacks to more than
  ``MAX_UNPACKED`` bytes in all (the sizes its directory declares), or one part larger than
  ``RATIO_FROM`` unpacks to more than ``MAX_RATIO`` times its packed size (a real document's XML
  packs some 5 to 30 times; deflate's best is about 1,000);
- it would print more than ``MAX_PAGES`` pages by the count of what surely starts one
  (``estimate_pages``): in Word, page breaks (``w:br w:type="page"``), paragraphs breaking before
  them (``w:pageBreakBefore``, set on the paragraph, on its style or its style's parents, on the
  default style or in the defaults) and sections (``w:sectPr``, continuous ones too: no real
  document has thousands); in PowerPoint, slides (``p:sldId``); in Excel, sheets and manual page
  breaks; in OpenDocument, slides and drawing pages, sheets, and paragraphs, headings and tables
  whose style breaks the page or changes its master page; in RTF, ``\\page``, ``\\pagebb`` and
  ``\\sect``. Every part that holds XML is read, whatever its name, as a stream (expat: namespaces
  resolved, so any prefix counts; an entity declaration refused), and the reading stops once the
  pages counted directly pass the limit. A part that is not well-formed XML is refused too (what
  follows the error would go uncounted).

What the counts cannot see, long content without breaks (a 20,000-row table, 100,000 paragraphs),
is bounded by the converted PDF's own page count (``check_pages``, checked by
``render/office.py`` before the PDF is cached) and by the conversion's time limit; a server
converts beside its other tenants' jobs (``serve/conversions.py``), so such a file holds no one
else. Files that are not zip packages nor RTF (.doc, .ppt, .xls, flat XML) are bounded the same way.
A part read as XML is read no further than its declared size (zipfile stops there, and refuses a
part whose checksum then differs); the declared sizes of the others (images) are taken as given.
"""

from __future__ import annotations

import functools
import re
import zipfile
import zlib
from collections import Counter
from pathlib import Path
from xml.parsers import expat

from pagesight.errors import InputError

MAX_UNPACKED = 512 << 20  # bytes of a package's parts unpacked, all together
MAX_RATIO = 200  # unpacked bytes per packed byte of one part, for parts of RATIO_FROM bytes or more
RATIO_FROM = 4 << 20  # a part smaller than this unpacked is no bomb, however tightly it packs
MAX_PAGES = 2000  # pages of an office file, counted before conversion and in the PDF after
BLOCK = 1 << 20  # bytes read at a time
_RTF_BREAKS = re.compile(rb"\\(?:page|pagebb|sect)(?![A-Za-z])")
_OFF = {"0", "false", "off"}
# The elements _Tally reads (as "family local", _tag): styles defined, paragraphs and their styles,
# page breaks of paragraphs and styles, what starts a page by itself, and where the parser is.
_DEFINES = frozenset({"w style", "style style", "style default-style"})
_USES = frozenset({"w p", "w basedOn", "w pStyle", "text p", "text h", "table table"})
_BREAKS = frozenset({"w pageBreakBefore", "style paragraph-properties", "style table-properties"})
_PAGES = frozenset({"w sectPr", "p sldId", "s sheet", "s brk", "w br", "drawing page"})
_STATE = frozenset({"w docDefaults", "w latentStyles", "w styles", "office spreadsheet"})
_WATCHED = _DEFINES | _USES | _BREAKS | _PAGES | _STATE
_FO = "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"


def check_office_file(path: Path) -> None:
    """Raise ``InputError`` when the office file ``path`` unpacks too large, packs a part too
    tightly or would print more than ``MAX_PAGES`` pages (the module docstring)."""
    pages = estimate_pages(path)
    if pages > MAX_PAGES:
        raise InputError(
            f"it would print at least {pages:,} pages; at most {MAX_PAGES:,}: refused before conversion"
        )


def check_pages(pages: int) -> None:
    """Raise ``InputError`` when a converted PDF has more than ``MAX_PAGES`` pages."""
    if pages > MAX_PAGES:
        raise InputError(f"it converts to {pages:,} pages; at most {MAX_PAGES:,}")


def estimate_pages(path: Path) -> int:
    """How many pages the office file ``path`` prints at least, by what starts a page (1 when
    nothing does; a file of another kind than a zip package or RTF is not read: 1). Raises
    ``InputError`` for a package past the size limits, a part that is not well-formed XML, or one
    declaring entities; the count stops soon after ``MAX_PAGES``."""
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head.startswith(b"{\\rtf"):
        return max(1, _rtf_breaks(path) + 1)
    if not zipfile.is_zipfile(path):
        return 1
    try:
        with zipfile.ZipFile(path) as package:
            parts = _checked_parts(package)
            tally = _Tally()
            for info in parts:
                _read_part(package, info, tally)
                if tally.pages > MAX_PAGES:
                    break
            return max(1, tally.total())
    except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError) as exc:
        raise InputError(f"not a readable office package ({exc})") from None


def _checked_parts(package: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The package's parts, once their declared sizes pass ``MAX_UNPACKED`` and ``MAX_RATIO``."""
    parts = package.infolist()
    total = sum(info.file_size for info in parts)
    if total > MAX_UNPACKED:
        raise InputError(
            f"it unpacks to {total / (1 << 20):,.0f} MB; at most {MAX_UNPACKED >> 20:,} MB: "
            "refused before conversion"
        )
    for info in parts:
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size >= RATIO_FROM and ratio > MAX_RATIO:
            raise InputError(
                f"its part {info.filename[:100]} unpacks to {ratio:,.0f} times its packed size; at "
                f"most {MAX_RATIO} times: refused before conversion"
            )
    return parts


def _rtf_breaks(path: Path) -> int:
    """The page and section breaks of an RTF file, read a block at a time (a control word cut at
    a block's end is read with the next)."""
    found, tail = 0, b""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            data = tail + block
            keep = max(0, len(data) - 8)  # a break and the letter after it are 8 bytes at most
            found += sum(1 for match in _RTF_BREAKS.finditer(data) if match.start() < keep)
            tail = data[keep:]
            if found > MAX_PAGES:
                return found
    return found + len(_RTF_BREAKS.findall(tail))


def _read_part(package: zipfile.ZipFile, info: zipfile.ZipInfo, tally: _Tally) -> None:
    """Count what starts a page in one part, if it holds XML (its first bytes say), a block at a
    time until the count passes ``MAX_PAGES``."""
    if info.is_dir():
        return
    with package.open(info) as stream:
        block = stream.read(BLOCK)
        if not block.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):  # an image, the mimetype
            return
        parser = tally.parser()
        try:
            while block:
                parser.Parse(block, False)
                if tally.pages > MAX_PAGES:
                    return
                block = stream.read(BLOCK)
            parser.Parse(b"", True)
        except expat.ExpatError as exc:
            raise InputError(
                f"its part {info.filename[:100]} is not well-formed XML ({expat.ErrorString(exc.code)}, "
                f"line {exc.lineno})"
            ) from None


@functools.lru_cache(maxsize=1024)
def _tag(name: str) -> str:
    """An element's name as expat gives it (``URI local``) as ``family local``."""
    uri, _, local = name.rpartition(" ")
    return f"{_family(uri)} {local}"


def _family(uri: str) -> str:
    """The vocabulary a namespace stands for: w, p, s (OOXML's word, slides, sheets, transitional
    or strict) or OpenDocument's own name of it (text, table, drawing, style, office, ...)."""
    for marker, family in (("wordprocessingml", "w"), ("presentationml", "p"), ("spreadsheetml", "s")):
        if marker in uri:
            return family
    if uri.startswith("urn:oasis:names:tc:opendocument:xmlns:"):
        return uri.split(":")[6]
    return ""


def _attribute(attributes: dict[str, str], name: str) -> str:
    """The value of the attribute whose local name is ``name`` (any namespace), or ''."""
    for key, value in attributes.items():
        if key == name or key.endswith(f" {name}"):
            return value
    return ""


class _Tally:
    """What starts a page, counted over every XML part of one package: ``pages`` directly, and
    the paragraphs (or tables) of each style, which count once the styles that break the page are
    known (a style may be defined in another part, or after its use). A style without a parent
    inherits the document's defaults (``DEFAULTS``: Word's ``w:docDefaults``, OpenDocument's
    paragraph ``style:default-style``); a paragraph without a style is the default style's
    (``UNSTYLED``: Word's paragraph style marked ``w:default``, else the defaults).

    Only start tags are read (an end handler would double the calls): a style's definition ends
    where the next one, or a paragraph or table (never inside a style), starts; the defaults' where
    Word's latent or first style does; sheets are ``table:table`` once ``office:spreadsheet`` has
    started. A section counts a page even when continuous (it would take the end tags to tell)."""

    DEFAULTS = ""
    UNSTYLED = "\0"

    def __init__(self):
        self.pages = 0
        self.uses: Counter[str] = Counter()  # style name -> paragraphs (or tables) in it
        self.breaking: set[str] = set()  # styles that break the page
        self.parents: dict[str, str] = {}  # style name -> the style it is based on
        self._style: str | None = None  # the style being defined
        self._defaults = False  # within Word's w:docDefaults
        self._sheets = False  # within an OpenDocument spreadsheet

    def parser(self):
        """A parser of one more part (each part starts outside any style)."""
        self._style, self._defaults = None, False
        parser = expat.ParserCreate(namespace_separator=" ")
        parser.StartElementHandler = self._start
        parser.EntityDeclHandler = _no_entities
        return parser

    def total(self) -> int:
        """The pages counted, with the paragraphs of every style that breaks the page."""
        return self.pages + sum(
            count for style, count in self.uses.items() if count > 0 and self._breaks(style)
        )

    def _breaks(self, style: str) -> bool:
        for _ in range(64):  # a chain of styles (or a loop) ends somewhere
            if style in self.breaking:
                return True
            if style == self.DEFAULTS:
                return False
            style = self.parents.get(style, self.DEFAULTS)
        return False

    def _start(self, name: str, attributes: dict[str, str]) -> None:
        tag = _tag(name)
        if tag not in _WATCHED:  # most elements: runs, text, properties of no interest
            return
        if tag in _DEFINES:
            self._define(tag, attributes)
        elif tag in _USES:
            self._use(tag, attributes)
        elif tag in _BREAKS:
            self._page_break(tag, attributes)
        elif tag in _STATE:
            self._defaults = tag == "w docDefaults"
            self._sheets = self._sheets or tag == "office spreadsheet"
        elif tag != "w br" or _attribute(attributes, "type") == "page":
            self.pages += 1  # a Word page break or section, a slide, a sheet or its break, a drawing's page

    def _define(self, tag: str, attributes: dict[str, str]) -> None:
        """A style's definition: Word's ``w:style``, OpenDocument's ``style:style`` and its
        paragraphs' ``style:default-style`` (the defaults)."""
        self._defaults = False
        if tag == "style default-style":
            self._style = self.DEFAULTS if _attribute(attributes, "family") == "paragraph" else "\0other"
            return
        self._style = _attribute(attributes, "styleId") or _attribute(attributes, "name")
        if parent := _attribute(attributes, "parent-style-name"):
            self.parents[self._style] = parent
        if _attribute(attributes, "master-page-name"):  # a new master page starts a new page
            self.breaking.add(self._style)
        word_default = _attribute(attributes, "default").lower() in ("1", "true", "on")
        if tag == "w style" and word_default and _attribute(attributes, "type") == "paragraph":
            self.parents[self.UNSTYLED] = self._style

    def _use(self, tag: str, attributes: dict[str, str]) -> None:
        """A paragraph (Word's ``w:p``, then its ``w:pStyle``), a style's ``w:basedOn``;
        OpenDocument's paragraphs, headings and tables (a sheet's a page) by their style."""
        if tag == "w basedOn":
            if self._style is not None:
                self.parents[self._style] = _attribute(attributes, "val")
            return
        if tag == "w pStyle":
            if self._style is None:  # a paragraph's (or a numbering level's, counted no page)
                self.uses[self.UNSTYLED] -= 1
                self.uses[_attribute(attributes, "val")] += 1
            return
        self._style = None  # no paragraph or table is inside a style's definition
        if tag == "table table" and self._sheets:
            self.pages += 1
        if style := _attribute(attributes, "style-name"):
            self.uses[style] += 1
        elif tag != "table table":
            self.uses[self.UNSTYLED] += 1

    def _page_break(self, tag: str, attributes: dict[str, str]) -> None:
        """Word's ``w:pageBreakBefore`` (on a paragraph, in a style or in the defaults),
        OpenDocument's ``fo:break-before``/``fo:break-after`` of a style's paragraph or table
        properties."""
        if tag == "w pageBreakBefore":
            if _attribute(attributes, "val").lower() in _OFF:
                return
            if self._style is not None:
                self.breaking.add(self._style)
            elif self._defaults:
                self.breaking.add(self.DEFAULTS)
            else:
                self.pages += 1
        elif self._style is not None and "page" in (
            attributes.get(f"{_FO} break-before"),
            attributes.get(f"{_FO} break-after"),
        ):
            self.breaking.add(self._style)


def _no_entities(name, *rest) -> None:
    raise InputError(f"an XML part declares the entity {name!r}, which no office document needs")
