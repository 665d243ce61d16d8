from pathlib import Path

import numpy as np
import pikepdf
import pypdfium2 as pdfium
import pytest

from pagesight import Index
from pagesight.errors import InputError
from pagesight.render.sources import open_source
from pagesight.settings import Settings


def damaged_pdf(path: Path, text: str) -> Path:
    """A one-page PDF whose trailer has a stray token before its dictionary, as in qpdf's bad7.pdf:
    PDFium refuses the file, qpdf recovers it."""
    content = b"BT /F1 24 Tf 72 700 Td (%s) Tj ET" % text.encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer 3 << /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(out)
    return path


def test_pdf_pdfium_refuses_is_repaired_by_qpdf_and_renders_the_same_each_time(tmp_path: Path):
    path = damaged_pdf(tmp_path / "damaged.pdf", "Damaged but legible")
    with pytest.raises(pdfium.PdfiumError):
        pdfium.PdfDocument(str(path))
    source = open_source(path)
    assert source.repaired and source.n_pages == 1
    assert [span.text for span in source.text_layer(1, 100)] == ["Damaged but legible"]
    first = np.asarray(source.render(1, 100))
    assert first.min() < 128  # the text is drawn
    again = np.asarray(open_source(path).render(1, 100))
    assert np.array_equal(first, again)


def test_repaired_pdf_is_indexed_and_found(tmp_path: Path):
    index = Index.open(tmp_path / "ix", settings=Settings(dense_model=None))
    report = index.add(damaged_pdf(tmp_path / "damaged.pdf", "Quarterly potato harvest"))
    assert report.added == ["damaged"]
    hit = index.search("potato harvest")[0]
    assert hit.page_id == "damaged_1" and hit.snippet == "Quarterly potato harvest"


def test_pdf_without_pages_and_unrepairable_pdf_say_why(tmp_path: Path):
    empty = tmp_path / "empty.pdf"
    pikepdf.new().save(empty)
    with pytest.raises(InputError, match="^PDF has no pages$"):
        open_source(empty).render(1, 100)
    garbage = tmp_path / "garbage.pdf"
    garbage.write_bytes(b"%PDF-1.4\n" + b"no objects here\n" * 20)
    with pytest.raises(InputError, match=r"^not a readable PDF \(.*\); qpdf cannot repair it \(.+\)$"):
        open_source(garbage)


class CountedLoads:
    """A PDF document whose page loads are counted (the rest is the document's own)."""

    def __init__(self, pdf):
        self.pdf, self.loads = pdf, []

    def __getattr__(self, name):
        return getattr(self.pdf, name)

    def __len__(self):
        return len(self.pdf)

    def __getitem__(self, index):
        self.loads.append(index)
        return self.pdf[index]


@pytest.mark.timeout(60)
def test_a_pages_size_text_and_renders_load_it_once_and_read_as_a_fresh_load(tmp_path: Path):
    from tests.conftest import make_pdf

    path = make_pdf(tmp_path / "two.pdf", [["first page words"], ["second page words"]])
    source = open_source(path)
    source._pdf = counted = CountedLoads(source._pdf)
    read = []
    for number in (1, 2, 1):
        read.append(
            (
                source.page_size(number, 100),
                [(span.text, span.box) for span in source.text_layer(number, 100)],
                np.asarray(source.render(number, 50)),
                np.asarray(source.render(number, 100, box=(5, 5, 40, 60))),
            )
        )
    assert counted.loads == [0, 1, 0]  # one load a page read, whatever is read of it
    source.close()
    for number, (size, spans, image, part) in zip((1, 2, 1), read):
        fresh = open_source(path)  # every page loaded anew
        assert fresh.page_size(number, 100) == size
        assert [(span.text, span.box) for span in fresh.text_layer(number, 100)] == spans
        assert np.array_equal(np.asarray(fresh.render(number, 50)), image)
        assert np.array_equal(np.asarray(fresh.render(number, 100, box=(5, 5, 40, 60))), part)
        fresh.close()
    assert spans and spans[0][0] == "first page words"
