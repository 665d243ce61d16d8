"""Office files through LibreOffice: a slide deck, a Word document and a spreadsheet are ingested as
pages with a text layer, searched, and rendered again for answers; a broken file fails alone, and a
machine without LibreOffice gets one line saying what to install.

A file is untrusted: one that links an image by ``file://`` URL (another tenant's upload) or by
``http://`` URL (a server on the converting machine) gets neither into its PDF, and the server
hears nothing, in the sandbox and, without it, through LibreOffice's settings alone; a machine
without the sandbox gets one line saying what to install or set.

A converted PDF past the page limit is refused and not cached (the counts before conversion are
tested without LibreOffice, ``test_office_limits.py``); the cached PDF goes with the last document
of its content."""

from __future__ import annotations

import http.server
import io
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pypdfium2
import pytest
from PIL import Image

from pagesight import Index
from pagesight.errors import InputError
from pagesight.render import office
from pagesight.render.sources import file_sha256, open_source
from pagesight.settings import Settings

pptx = pytest.importorskip("pptx")
docx = pytest.importorskip("docx")
openpyxl = pytest.importorskip("openpyxl")
pytestmark = [
    pytest.mark.skipif(
        shutil.which("soffice") is None, reason="no LibreOffice (apt-get install libreoffice-core)"
    ),
    pytest.mark.timeout(240),
]
sandboxed = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="no bubblewrap (apt-get install bubblewrap)"
)

SLIDES = [
    ("Quarterly review", "Revenue grew 12 percent in the northern region"),
    ("Hiring plan", "Forty engineers join the Lisbon office in spring"),
    ("Risks", "Supplier Brightmere Supply may miss the March deadline"),
]


def deck(path: Path) -> Path:
    presentation = pptx.Presentation()
    for title, body in SLIDES:
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    presentation.save(path)
    return path


def letter(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("Warehouse relocation", level=1)
    document.add_paragraph("The Delta warehouse moves to Rotterdam on 4 May; orders ship from there.")
    document.add_page_break()
    document.add_paragraph("Appendix: the lens blank lot 22K stays in the old building.")
    document.save(path)
    return path


def sheet(path: Path) -> Path:
    book = openpyxl.Workbook()
    rows = [("Region", "Q1", "Q2"), ("West", 4215, 4460), ("East", 3905, 4020)]
    for row in rows:
        book.active.append(row)
    book.save(path)
    return path


@pytest.fixture(scope="module")
def office_index(tmp_path_factory) -> Index:
    folder = tmp_path_factory.mktemp("office")
    deck(folder / "board deck.pptx")
    letter(folder / "relocation.docx")
    sheet(folder / "revenue.xlsx")
    (folder / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    index = Index.open(tmp_path_factory.mktemp("office-index") / "index", settings=Settings(dense_model=None))
    report = index.add([folder])
    index.report = report
    return index


@sandboxed
def test_slides_pages_and_sheets_become_searchable_pages(office_index: Index):
    report = office_index.report
    assert sorted(report.added) == ["board deck", "relocation", "revenue"], report.failed
    assert [Path(path).name for path, _ in report.failed] == ["broken.docx"]
    documents = {d["id"]: d for d in office_index.document_list()}
    assert documents["board deck"]["pages"] == 3 and documents["board deck"]["type"] == "office"
    assert documents["relocation"]["pages"] == 2
    assert [h.page_id for h in office_index.search("Lisbon engineers", k=1)] == ["board deck_2"]
    assert [h.page_id for h in office_index.search("lens blank lot", k=1)] == ["relocation_2"]
    hit = office_index.search("West region", k=1)[0]
    assert hit.page_id == "revenue_1" and hit.boxes  # a text layer with boxes, not OCR
    assert "4215" in hit.snippet or "4,215" in hit.snippet
    assert (
        office_index.ask("Which supplier may miss the March deadline?").citations[0].page_id == "board deck_3"
    )


@sandboxed
def test_pages_render_again_from_the_cached_pdf(office_index: Index, tmp_path: Path):
    image = office_index.page_image("board deck", 1)
    assert image.width > image.height  # a slide is landscape
    assert image.convert("L").getextrema()[0] < 100  # something is drawn on it
    # The cache holds the conversion of the indexed content: the file may even be gone.
    row = office_index.catalog.document("relocation")
    moved = tmp_path / "moved.docx"
    shutil.move(row.source, moved)
    try:
        assert open_source(row.source, "office", row.sha256).n_pages == 2
    finally:
        shutil.move(moved, row.source)


def test_a_machine_without_libreoffice_gets_one_line(tmp_path: Path):
    # A fresh process (ingestion's workers start from a fork server made with the caller's PATH).
    environment = {**os.environ, "PATH": str(tmp_path), "PAGESIGHT_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "pagesight", "ingest", str(deck(tmp_path / "deck.pptx"))]
        + ["--index", str(tmp_path / "index"), "--no-dense"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=200,
    )
    assert done.returncode == 1
    failures = [line for line in done.stderr.splitlines() if "deck.pptx:" in line]
    assert len(failures) == 1 and "apt-get install libreoffice-core" in failures[0], done.stderr


RED = (255, 0, 0)  # the other tenant's image
BLUE = (0, 0, 255)  # what the server on this machine answers


def solid_png(colour: tuple[int, int, int]) -> bytes:
    """A 200x200 PNG of one colour, which no text or page decoration of a converted file has."""
    data = io.BytesIO()
    Image.new("RGB", (200, 200), colour).save(data, "PNG")
    return data.getvalue()


@pytest.fixture
def listener():
    """A web server on this machine (loopback) that answers any GET with a blue image; the paths
    it was asked for, and the URL of its image."""
    asked: list[str] = []

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            body = solid_png(BLUE)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/x.png", asked
    server.shutdown()
    server.server_close()


@pytest.fixture
def links(tmp_path: Path, listener) -> tuple[list[str], list[str]]:
    """What an attacking file links: another tenant's upload (a red image outside the conversion's
    work folder) by absolute ``file://`` URL, and the server's image; and the server's log."""
    upload = tmp_path / "uploads" / "other-tenant" / "scan.png"
    upload.parent.mkdir(parents=True)
    upload.write_bytes(solid_png(RED))
    url, asked = listener
    return [upload.as_uri(), url], asked


def odt_linking(path: Path, urls: list[str]) -> Path:
    """An OpenDocument text whose images are links (``xlink:href``), loaded when it is opened."""
    frames = "".join(
        f'<text:p><draw:frame draw:name="image{number}" text:anchor-type="as-char" svg:width="5cm" '
        f'svg:height="5cm"><draw:image xlink:href="{url}" xlink:type="simple" xlink:show="embed" '
        'xlink:actuate="onLoad"/></draw:frame></text:p>'
        for number, url in enumerate(urls)
    )
    content = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
        'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
        'xmlns:xlink="http://www.w3.org/1999/xlink" office:version="1.2"><office:body><office:text>'
        f"<text:p>Confidential memo</text:p>{frames}</office:text></office:body></office:document-content>"
    )
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<manifest:manifest '
        'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
        '<manifest:file-entry manifest:full-path="/" '
        'manifest:media-type="application/vnd.oasis.opendocument.text"/>'
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
        "</manifest:manifest>"
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as package:
        # The media type first and stored, as OpenDocument requires.
        package.writestr("mimetype", "application/vnd.oasis.opendocument.text", zipfile.ZIP_STORED)
        package.writestr("META-INF/manifest.xml", manifest)
        package.writestr("content.xml", content)
    return path


def docx_linking(path: Path, urls: list[str]) -> Path:
    """A Word document whose pictures are external relationships (``TargetMode="External"``, used by
    ``a:blip r:link``): python-docx's embedded pictures, turned into links."""
    from docx.shared import Cm

    document = docx.Document()
    document.add_paragraph("Confidential memo")
    for number, _ in enumerate(urls):
        placeholder = io.BytesIO()
        Image.new("RGB", (10 + number, 10), (0, 255, 0)).save(placeholder, "PNG")  # one part each
        document.add_picture(placeholder, width=Cm(5))
    made = io.BytesIO()
    document.save(made)
    with zipfile.ZipFile(made) as package:
        parts = {
            name: package.read(name) for name in package.namelist() if not name.startswith("word/media/")
        }
    body = parts["word/document.xml"].decode()
    relationships = parts["word/_rels/document.xml.rels"].decode()
    ids = re.findall(r'r:embed="(rId\d+)"', body)
    assert len(ids) == len(urls)
    for rid, url in zip(ids, urls):
        body = body.replace(f'r:embed="{rid}"', f'r:link="{rid}"')
        relationships = re.sub(
            f'<Relationship Id="{rid}"[^>]*/>',
            f'<Relationship Id="{rid}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
            f'relationships/image" Target="{url}" TargetMode="External"/>',
            relationships,
        )
    parts["word/document.xml"] = body.encode()
    parts["word/_rels/document.xml.rels"] = relationships.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as package:
        for name, data in parts.items():
            package.writestr(name, data)
    return path


def pixels(pdf: Path, colour: tuple[int, int, int]) -> int:
    """How many pixels of (about) ``colour`` the PDF's pages have, rendered at 72 DPI."""
    document = pypdfium2.PdfDocument(pdf)
    try:
        found = 0
        for page in document:
            image = np.asarray(page.render(scale=1).to_pil().convert("RGB"), dtype=int)
            found += int((np.abs(image - colour).max(axis=-1) < 40).sum())
        return found
    finally:
        document.close()


def text(pdf: Path) -> str:
    document = pypdfium2.PdfDocument(pdf)
    try:
        return " ".join(page.get_textpage().get_text_range() for page in document)
    finally:
        document.close()


@pytest.fixture
def fresh_sandbox_check(monkeypatch, tmp_path: Path):
    """Office conversion as a fresh process does it (the sandbox checked again, not as cached), into
    a cache of the test's own."""
    monkeypatch.setenv("PAGESIGHT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(office.SANDBOX_SETTING, raising=False)
    office._sandbox_check.cache_clear()
    yield
    office._sandbox_check.cache_clear()


def convert(path: Path) -> Path:
    return office.office_pdf(path, file_sha256(path))


ATTACKS = [(".odt", odt_linking), (".docx", docx_linking)]


@sandboxed
@pytest.mark.parametrize(("suffix", "make"), ATTACKS, ids=["odt", "docx"])
def test_linked_files_and_urls_are_not_loaded_in_the_sandbox(
    suffix, make, links, tmp_path, fresh_sandbox_check
):
    urls, asked = links
    assert office.sandbox_problem() is None
    pdf = convert(make(tmp_path / f"memo{suffix}", urls))
    assert "Confidential memo" in text(pdf)  # converted, only without what it links
    assert asked == []  # no request to the machine's own server
    assert pixels(pdf, RED) == 0  # and no pixel of the other tenant's image
    assert pixels(pdf, BLUE) == 0


@pytest.mark.parametrize(("suffix", "make"), ATTACKS, ids=["odt", "docx"])
def test_without_the_sandbox_the_settings_still_block_links(
    suffix, make, links, tmp_path, monkeypatch, fresh_sandbox_check
):
    urls, asked = links
    monkeypatch.setenv(office.SANDBOX_SETTING, "off")
    pdf = convert(make(tmp_path / f"memo{suffix}", urls))
    assert "Confidential memo" in text(pdf)
    assert asked == []
    assert pixels(pdf, RED) == 0 and pixels(pdf, BLUE) == 0


def test_a_machine_without_bubblewrap_gets_one_line(links, tmp_path, monkeypatch, fresh_sandbox_check):
    # LibreOffice is there, bwrap is not.
    programs = tmp_path / "bin"
    programs.mkdir()
    (programs / "soffice").symlink_to(shutil.which("soffice"))
    monkeypatch.setenv("PATH", str(programs))
    memo = odt_linking(tmp_path / "memo.odt", links[0])
    problem = office.sandbox_problem()
    assert problem and "\n" not in problem
    assert "apt-get install bubblewrap" in problem and "PAGESIGHT_OFFICE_SANDBOX=off" in problem
    with pytest.raises(InputError) as refused:
        convert(memo)
    assert str(refused.value) == problem
    assert not (tmp_path / "cache" / "office").exists()  # nothing converted

    monkeypatch.setenv(office.SANDBOX_SETTING, "off")  # converts without it, when told
    assert office.sandbox_problem() is None
    assert "Confidential memo" in text(convert(memo))


def test_a_bubblewrap_that_cannot_start_a_sandbox_gets_one_line(tmp_path, monkeypatch, fresh_sandbox_check):
    # As on a machine that does not let unprivileged users make user namespaces.
    programs = tmp_path / "bin"
    programs.mkdir()
    (programs / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    (programs / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
    problem = office.sandbox_problem()
    assert problem and "\n" not in problem
    assert "(bwrap: setting up uid map: Permission denied)" in problem
    assert "PAGESIGHT_OFFICE_SANDBOX=off" in problem


@sandboxed
@pytest.mark.timeout(240)
def test_a_tenants_office_upload_shows_it_no_other_tenants_file(tmp_path, listener, fresh_sandbox_check):
    """The attack through the server: blue uploads a scan; red uploads a document linking it by its
    path under the uploads folder, and the server's loopback; red's page holds neither."""
    pytest.importorskip("fastapi")
    import json
    import time

    from fastapi.testclient import TestClient

    from pagesight.serve.app import create_app
    from pagesight.serve.tenants import load_keys

    keys = tmp_path / "keys.json"
    red_key, blue_key = "red-key-0123456789abcdef", "blue-key-0123456789abcdef"
    keys.write_text(
        json.dumps({red_key: {"name": "red", "write": True}, blue_key: {"name": "blue", "write": True}})
    )
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    url, asked = listener
    with TestClient(create_app(index, keys=load_keys(keys), readers=1)) as client:

        def ingested(key: str, name: str, data: bytes) -> dict:
            sent = client.post("/api/documents", files={"files": (name, data)}, headers={"X-API-Key": key})
            job = sent.json()["job"]["id"]
            deadline = time.monotonic() + 120
            while (state := client.get(f"/api/jobs/{job}", headers={"X-API-Key": key}).json())[
                "state"
            ] not in (
                "done",
                "failed",
            ):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            return state

        assert ingested(blue_key, "scan.png", solid_png(RED))["added"] == ["blue--scan"]
        theirs = (index.root / "uploads" / "blue--scan.png").resolve()
        memo = odt_linking(tmp_path / "memo.odt", [theirs.as_uri(), url])
        assert ingested(red_key, "memo.odt", memo.read_bytes())["added"] == ["red--memo"]
        page = client.get("/api/page", params={"doc": "red--memo", "page": 1}, headers={"X-API-Key": red_key})
        assert page.status_code == 200
    index.close()
    image = np.asarray(Image.open(io.BytesIO(page.content)).convert("RGB"), dtype=int)
    for colour in (RED, BLUE):
        assert int((np.abs(image - colour).max(axis=-1) < 40).sum()) == 0
    assert asked == []


def test_a_pdf_of_more_pages_than_the_limit_is_refused_not_cached(tmp_path, monkeypatch, fresh_sandbox_check):
    """Long content without a break passes the count before conversion; the PDF's pages are counted
    after it (the limit lowered here to what a short document reaches)."""
    from pagesight.render import office_limits

    document = docx.Document()
    for number in range(150):
        document.add_paragraph(f"Line {number} of a memo that runs over several pages without a break.")
    memo = tmp_path / "memo.docx"
    document.save(memo)
    monkeypatch.setenv(office.SANDBOX_SETTING, "off")  # the count, not the sandbox, is tested here
    monkeypatch.setattr(office_limits, "MAX_PAGES", 2)
    assert office_limits.estimate_pages(memo) == 1
    with pytest.raises(InputError, match=r"it converts to \d pages; at most 2"):
        convert(memo)
    assert office.cached_pdf(file_sha256(memo)) is None


def test_deleting_the_last_document_of_a_content_removes_its_converted_pdf(tmp_path: Path):
    """The cache is the machine's (the session's, which the ingestion's workers were started with);
    the PDF goes with the last document of its content in the index."""
    folder = tmp_path / "files"
    folder.mkdir()
    first = letter(folder / "first.docx")
    shutil.copyfile(first, folder / "second.docx")
    sha256 = file_sha256(first)
    with Index.open(tmp_path / "index", settings=Settings(dense_model=None)) as index:
        assert sorted(index.add([folder], jobs=1).added) == ["first", "second"]
        assert office.cached_pdf(sha256) is not None
        assert index.delete("first")
        assert office.cached_pdf(sha256) is not None  # "second" is still rendered from it
        assert index.page_image("second", 2).width > 0
        assert index.delete("second")
        assert office.cached_pdf(sha256) is None
