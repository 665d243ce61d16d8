from PIL import Image, ImageDraw, ImageFont

from pagesight.read.ocr import ocr_spans
from tests.conftest import SAMPLES


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


def test_blank_pages_are_not_sent_to_ocr():
    from pagesight.ingest.extract import is_blank

    assert is_blank(Image.new("RGB", (1000, 1400), (250, 248, 240)))
    page = Image.new("RGB", (1000, 1400), "white")
    ImageDraw.Draw(page).text(
        (100, 100), "one short line", fill="black", font=ImageFont.load_default(size=20)
    )
    assert not is_blank(page)
    assert not is_blank(Image.open(SAMPLES / "field-notes-scan.png"))
