"""Web rendering benchmark: the Python documentation Debian ships, through ``pagesight ingest``.

Measures, in one run on this machine:

- the whole corpus (``/usr/share/doc/python3/html``, about 530 pages) ingested end to end into a
  new temporary index: pages/s and tiles/s (render, DOM text and links, tile PNGs kept, BM25);
- a fixed subset (every n-th page, sorted by path, with the shared ``_static`` and ``_images``)
  ingested by pagesight with each tab count asked for, with tile images kept and without (DOM
  only, tiles rendered on demand), and rendered by a naive baseline (one fresh Playwright page per
  URL, one after the other, full-page screenshot, the browser started once and not timed). The runs
  take turns, ``--repeat`` times, and the medians are reported with the ratios, so a machine whose
  speed drifts (a shared one) weighs on every side alike. Each run also reports the CPU seconds
  the whole machine spent (``/proc/stat``), which bound what more tabs can give on few cores;
- tiles rendered again on demand from the last DOM-only index (no images kept): the first tile,
  five more of the same page, the whole of the tallest page;
- questions whose answer sits in a table or list on one page, checked by page id on the full index.

The machine is shared: the load averages before and after are part of the output.

    python -m benchmarks.webdocs [--docs DIR] [--subset-every 5] [--tabs 1,2] [--repeat 3]
    python -m benchmarks.webdocs --tiny      # three long pages made here, one tab, one turn
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks import harness
from benchmarks.harness import load

DOCS = Path("/usr/share/doc/python3/html")

# (question, page id of the one page whose table or list holds the answer)
QUESTIONS = [
    ("strftime directive %j day of the year as a zero-padded decimal number", "library/datetime_1"),
    ("struct format character q long long standard size 8", "library/struct_1"),
    ("array type code d C type double minimum size in bytes 8", "library/array_1"),
    ("HTTP status code 418 IM_A_TEAPOT", "library/http_1"),
    ("logging level numeric value CRITICAL 50 ERROR 40 WARNING 30", "library/logging_1"),
    (
        "sqlite3 adapters Python type None int float str bytes SQLite type NULL INTEGER REAL TEXT BLOB",
        "library/sqlite3_1",
    ),
    ("calendar firstweekday MONDAY TUESDAY constants", "library/calendar_1"),
    ("unicodedata category Lu Ll east_asian_width", "library/unicodedata_1"),
]


TOY_PAGES = ("alpha", "beta", "gamma")


def toy_site(folder: Path) -> list[tuple[str, str]]:
    """Three long pages of tables written into ``folder`` (each row a unit's words, the last page
    the tallest), and a question a page: (question, page id)."""
    folder.mkdir(parents=True)
    asked = []
    for number, name in enumerate(TOY_PAGES):
        rows = "".join(
            f"<tr><td>{name} item {row}</td><td>{row * 7 + number}</td><td>unit {name}{row}</td></tr>"
            for row in range(200 + 60 * number)
        )
        body = f"<h1>The {name} table</h1><table>{rows}</table>"
        (folder / f"{name}.html").write_text(f"<!doctype html><html><body>{body}</body></html>")
        asked.append((f"{name} item 12 unit {name}12", f"{name}_1"))
    return asked


def subset(docs: Path, every: int, into: Path) -> list[Path]:
    """Every ``every``-th page (sorted) copied with the shared assets, so both renderers see the same site."""
    pages = sorted(docs.rglob("*.html"))[::every]
    for folder in ("_static", "_images"):
        if (docs / folder).is_dir():
            shutil.copytree(docs / folder, into / folder)
    copied = []
    for page in pages:
        target = into / page.relative_to(docs)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(page, target)
        copied.append(target)
    return copied


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy so far (all cores, all processes)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def ingest(paths: list[Path], index_dir: Path, concurrency: int, dense: bool, keep_images: bool = True):
    from pagesight import Index
    from pagesight.settings import Settings

    settings = Settings() if dense else Settings(dense_model=None)
    index = Index.open(index_dir, settings=settings)
    started, busy = time.perf_counter(), busy_seconds()
    report = index.add(paths, ocr="never", web={"concurrency": concurrency, "keep_images": keep_images})
    seconds = time.perf_counter() - started
    cpu = busy_seconds() - busy
    rows = index.catalog.db.execute(
        "SELECT COUNT(DISTINCT d.id), COUNT(t.id) FROM documents d JOIN tiles t ON t.doc_id = d.id "
        "WHERE d.type = 'html'"
    ).fetchone()
    result = {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "web_pages": rows[0],
        "tiles": rows[1],
        "pages_per_s": round(rows[0] / seconds, 2),
        "tiles_per_s": round(rows[1] / seconds, 2),
        "failed": report.failed,
        "notes": len(report.notes),
        "other_documents": index.catalog.counts()["documents"] - rows[0],
    }
    return index, result


def naive(pages: list[Path], width: int = 875, height: int = 1024) -> dict:
    """One fresh page per URL, sequential, full-page screenshot (the browser started once, untimed)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        started, busy = time.perf_counter(), busy_seconds()
        pixels = 0
        for path in pages:
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
            page.goto(path.as_uri())
            image = page.screenshot(full_page=True)
            pixels += len(image)
            page.close()
        seconds = time.perf_counter() - started
        cpu = busy_seconds() - busy
        browser.close()
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "pages": len(pages),
        "pages_per_s": round(len(pages) / seconds, 2),
    }


def on_demand(index_dir: Path) -> dict:
    """Tiles of an index that kept no images, rendered again when asked for: the first (browser
    start included), five more of the same page, and the whole of the tallest page."""
    from pagesight import Index

    index = Index.open(index_dir)
    tiles = {doc_id: index.catalog.n_tiles(doc_id, 1) for doc_id in index.documents()}
    tallest = max(tiles, key=tiles.get)
    page = next(doc_id for doc_id in sorted(tiles) if tiles[doc_id] >= 6 and doc_id != tallest)
    started = time.perf_counter()
    index.tile_image(page, 1, 0)
    first = time.perf_counter() - started
    started = time.perf_counter()
    for tile in range(1, 6):
        index.tile_image(page, 1, tile)
    five = time.perf_counter() - started
    started = time.perf_counter()
    index.page_image(tallest, 1)
    whole = time.perf_counter() - started
    index.close()
    return {
        "page": page,
        "first_tile_seconds": round(first, 2),
        "five_more_tiles_seconds": round(five, 2),
        "whole_page": tallest,
        "whole_page_tiles": tiles[tallest],
        "whole_page_seconds": round(whole, 2),
    }


def questions(index, asked: list[tuple[str, str]]) -> dict:
    found = []
    for question, page_id in asked:
        hits = index.search(question, k=5, mode="lexical")
        ranks = [h.page_id for h in hits]
        found.append(
            {
                "question": question,
                "page_id": page_id,
                "rank": ranks.index(page_id) + 1 if page_id in ranks else None,
                "top": ranks[:3],
            }
        )
    return {
        "n": len(found),
        "at_1": sum(f["rank"] == 1 for f in found),
        "at_5": sum(f["rank"] is not None for f in found),
        "questions": found,
    }


def measure(args, docs: Path, asked: list[tuple[str, str]], scratch_dir: Path) -> dict:
    out: dict = {}
    if not args.skip_full:
        index, full = ingest([docs], scratch_dir / "full", args.tabs[-1], args.dense)
        full["html_files"] = len(list(docs.rglob("*.html")))
        full["questions"] = questions(index, asked)
        full["index_bytes"] = sum(p.stat().st_size for p in (scratch_dir / "full").rglob("*") if p.is_file())
        index.close()
        out["full"] = full
        out["load_after_full"] = load()
    site = scratch_dir / "subset"
    pages = subset(docs, args.subset_every, site)
    runs: dict[str, list[dict]] = {}
    for turn in range(args.repeat):
        for tabs in args.tabs:
            for keep in (True, False):
                name = f"pagesight {tabs} tab{'s' if tabs > 1 else ''}" + ("" if keep else ", DOM only")
                index_dir = scratch_dir / f"subset-{turn}-{name}"
                index, result = ingest([site], index_dir, tabs, args.dense, keep)
                index.close()
                runs.setdefault(name, []).append(result)
                if not keep:
                    dom_only = index_dir
        runs.setdefault("naive", []).append(naive(pages))
    out["on_demand"] = on_demand(dom_only)
    naive_seconds = statistics.median(run["seconds"] for run in runs["naive"])
    out["subset"] = {"pages": len(pages), "every": args.subset_every, "repeat": args.repeat, "runs": {}}
    for name, results in runs.items():
        seconds = statistics.median(run["seconds"] for run in results)
        out["subset"]["runs"][name] = {
            "seconds": [run["seconds"] for run in results],
            "median_seconds": seconds,
            "median_cpu_seconds": statistics.median(run["cpu_seconds"] for run in results),
            "tiles": results[0].get("tiles"),
            "pages_per_s": round(len(pages) / seconds, 2),
            "speedup_over_naive": round(naive_seconds / seconds, 2),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--docs", type=Path, default=DOCS, help="Folder of the Python HTML docs.")
    parser.add_argument("--subset-every", type=int, default=5, help="Baseline subset: every n-th page.")
    parser.add_argument(
        "--tabs",
        type=lambda text: [int(v) for v in text.split(",")],
        default=[1, 2],
        help="Browser tab counts to compare on the subset, comma-separated; the full run uses the last.",
    )
    parser.add_argument("--repeat", type=int, default=3, help="Turns of the subset comparison.")
    parser.add_argument("--dense", action="store_true", help="Also embed text with MiniLM.")
    parser.add_argument("--skip-full", action="store_true", help="Only the subset comparison.")
    args = harness.start(parser, argv)
    with tempfile.TemporaryDirectory() as scratch:
        if args.tiny:
            docs = Path(scratch) / "site"
            asked = toy_site(docs)
            args.subset_every, args.tabs, args.repeat, args.dense = 1, [1], 1, False
        elif args.docs.is_dir():
            docs, asked = args.docs, QUESTIONS
        else:
            parser.error(f"{args.docs}: not found (apt-get install python3-doc)")
        out = measure(args, docs, asked, Path(scratch))
    harness.finish(args, __spec__.name, out)


if __name__ == "__main__":
    main()
