"""`write_html` and `cited_figures`: a long page is shown as the band around what is cited, with
the boxes on the words; a page-shaped page is shown whole."""

import base64
import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from reportlab.pdfgen import canvas

from pagesight import Index
from pagesight.answer.base import Answer, Citation
from pagesight.answer.show import BOX_COLOUR, MARGIN, Figure, bands, cited_figures, cited_pages, write_html
from pagesight.records import Hit
from pagesight.settings import Settings
from tests.conftest import make_pdf

# A 612 x 7,200 pt page: 850 x 10,000 px at the index's 100 dpi, ten tiles. Lines by baseline (pt).
TALL_LINES = {
    7100: "Northern pier logbook summary",
    3600: "Lighthouse keeper Corvane logged 417 storms in 1911.",
    3560: "Quarry barge Tamsin unloaded granite blocks.",
    300: "Ostrava ferry carried 82 passengers on the final crossing.",
}


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Index:
    """A tall page (tall.pdf) and a Letter page (letter.pdf) with their text layers, lexical only."""
    corpus = tmp_path_factory.mktemp("show-corpus")
    pdf = canvas.Canvas(str(corpus / "tall.pdf"), pagesize=(612, 7200), invariant=1)
    pdf.setFont("Helvetica", 12)
    for baseline, line in TALL_LINES.items():
        pdf.drawString(72, baseline, line)
    pdf.showPage()
    pdf.save()
    make_pdf(
        corpus / "letter.pdf", [["Brightwater reservoir holds 9 million litres.", "Pumps run at night."]]
    )
    index = Index.open(tmp_path_factory.mktemp("show") / "index", settings=Settings(dense_model=None))
    report = index.add([corpus])
    assert report.ok, report.failed
    return index


def hit(index: Index, query: str) -> Hit:
    (found,) = index.search(query, k=1, mode="lexical")
    assert found.boxes, f"no boxes for {query!r}"
    return found


def answer_citing(*citations: Citation) -> Answer:
    return Answer("q", "a", list(citations), [], "test", {}, {})


def cite(found: Hit, boxes=None) -> Citation:
    return Citation(found.doc_id, found.page, found.tile, list(found.boxes if boxes is None else boxes))


def red_bbox(image: Image.Image) -> tuple[int, int, int, int] | None:
    """The bounding box (x0, y0, x1, y1, exclusive ends) of the pixels drawn in ``BOX_COLOUR``."""
    pixels = np.asarray(image.convert("RGB"))
    mask = (pixels == BOX_COLOUR).all(axis=2)
    if not mask.any():
        return None
    rows, cols = np.where(mask.any(axis=1))[0], np.where(mask.any(axis=0))[0]
    return int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1


def assert_drawn_on_the_words(index: Index, figure: Figure, boxes) -> None:
    """The band is rows top..bottom of the page, pixel for pixel away from the boxes, and the boxes
    are drawn in band coordinates (page rows minus ``top``) around dark pixels: the words."""
    page = np.asarray(index.page_image(figure.doc_id, figure.page).convert("RGB"))[figure.top : figure.bottom]
    band = np.asarray(figure.image)
    assert band.shape == page.shape
    shifted = [
        (round(x0), round(y0) - figure.top, round(x1), round(y1) - figure.top) for x0, y0, x1, y1 in boxes
    ]
    union = (
        min(b[0] for b in shifted),
        min(b[1] for b in shifted),
        max(b[2] for b in shifted) + 1,
        max(b[3] for b in shifted) + 1,
    )
    assert red_bbox(figure.image) == pytest.approx(union, abs=2)
    away = np.ones(band.shape[:2], dtype=bool)
    for x0, y0, x1, y1 in shifted:
        away[max(0, y0 - 3) : y1 + 4, max(0, x0 - 3) : x1 + 4] = False
        words = band[y0 + 3 : y1 - 2, x0 + 3 : x1 - 2].sum(axis=2)
        assert (words < 200).sum() > 50  # the text, under the tint
        assert (page[y0:y1, x0:x1].sum(axis=2) < 200).sum() > 50  # and there on the page
    assert (band[away] == page[away]).all()


def test_a_long_page_is_cut_to_the_band_around_the_cited_line(index: Index):
    found = hit(index, "Corvane storms")
    (box,) = found.boxes
    (figure,) = cited_figures(index, answer_citing(cite(found)))
    width, height = found.page_size
    assert (width, height) == (850, 10_000)
    assert not figure.whole and figure.boxes == [box]
    assert figure.top == pytest.approx(box[1] - MARGIN, abs=1)
    assert figure.bottom == pytest.approx(box[3] + MARGIN, abs=1)
    assert figure.image.size == (width, figure.bottom - figure.top)
    assert figure.image.height < height / 10
    assert figure.caption == f"tall_1, y {figure.top:,}-{figure.bottom:,} of 10,000"
    assert_drawn_on_the_words(index, figure, [box])


def test_html_embeds_the_cited_band_with_its_caption(index: Index, tmp_path: Path):
    found = hit(index, "Corvane storms")
    (box,) = found.boxes
    page = write_html(index, answer_citing(cite(found)), tmp_path / "answer.html").read_text()
    (data,) = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    assert image.width == 850 and image.height <= 2 * MARGIN + 20  # the page is 10,000 px tall
    (caption,) = re.findall(r"<figcaption>(.*?)</figcaption>", page)
    top, bottom = (
        int(v.replace(",", ""))
        for v in re.fullmatch(r"tall_1, y ([\d,]+)-([\d,]+) of 10,000", caption).groups()
    )
    assert top < box[1] < box[3] < bottom and bottom - top == image.height
    drawn = red_bbox(image)
    assert drawn is not None and drawn[1] == pytest.approx(box[1] - top, abs=2)
    assert len(page) < 100_000


def test_citations_far_apart_get_a_band_each_and_close_ones_share_one(index: Index):
    top_line, corvane, tamsin, ferry = (
        hit(index, query)
        for query in ("Northern pier logbook", "Corvane storms", "Tamsin granite", "Ostrava ferry")
    )
    assert corvane.tile == tamsin.tile
    answer = answer_citing(cite(ferry), cite(corvane), cite(top_line), cite(tamsin))
    figures = cited_figures(index, answer)
    assert [f.boxes for f in figures] == [top_line.boxes, corvane.boxes + tamsin.boxes, ferry.boxes]
    for figure in figures:
        assert not figure.whole and figure.image.height <= 2 * MARGIN + 120
        for box in figure.boxes:
            assert figure.top <= box[1] < box[3] <= figure.bottom
    assert figures[0].top == 0  # clamped to the page
    assert figures[-1].bottom == round(ferry.boxes[0][3]) + MARGIN < 10_000
    assert_drawn_on_the_words(index, figures[2], ferry.boxes)
    assert_drawn_on_the_words(index, figures[1], corvane.boxes + tamsin.boxes)


def test_a_citation_without_boxes_shows_its_tile(index: Index):
    found = hit(index, "Corvane storms")
    (figure,) = cited_figures(index, answer_citing(cite(found, boxes=[])))
    assert (figure.top, figure.bottom) == (round(found.tile_box[1]), round(found.tile_box[3]))
    assert figure.boxes == [] and red_bbox(figure.image) is None
    assert figure.image.size == (850, 1024)
    assert figure.image == index.tile_image(found.doc_id, found.page, found.tile)


def test_a_page_shaped_page_stays_whole(index: Index, tmp_path: Path):
    found = hit(index, "Brightwater reservoir")
    (box,) = found.boxes
    page = index.page_image(found.doc_id, found.page)
    (figure,) = cited_figures(index, answer_citing(cite(found)))
    assert figure.whole and (figure.top, figure.bottom) == (0, page.height)
    assert figure.image.size == page.size
    assert figure.caption == f"letter_1, whole page ({page.width:,} x {page.height:,} px)"
    assert_drawn_on_the_words(index, figure, [box])
    # the whole pages, as before, for library callers
    ((label, image),) = cited_pages(index, answer_citing(cite(found)))
    assert label == "letter_1" and image == figure.image
    html = write_html(index, answer_citing(cite(found)), tmp_path / "a.html").read_text()
    assert "letter_1, whole page" in html


def test_bands_rules():
    tall = (800, 8000)
    line = (40.0, 4000.0, 700.0, 4020.0)
    assert bands(tall, [line]) == [(4000 - MARGIN, 4020 + MARGIN)]
    assert bands(tall, [line], margin=100) == [(3900, 4120)]
    assert bands((800, 1150), [line]) == [(0, 1150)]  # page-shaped: whole
    assert bands(tall, []) == [(0, 8000)]  # nothing cited on it: whole
    # wants less than a margin apart join; far apart stay apart; clamped to the page
    near = (40.0, 4020.0 + 2 * MARGIN + 50, 700.0, 4020.0 + 2 * MARGIN + 70)
    assert bands(tall, [near, line]) == [(4000 - MARGIN, round(near[3]) + MARGIN)]
    assert bands(tall, [(0.0, 10.0, 5.0, 20.0), (0.0, 7990.0, 5.0, 8000.0)]) == [(0, 320), (7690, 8000)]
    # a tile cited whole shows the tile, without margin
    assert bands(tall, [], [(0.0, 2048.0, 800.0, 3072.0)]) == [(2048, 3072)]
    # bands covering most of the page: the whole page
    spread = [(0.0, y, 800.0, y + 20) for y in range(300, 8000, 700)]
    assert bands(tall, spread) == [(0, 8000)]


def test_the_samples_long_infographic_shows_the_cited_region(sample_index: Index, tmp_path: Path):
    answer = sample_index.ask("How many orders a day does Warehouse Delta ship?")
    (citation,) = answer.citations
    assert citation.page_id == "long-infographic_1"
    page = write_html(sample_index, answer, tmp_path / "answer.html").read_text()
    (data,) = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    assert image.width == 800 and image.height < 2600 / 3
    (figure,) = cited_figures(sample_index, answer)
    assert f"long-infographic_1, y {figure.top:,}-{figure.bottom:,} of 2,600" in page
    assert not figure.whole
    assert_drawn_on_the_words(sample_index, figure, citation.boxes)
    assert red_bbox(image) == red_bbox(figure.image)
