from pathlib import Path

from pagesight.records import Span
from pagesight.render.sources import open_source
from pagesight.text.textlayer import usable_text
from tests.conftest import make_pdf


def test_lines_come_with_pixel_boxes_where_they_are_drawn(tmp_path: Path):
    pdf = make_pdf(tmp_path / "a.pdf", [["First line of text", "Second line here"]])
    source = open_source(pdf)
    assert source.page_size(1, 100) == (850, 1100)
    spans = source.text_layer(1, 100)
    assert [s.text for s in spans] == ["First line of text", "Second line here"]
    x0, y0, x1, y1 = spans[0].box
    # drawString(72, 720): baseline 72 pt from the top edge of a 792 pt page -> 100 px at 100 dpi.
    assert abs(x0 - 100) <= 2
    assert 80 <= y0 < y1 <= 104
    assert x1 > x0 + 100
    assert spans[1].box[1] > spans[0].box[3] - 2  # the second line sits below the first
    assert all(s.source == "pdf" for s in spans)


def test_rotated_page_boxes_stay_inside_the_rendered_page(tmp_path: Path):
    import pypdfium2 as pdfium

    path = make_pdf(tmp_path / "r.pdf", [["Rotated page text that is long enough"]])
    pdf = pdfium.PdfDocument(str(path))
    pdf[0].set_rotation(90)
    pdf.save(str(tmp_path / "rot.pdf"))
    source = open_source(tmp_path / "rot.pdf")
    width, height = source.page_size(1, 100)
    assert (width, height) == (1100, 850)
    (span,) = source.text_layer(1, 100)
    x0, y0, x1, y1 = span.box
    assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height
    assert y1 - y0 > x1 - x0  # the line now runs down the page


def test_usable_text_rejects_empty_short_and_garbage_layers():
    def spans(text):
        return [Span(text=text, box=(0, 0, 1, 1), source="pdf")]

    assert usable_text(spans("A proper sentence with plenty of letters in it."))
    assert not usable_text([])
    assert not usable_text(spans("p. 3"))
    assert not usable_text(spans("\ue000\ue001\ue002" * 20))
    assert not usable_text(spans("!@#$%^&*()" * 10))


def test_line_boxes_hold_the_letters_that_hang_below_the_line(tmp_path: Path):
    import numpy as np
    from reportlab.pdfgen import canvas

    lines = ["Total paid", "Amount spent", "gypsy jogging", "Height of the page"]
    pdf = canvas.Canvas(str(tmp_path / "d.pdf"), pagesize=(612, 792), invariant=1)
    pdf.setFont("Helvetica", 20)
    for row, line in enumerate(lines):
        pdf.drawString(72, 700 - 60 * row, line)  # 60 pt apart: each line's ink is its own
    pdf.save()
    source = open_source(tmp_path / "d.pdf")
    spans = source.text_layer(1, 100)
    ink = np.asarray(source.render(1, 100).convert("L")) < 160
    assert [s.text for s in spans] == lines
    for span in spans:
        x0, y0, x1, y1 = (round(v) for v in span.box)
        band = ink[max(0, y0 - 30) : y1 + 30, x0:x1]  # the line's rows and 30 px around them
        rows = np.flatnonzero(band.any(axis=1)) + max(0, y0 - 30)
        assert y0 - 1 <= rows.min() and rows.max() <= y1 + 1, (span.text, span.box, rows.min(), rows.max())


def test_a_word_split_at_a_line_end_is_two_lines_and_one_word_in_the_tile_text(tmp_path: Path):
    # PDFium runs "de-" on into the next line without a break; each visual line must keep its own
    # box, and the text that is indexed must hold "description", not "de" and "scription".
    from pagesight.records import Tile

    pdf = make_pdf(tmp_path / "a.pdf", [["variants from a de-", "scription of the need", "last line"]])
    spans = open_source(pdf).text_layer(1, 100)
    assert [s.text for s in spans] == ["variants from a de\u00ad", "scription of the need", "last line"]
    first, second, _ = (s.box for s in spans)
    assert first[3] - first[1] < 25 and second[1] >= first[3] - 2  # one line each, one under the other
    assert Tile(0, (0, 0, 850, 1100), spans).text == "variants from a description of the need\nlast line"
