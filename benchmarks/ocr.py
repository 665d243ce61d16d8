"""OCR speed and quality on IRPAPERS pages whose PDF text layer is the ground truth (issue 13).

    python -m benchmarks.ocr [--data ../shared/data/irpapers/pdfs] [--pages 24] [--dpi 150]
                             [--engine rapidocr|tesseract] [--ingest] [--jobs N]
                             [--pages-each 2] [--language en|fr|...|detect]
    python -m benchmarks.ocr --tiny          # one page of a typeset table made here, --ingest too

A fixed set of pages (the first and a middle page of every n-th paper, in name order; with
``--pages-each K`` K evenly spaced pages of each) is rendered to images at ``--dpi``. Each image goes through a ``LanguageOcr`` as ingestion's (Tesseract's model of ``--language``,
or with ``detect`` the language each page's first OCR tells, as ingestion without ``--language``
does; one per document), timed in wall
and CPU seconds, and its lines are compared with the page's text layer at the same resolution: every
OCR line is compared with the text-layer characters whose boxes' centres fall inside it (spaces left
out, both sides NFKC-normalised), and characters no OCR line covers count as deletions; the character
error rate is the edit distance summed over the pages over the reference characters. Matching by
position keeps two-column reading order and PDFium's made-up line breaks out of the measure.

``--ingest`` also writes the images as PNG scans into a folder and times ``Index.add`` on it (worker
processes, lexical-only index): the end-to-end rate of image-only pages.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import unicodedata
from pathlib import Path

import pypdfium2 as pdfium
from rapidfuzz.distance import Levenshtein

from benchmarks import harness
from pagesight import Index, PagesightError
from pagesight.render import open_source
from pagesight.settings import Settings
from pagesight.text.language import check_language
from pagesight.text.ocr import ENGINES, LanguageOcr
from pagesight.text.textlayer import to_pixels


def pick_pages(folder: Path, n_pages: int, each: int = 2) -> list[tuple[Path, int]]:
    """``n_pages`` (file, page) pairs: page 1 and the middle page (``each`` evenly spaced pages) of
    evenly spaced papers."""
    papers = sorted(folder.glob("*.pdf"))
    step = max(1, len(papers) // max(1, n_pages // each))
    chosen: list[tuple[Path, int]] = []
    for paper in papers[::step]:
        try:
            source = open_source(paper)
        except PagesightError:  # damaged or encrypted (badpdfs): not a page to measure OCR on
            continue
        try:
            n = source.n_pages
            pages = {1, max(1, (n + 1) // 2)} if each == 2 else {1 + i * n // each for i in range(each)}
        finally:
            source.close()
        chosen.extend((paper, number) for number in sorted(pages))
    return chosen[:n_pages]


def reference_chars(paper: Path, number: int, size_px: tuple[int, int]) -> list[tuple[str, float, float]]:
    """The text layer's characters as (character, x, y of the box centre) in the page image's pixels."""
    pdf = pdfium.PdfDocument(paper)
    try:
        page = pdf[number - 1]
        textpage = page.get_textpage()
        chars = []
        for index in range(textpage.count_chars()):
            text = unicodedata.normalize("NFKC", textpage.get_text_range(index, 1))
            text = "".join(text.split())
            if not text or "\ufffe" in text:  # spaces, line breaks and soft hyphens PDFium made up
                continue
            box = to_pixels(page, size_px, *textpage.get_charbox(index))  # as ingestion maps boxes
            if box is not None:
                chars.append((text, (box[0] + box[2]) / 2, (box[1] + box[3]) / 2))
        return chars
    finally:
        pdf.close()


def line_errors(reference: list[tuple[str, float, float]], found) -> tuple[int, int]:
    """(edit operations, reference characters), spaces left out, of OCR lines against the text layer.

    Each OCR line is compared with the text-layer characters whose centres fall in its box, in the
    text layer's order; characters no OCR line covers count as deletions.
    """
    used = [False] * len(reference)
    errors = 0
    for span in found:
        x0, y0, x1, y1 = span.box
        inside = [
            i for i, (_, x, y) in enumerate(reference) if x0 <= x <= x1 and y0 <= y <= y1 and not used[i]
        ]
        for i in inside:
            used[i] = True
        expected = "".join(reference[i][0] for i in inside)
        errors += Levenshtein.distance(expected, "".join(unicodedata.normalize("NFKC", span.text).split()))
    errors += sum(len(ch) for (ch, _, _), hit in zip(reference, used) if not hit)
    return errors, sum(len(ch) for ch, _, _ in reference)


def measure(args, pages: list[tuple[Path, int]]) -> dict:
    language = None if args.language == "detect" else check_language(args.language)
    images, per_page, scanners = [], [], {}
    errors = chars = 0
    wall = cpu = 0.0
    for paper, number in pages:
        source = open_source(paper)
        try:
            image = source.render(number, args.dpi)
        finally:
            source.close()
        reference = reference_chars(paper, number, image.size)
        images.append(image)
        start, start_cpu = time.perf_counter(), time.process_time()
        if paper not in scanners:
            scanners[paper] = LanguageOcr(args.engine, language)
        found = scanners[paper].spans(image)
        page_wall, page_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        page_errors, page_chars = line_errors(reference, found)
        wall, cpu, errors, chars = wall + page_wall, cpu + page_cpu, errors + page_errors, chars + page_chars
        per_page.append(
            {
                "page": f"{paper.stem}_{number}",
                "size": list(image.size),
                "lines": len(found),
                "cer": round(page_errors / max(1, page_chars), 4),
                "wall_s": round(page_wall, 3),
                "cpu_s": round(page_cpu, 3),
            }
        )
    result = {
        "pages": len(pages),
        "dpi": args.dpi,
        "engine": args.engine,
        "language": args.language,
        "cer": round(errors / max(1, chars), 4),
        "median_page_cer": round(statistics.median(p["cer"] for p in per_page), 4),
        "reference_chars": chars,
        "ocr_pages_per_s_one_process": round(len(pages) / wall, 3),
        "wall_s_per_page": round(wall / len(pages), 3),
        "cpu_s_per_page": round(cpu / len(pages), 3),
        "per_page": per_page,
    }
    if args.ingest:
        result["ingest"] = ingest(pages, images, args.engine, args.jobs, language)
    return result


def ingest(pages: list[tuple[Path, int]], images: list, engine: str, jobs: int | None, language) -> dict:
    """``Index.add`` of the pages' images as PNG scans into a new lexical index, timed."""
    with tempfile.TemporaryDirectory() as tmp:
        scans = Path(tmp) / "scans"
        scans.mkdir()
        for (paper, number), image in zip(pages, images):
            image.save(scans / f"{paper.stem}_{number}.png")
        index = Index.open(Path(tmp) / "index", settings=Settings(dense_model=None, ocr_engine=engine))
        start = time.perf_counter()
        report = index.add(scans, jobs=jobs, language=language)
        elapsed = time.perf_counter() - start
        ocr_pages = index.catalog.counts()["ocr_pages"]
        index.close()
    return {
        "pages": report.pages,
        "failed": report.failed,
        "wall_s": round(elapsed, 2),
        "pages_per_s": round(report.pages / elapsed, 3),
        "ocr_pages": ocr_pages,
    }


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--data", type=Path, default=harness.SHARED / "irpapers" / "pdfs")
    parser.add_argument("--pages", type=int, default=24)
    parser.add_argument("--dpi", type=float, default=Settings().ocr_dpi)
    parser.add_argument("--engine", choices=ENGINES, default=Settings().ocr_engine)
    parser.add_argument("--ingest", action="store_true", help="also time Index.add on the pages as PNG scans")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes for --ingest")
    parser.add_argument("--pages-each", type=int, default=2, help="pages taken from each document")
    parser.add_argument("--language", default="en", help="the pages' language, or detect")
    args = harness.start(parser, argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            folder, count, each, args.ingest = harness.toy_dataset(Path(tmp), tables=1).documents, 1, 1, True
        elif args.data.is_dir():
            folder, count, each = args.data, args.pages, args.pages_each
        else:
            parser.error(f"{args.data}: no such folder")
        result = measure(args, pick_pages(folder, count, each))
    harness.finish(args, __spec__.name, result)


if __name__ == "__main__":
    main()
