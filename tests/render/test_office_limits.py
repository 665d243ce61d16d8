"""Office files refused before LibreOffice opens them: a zip bomb by its packing or its unpacked
size, a document that would print thousands of pages however it starts them (page breaks,
sections, styles that break the page, the defaults, slides, sheets, RTF's control words, any XML
prefix, any part name), and XML that declares entities or is not well-formed; real documents pass
with their count. No LibreOffice is needed: the files are built here with zipfile."""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from pagesight.errors import InputError
from pagesight.render import office_limits
from pagesight.render.office_limits import MAX_PAGES, check_office_file, check_pages, estimate_pages

pytestmark = pytest.mark.timeout(60)

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
ODF = "urn:oasis:names:tc:opendocument:xmlns"
MANY = MAX_PAGES + 500
CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
    'content-types"><Default Extension="xml" ContentType="application/xml"/><Default Extension="rels" '
    'ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Override '
    'PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.'
    'wordprocessingml.document.main+xml"/></Types>'
)
RELATIONSHIPS = (
    '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
    '2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
    '2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>'
)


def package(path: Path, parts: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as made:
        for name, data in parts.items():
            made.writestr(name, data)
    return path


def docx(path: Path, body: str, styles: str = "", prefix: str = "w", styles_part="word/styles.xml") -> Path:
    """A Word package LibreOffice opens: ``body`` in its document part, ``styles`` in its styles
    part (which Word would name in the document's relationships; LibreOffice reads none then)."""
    declared = f'xmlns:{prefix}="{W}"'
    parts = {
        "[Content_Types].xml": CONTENT_TYPES,
        "_rels/.rels": RELATIONSHIPS,
        "word/document.xml": f"<{prefix}:document {declared}><{prefix}:body>{body}"
        f"<{prefix}:sectPr/></{prefix}:body></{prefix}:document>",
    }
    if styles:
        parts[styles_part] = f"<{prefix}:styles {declared}>{styles}</{prefix}:styles>"
    return package(path, parts)


def odf(path: Path, kind: str, body: str, styles: str = "") -> Path:
    """An OpenDocument package of ``kind`` (text, presentation, spreadsheet)."""
    namespaces = " ".join(
        f'xmlns:{name}="{ODF}:{uri}:1.0"'
        for name, uri in [
            ("office", "office"),
            ("text", "text"),
            ("table", "table"),
            ("draw", "drawing"),
            ("style", "style"),
            ("fo", "xsl-fo-compatible"),
        ]
    )
    content = (
        f"<office:document-content {namespaces}><office:automatic-styles>{styles}"
        f"</office:automatic-styles><office:body><office:{kind}>{body}</office:{kind}></office:body>"
        "</office:document-content>"
    )
    return package(path, {"mimetype": f"application/vnd.oasis.opendocument.{kind}", "content.xml": content})


def zip_bomb(path: Path, mebibytes: int = 1024) -> Path:
    """A .docx whose ``word/document.xml`` inflates to ``mebibytes`` of XML, some 1,000 times its
    packed size: one mebibyte deflated, its block repeated (a full flush makes each block stand
    alone), written as a zip by hand (zipfile would deflate every mebibyte)."""
    name = b"word/document.xml"
    opening = f'<w:document xmlns:w="{W}"><w:body>'.encode()
    block = b"<w:p/>" * ((1 << 20) // 6)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(opening) + deflate.flush(zlib.Z_FULL_FLUSH)
    body = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    data = head + body * mebibytes + deflate.flush()
    size, crc = len(opening) + len(block) * mebibytes, zlib.crc32(opening)
    for _ in range(mebibytes):
        crc = zlib.crc32(block, crc)
    sizes = struct.pack("<III", crc, len(data), size)
    local = struct.pack("<IHHHHH", 0x04034B50, 20, 0, 8, 0, 0) + sizes + struct.pack("<HH", len(name), 0)
    central = (
        struct.pack("<IHHHHHH", 0x02014B50, 20, 20, 0, 8, 0, 0)
        + sizes
        + struct.pack("<HHHHHII", len(name), 0, 0, 0, 0, 0, 0)
        + name
    )
    end = struct.pack(
        "<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(local) + len(name) + len(data), 0
    )
    path.write_bytes(local + name + data + central + end)
    return path


def refused(path: Path, says: str) -> str:
    with pytest.raises(InputError) as refusal:
        check_office_file(path)
    assert says in str(refusal.value), refusal.value
    return str(refusal.value)


def test_a_zip_bomb_is_refused_by_its_packing(tmp_path: Path):
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as made:
        made.writestr("[Content_Types].xml", CONTENT_TYPES)
        with made.open("word/document.xml", "w") as part:
            part.write(f'<w:document xmlns:w="{W}"><w:body>'.encode())
            for _ in range(64):
                part.write(b"<w:p/>" * ((1 << 20) // 6))
    assert bomb.stat().st_size < 200_000  # 64 MB of XML
    reason = refused(bomb, "times its packed size")
    assert "word/document.xml" in reason and "refused before conversion" in reason


def test_a_zip_bomb_of_a_gigabyte_is_refused_by_its_unpacked_size(tmp_path: Path):
    bomb = zip_bomb(tmp_path / "bomb.docx")
    assert bomb.stat().st_size < 2 << 20
    with zipfile.ZipFile(zip_bomb(tmp_path / "small.docx", 4)) as package:  # a zip as any reader reads it
        assert len(package.read("word/document.xml")) == package.infolist()[0].file_size > 4_000_000
    refused(bomb, f"unpacks to 1,024 MB; at most {office_limits.MAX_UNPACKED >> 20} MB")


def test_a_package_unpacking_past_the_limit_is_refused(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(office_limits, "MAX_UNPACKED", 1 << 20)
    big = package(
        tmp_path / "deck.pptx",
        {"ppt/media/image1.bin": os.urandom(600_000)} | {"ppt/media/image2.bin": os.urandom(600_000)},
    )
    refused(big, "at most 1 MB")


def test_a_real_document_passes_with_its_pages(tmp_path: Path):
    body = "<w:p><w:r><w:t>one</w:t></w:r></w:p>" + '<w:p><w:r><w:br w:type="page"/></w:r></w:p>' * 3
    letter = docx(
        tmp_path / "letter.docx", body, '<w:style w:styleId="Normal" w:default="1" w:type="paragraph"/>'
    )
    assert estimate_pages(letter) == 4  # three breaks, one section
    check_office_file(letter)
    assert estimate_pages(package(tmp_path / "empty.docx", {"[Content_Types].xml": CONTENT_TYPES})) == 1


PAGE_BREAK = '<w:p><w:r><w:br w:type="page"/></w:r></w:p>'
CHAPTER = (
    '<w:style w:styleId="Base" w:type="paragraph"><w:pPr><w:pageBreakBefore/></w:pPr></w:style>'
    '<w:style w:styleId="Chapter" w:type="paragraph"><w:basedOn w:val="Base"/></w:style>'
)
WORD_BOMBS = {
    "page breaks": (PAGE_BREAK * MANY, ""),
    "paragraphs breaking before": ("<w:p><w:pPr><w:pageBreakBefore/></w:pPr></w:p>" * MANY, ""),
    "sections": ("<w:p><w:pPr><w:sectPr/></w:pPr></w:p>" * MANY, ""),
    "an inherited style": ('<w:p><w:pPr><w:pStyle w:val="Chapter"/></w:pPr></w:p>' * MANY, CHAPTER),
    "the defaults": (
        "<w:p/>" * MANY,
        "<w:docDefaults><w:pPrDefault><w:pPr><w:pageBreakBefore/></w:pPr></w:pPrDefault></w:docDefaults>",
    ),
    "the default style": (
        "<w:p/>" * MANY,
        '<w:style w:styleId="Normal" w:default="1" w:type="paragraph"><w:pPr><w:pageBreakBefore '
        'w:val="true"/></w:pPr></w:style>',
    ),
}


@pytest.mark.parametrize("how", WORD_BOMBS)
def test_a_word_document_of_thousands_of_pages_is_refused_however_it_breaks_them(tmp_path: Path, how):
    body, styles = WORD_BOMBS[how]
    bomb = docx(tmp_path / "bomb.docx", body, styles)
    assert bomb.stat().st_size < 20_000
    refused(bomb, "would print at least")
    # as many pages under another prefix and another part name are counted alike
    hidden = docx(
        tmp_path / "hidden.docx", body.replace("w:", "x:"), styles.replace("w:", "x:"), "x", "x.bin"
    )
    assert estimate_pages(hidden) == estimate_pages(bomb) > MAX_PAGES


def test_breaks_turned_off_and_styles_unused_count_no_page(tmp_path: Path):
    body = '<w:p><w:pPr><w:pageBreakBefore w:val="0"/></w:pPr></w:p>' * MANY + "<w:p/>" * MANY
    assert estimate_pages(docx(tmp_path / "long.docx", body, CHAPTER)) == 1


def test_decks_sheets_and_opendocument_files_of_thousands_of_pages_are_refused(tmp_path: Path):
    slides = "".join(f'<p:sldId id="{256 + n}"/>' for n in range(MANY))
    presentation = '<p:presentation xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main">'
    deck = package(
        tmp_path / "deck.pptx",
        {"ppt/presentation.xml": f"{presentation}<p:sldIdLst>{slides}</p:sldIdLst></p:presentation>"},
    )
    sheets = "".join(f'<sheet name="s{n}" sheetId="{n + 1}"/>' for n in range(MANY))
    workbook = f'<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheets>{sheets}</sheets></workbook>'
    book = package(tmp_path / "book.xlsx", {"xl/workbook.xml": workbook})
    breaking = (
        '<style:style style:name="P1" style:family="paragraph"><style:paragraph-properties '
        'fo:break-before="page"/></style:style>'
    )
    for bomb in (
        deck,
        book,
        odf(tmp_path / "slides.odp", "presentation", "<draw:page/>" * MANY),
        odf(tmp_path / "sheets.ods", "spreadsheet", "<table:table/>" * MANY),
        odf(tmp_path / "memo.odt", "text", '<text:p text:style-name="P1"/>' * MANY, breaking),
    ):
        refused(bomb, "would print at least")
    assert estimate_pages(odf(tmp_path / "one.odt", "text", "<text:p/><table:table/>" * MANY, breaking)) == 1
    assert estimate_pages(odf(tmp_path / "three.ods", "spreadsheet", "<table:table/>" * 3)) == 3


def test_an_rtf_file_of_thousands_of_page_breaks_is_refused(tmp_path: Path, monkeypatch):
    bomb = tmp_path / "bomb.rtf"
    bomb.write_bytes(b"{\\rtf1 " + b"x\\page " * MANY + b"}")
    refused(bomb, "would print at least")
    monkeypatch.setattr(office_limits, "BLOCK", 7)  # control words cut at every block's end
    small = tmp_path / "small.rtf"
    small.write_bytes(b"{\\rtf1 " + b"a\\page b\\pagebb\\sect\\sectd\\pagex " * 10 + b"}")
    assert estimate_pages(small) == 31  # \page, \pagebb, \sect ten times; \sectd, \pagex are none


def test_xml_with_entities_or_broken_xml_is_refused(tmp_path: Path):
    laughs = '<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
    entities = package(
        tmp_path / "laughs.docx", {"word/document.xml": f'{laughs}<w:document xmlns:w="{W}"/>'}
    )
    refused(entities, "declares the entity 'a'")
    broken = package(tmp_path / "broken.docx", {"word/document.xml": f'<w:document xmlns:w="{W}"><w:body>'})
    refused(broken, "word/document.xml is not well-formed XML")


def test_files_that_are_not_packages_are_left_to_the_conversion(tmp_path: Path):
    old = tmp_path / "old.doc"
    old.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 4000)  # an OLE compound file
    assert estimate_pages(old) == 1
    check_pages(MAX_PAGES)
    with pytest.raises(InputError, match=f"converts to 2,001 pages; at most {MAX_PAGES:,}"):
        check_pages(MAX_PAGES + 1)
