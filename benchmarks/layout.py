"""Layout detection's cost per page and what it finds, on IRPAPERS pages (issue 18).

    python -m benchmarks.layout [--data ../shared/data/irpapers/pdfs] [--pages 50] [--threads 1]
    python -m benchmarks.layout --tiny       # two pages of typeset tables made here

A fixed set of pages (every n-th page of every n-th paper, in name order) is rendered as ingestion
renders it for the detector (``text.layout.LAYOUT_DPI``, text-layer pages) and goes through
``detect_regions`` and ``region_units`` with the page's text layer. Render and detection are timed
apart, in wall and CPU seconds, after one page that loads the model: pages/s of one process with ``--threads`` onnxruntime threads, the seconds per page, the regions found by
kind and the units made (tables and figures with text or a caption).

Retrieval with layout regions is measured by indexing the papers with ``pagesight ingest --layout``
and scoring with ``pagesight eval`` (BENCHMARKS.md, "Layout regions").
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks import harness
from pagesight.render import open_source
from pagesight.text import ocr
from pagesight.text.layout import LAYOUT_DPI, detect_regions, region_units


def pick_pages(folder: Path, n_pages: int) -> list[tuple[Path, int]]:
    """``n_pages`` (file, page) pairs spread over the papers and over their pages."""
    papers = sorted(folder.glob("*.pdf"), key=lambda p: (len(p.stem), p.stem))
    per_paper = 3
    step = max(1, len(papers) * per_paper // max(1, n_pages))
    chosen: list[tuple[Path, int]] = []
    for paper in papers[::step]:
        source = open_source(paper)
        try:
            n = source.n_pages
        finally:
            source.close()
        for number in sorted({1, max(1, n // 2), n})[:per_paper]:
            chosen.append((paper, number))
    return chosen[:n_pages]


def measure(pages: list[tuple[Path, int]], dpi: float) -> dict:
    warm_source = open_source(pages[0][0])
    detect_regions(warm_source.render(pages[0][1], LAYOUT_DPI))  # loads the model
    warm_source.close()
    render_s, detect_s, cpu_s = [], [], []
    kinds: Counter = Counter()
    units: Counter = Counter()
    captioned = 0
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    for path, number in pages:
        source = open_source(path)
        try:
            width, height = source.page_size(number, dpi)
            c0, t0 = time.process_time(), time.perf_counter()
            image = source.render(number, min(dpi, LAYOUT_DPI))
            t1 = time.perf_counter()
            regions = detect_regions(image, scale=width / image.width, page_size=(width, height))
            t2 = time.perf_counter()
            cpu_s.append(time.process_time() - c0)
            spans = source.text_layer(number, dpi)
        finally:
            source.close()
        render_s.append(t1 - t0)
        detect_s.append(t2 - t1)
        kinds.update(r.kind for r in regions)
        made = region_units(regions, spans, 1, height)
        units.update(u.region.kind for u in made)
        captioned += sum(1 for u in made if (u.box[0], u.box[1], u.box[2], u.box[3]) != u.region.box)
    wall = time.perf_counter() - wall_start
    cpu = time.process_time() - cpu_start
    return {
        "pages": len(pages),
        "papers": len({p for p, _ in pages}),
        "pages_per_s": round(len(pages) / wall, 2),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "render_s_median": round(statistics.median(render_s), 4),
        "detect": harness.latency(detect_s),
        "cpu_s_per_page_median": round(statistics.median(cpu_s), 4),
        "regions": dict(kinds.most_common()),
        "units": dict(units),
        "units_with_caption": captioned,
    }


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--data", type=Path, default=harness.SHARED / "irpapers" / "pdfs")
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime threads of the detector")
    parser.add_argument("--dpi", type=float, default=100.0, help="the index DPI boxes are scaled to")
    args = harness.start(parser, argv)
    ocr.set_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            folder, count = harness.toy_dataset(Path(tmp), tables=2).documents, 2
        elif args.data.is_dir():
            folder, count = args.data, args.pages
        else:
            parser.error(f"{args.data}: no such folder")
        result = measure(pick_pages(folder, count), args.dpi)
    harness.finish(args, __spec__.name, {"threads": args.threads, **result})


if __name__ == "__main__":
    main()
