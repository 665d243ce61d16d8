"""An index of N tiles through the real write path, and what a change and a search cost at that size
(issue 39's numbers).

    python -m benchmarks.scale --tiles 100000 [--out DIR] [--reuse DIR] [--batch 5000] [--build-only]
        [--store local|qdrant] [--json FILE]
    python -m benchmarks.scale --plot RESULTS.jsonl --image docs/scale.png   # each figure against N
    python -m benchmarks.scale --tiny        # 40 tiles of typeset tables, every figure measured

The tiles are the real pages of ../shared/data (IRPAPERS, financebench-dev, mmlongbench-dev), read
once (text layer, no OCR; kept in a pickle beside the index) and committed again and again under
other ids, each copy's lines shuffled within its tiles, so the term statistics stay those of real
documents. Each batch of documents is committed as ``pagesight ingest`` commits them (the
pipeline's ``Storing``: analysis, dense vectors, the catalog) and made searchable by the store's
refresh, as a commit of that size is. Every copy carries a field ``shard`` (0-99), so
``shard = 7`` passes 1 % of the documents.

Then, on the index as built (or as ``--reuse`` found it):

- add_seconds: a whole ``pagesight ingest`` process adding one 2-page PDF, with its peak memory;
- delete_seconds: a whole ``pagesight delete`` process removing it again;
- search p50/p99, warm and in-process, over IRPAPERS' 180 questions: lexical, and hybrid with the
  learned ranker; filtered_p50_ms: hybrid within ``shard = 7``;
- cold_search_seconds: a whole ``pagesight search`` process, start to answer;
- server_rss_mb: a ``pagesight serve`` process after 100 hybrid searches;
- disk_bytes_per_tile.

``--store qdrant`` builds and measures the Qdrant store instead, in qdrant-client's local mode
(``qdrant:DIR``: the only Qdrant engine that runs where this project is built).

Run it on a quiet machine: every figure is a timing. A long build can run beside other work with
``--build-only`` and be measured later, on a quiet machine, with ``--reuse``. ``--tiny`` copies the
pages of a toy dataset (``harness.toy_dataset``) and asks its questions.
"""

from __future__ import annotations

import copy
import json
import pickle
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks import harness
from pagesight import Index
from pagesight.encode.dense import dense_model
from pagesight.eval.dataset import Dataset
from pagesight.ingest.extract import extract
from pagesight.ingest.options import TextOptions
from pagesight.ingest.outcome import Extracted
from pagesight.ingest.pipeline import IngestReport, Storing
from pagesight.request import SearchRequest

SETS = tuple(harness.SHARED / name for name in ("irpapers", "financebench-dev", "mmlongbench-dev"))
QUESTIONS = harness.SHARED / "irpapers"  # the dataset whose questions are asked


def sources(cache: Path, settings, folders: tuple[Path, ...] = SETS) -> list:
    """Every PDF of ``folders`` read once (text layer only), kept in ``cache``."""
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    documents = []
    for folder in folders:
        for path in sorted(folder.rglob("*.pdf")):
            try:
                read = extract(str(path), path.stem, None, settings, TextOptions(ocr="never"))
            except Exception as exc:  # a damaged file of the sets: left out
                print(f"{path.name}: {exc}", file=sys.stderr)
                continue
            documents.append(read)
    cache.write_bytes(pickle.dumps(documents))
    return documents


def copy_of(document, number: int, rng: random.Random):
    """Document ``document`` under another id, its lines shuffled within each tile."""
    made = copy.deepcopy(document)
    made.id = f"{document.id}--c{number}"
    made.meta.setdefault("fields", {})["shard"] = number % 100
    for page in made.pages:
        for tile in page.tiles:
            texts = [span.text for span in tile.spans]
            rng.shuffle(texts)
            for span, text in zip(tile.spans, texts):
                span.text = text
    return made


def tiles_of(document) -> int:
    return sum(len(page.tiles) for page in document.pages)


def build(location: str, n_tiles: int, batch: int, cache: Path, folders: tuple[Path, ...] = SETS) -> dict:
    index = Index.open(location)
    documents = sources(cache, index.settings, folders)
    rng = random.Random(39)
    started = time.perf_counter()
    stored, number, commits = index.catalog.counts()["tiles"], 0, 0
    text = dense_model(index.settings.dense_model) if index.settings.dense_model else None
    while stored < n_tiles:
        with index.store.writing():
            storing = Storing(index.catalog, IngestReport(), None, None)
            storing.text = text
            in_batch = 0
            while in_batch < batch and stored < n_tiles:
                made = copy_of(documents[number % len(documents)], number, rng)
                number += 1
                storing(Extracted(made.source, made.id, made))
                in_batch += tiles_of(made)
                stored += tiles_of(made)
            index.store.refresh()
            commits += 1
        print(f"{stored} tiles, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    index.close()
    return {"build_seconds": round(time.perf_counter() - started, 1), "commits": commits}


def timed_process(command: list[str]) -> tuple[float, float | None, str]:
    """Wall seconds and peak RSS (MB, by GNU time where it is installed: a child's own rusage
    counts the pages it shared with this process when it started) of a whole process, and what it
    printed."""
    gnu_time = Path("/usr/bin/time")
    measured = [str(gnu_time), "-f", "peak-kb %M", *command] if gnu_time.exists() else command
    started = time.perf_counter()
    done = subprocess.run(measured, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {(done.stdout + done.stderr)[-2000:]}")
    peaks = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("peak-kb ")]
    return seconds, int(peaks[-1]) / 1024 if peaks else None, done.stdout


def measure(root: Path, location: str, queries: list[str]) -> dict:
    """The figures of the index at ``location`` (its files in ``root``), searched with ``queries``."""
    pagesight = [*harness.PYTHON_M, "pagesight"]
    result: dict = {}
    with Index.open(location, create=False) as index:
        counts = index.catalog.counts()
        result["tiles"], result["documents"] = counts["tiles"], counts["documents"]
        for name, request in (
            ("lexical", SearchRequest("", k=10, mode="lexical")),
            ("hybrid", SearchRequest("", k=10)),
            ("filtered", SearchRequest("", k=10, where="shard = 7")),
        ):
            index.search(request.replace(query="warm up"))
            latencies = []
            for query in queries:
                start = time.perf_counter()
                index.search(request.replace(query=query))
                latencies.append(time.perf_counter() - start)
            found = harness.latency(latencies)
            result[f"{name}_p50_ms"], result[f"{name}_p99_ms"] = found["p50_ms"], found["p99_ms"]
    with tempfile.TemporaryDirectory() as scratch:
        added = Path(scratch) / "scale-added-report.pdf"
        from reportlab.pdfgen import canvas

        pdf = canvas.Canvas(str(added))
        for page in ("the quarterly revenue of the western region grew", "the supplier replaces the old one"):
            pdf.drawString(72, 720, page)
            pdf.showPage()
        pdf.save()
        seconds, peak, _ = timed_process([*pagesight, "ingest", str(added), "--index", location])
        result["add_seconds"], result["add_peak_rss_mb"] = round(seconds, 2), peak and round(peak)
        seconds, _, _ = timed_process([*pagesight, "delete", added.stem, "--index", location])
        result["delete_seconds"] = round(seconds, 2)
    seconds, peak, _ = timed_process([*pagesight, "search", queries[0], "--index", location, "-k", "10"])
    result["cold_search_seconds"], result["cold_search_rss_mb"] = round(seconds, 2), peak and round(peak)
    # a store other than a folder keeps the server's uploads in a folder of their own
    uploads = [] if location == str(root) else ["--uploads", str(root.parent / f"{root.name}-uploads")]
    result["server_rss_mb"] = server_rss(location, queries[:100], uploads)
    size = sum(path.stat().st_size for path in root.rglob("*") if path.is_file())
    result["disk_bytes_per_tile"] = round(size / max(1, result["tiles"]))
    return result


def server_rss(location: str, queries: list[str], uploads: list[str]) -> float:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [*harness.PYTHON_M, "pagesight", "serve", "--index", location, "--port", str(port), *uploads],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{url}/api/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the server did not start")
            time.sleep(0.5)
        with httpx.Client(timeout=120) as client:
            for query in queries:
                answered = client.get(f"{url}/api/search", params={"q": query, "k": 10})
                if answered.status_code != 200:
                    raise RuntimeError(f"the server answered {answered.status_code}: {answered.text[:500]}")
        status = Path(f"/proc/{server.pid}/status").read_text()
        return round(
            int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1]) / 1024
        )
    finally:
        server.terminate()
        server.wait(timeout=60)


FIGURES = (
    ("add_seconds", "add a 2-page PDF (s)"),
    ("delete_seconds", "delete it (s)"),
    ("cold_search_seconds", "cold search process (s)"),
    ("lexical_p50_ms", "lexical p50 (ms)"),
    ("hybrid_p50_ms", "hybrid p50 (ms)"),
    ("filtered_p50_ms", "filtered p50 (ms)"),
    ("server_rss_mb", "server RSS (MB)"),
    ("add_peak_rss_mb", "add peak RSS (MB)"),
    ("disk_bytes_per_tile", "disk bytes a tile"),
)


def plot(results: list[dict], image: Path) -> None:
    """Each figure of ``results`` (this script's JSON lines) against the tiles, log-scaled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = sorted(results, key=lambda result: result["tiles"])
    figure, axes = plt.subplots(3, 3, figsize=(12, 9))
    for axis, (key, title) in zip(axes.flat, FIGURES):
        points = [(r["tiles"], r[key]) for r in results if r.get(key) is not None]
        axis.plot([x for x, _ in points], [y for _, y in points], marker="o")
        axis.set_xscale("log")
        axis.set_title(title)
        axis.set_xlabel("tiles")
        axis.set_ylim(bottom=0)
    figure.tight_layout()
    figure.savefig(image, dpi=80)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--plot", type=Path, help="a file of this script's JSON lines: plot them (--image)")
    parser.add_argument("--image", type=Path, default=Path("scale.png"), help="where --plot draws")
    parser.add_argument("--tiles", type=int, help="tiles to build the index to")
    parser.add_argument("--out", type=Path, help="the index folder (default: a folder per size in /tmp)")
    parser.add_argument("--reuse", type=Path, help="an index this script built: measured as it is")
    parser.add_argument("--batch", type=int, default=5000, help="tiles a commit adds while building")
    parser.add_argument(
        "--build-only", action="store_true", help="build, and measure nothing (--reuse later)"
    )
    parser.add_argument("--store", choices=("local", "qdrant"), default="local", help="the store measured")
    args = harness.start(parser, argv)
    if args.plot:
        plot([json.loads(line) for line in args.plot.read_text().splitlines() if line.strip()], args.image)
        return
    with tempfile.TemporaryDirectory() as scratch:
        if args.tiny:
            data = harness.toy_dataset(Path(scratch) / "data")
            folders, args.tiles, args.batch = (data.documents,), 40, 20
            args.out, args.reuse = Path(scratch) / "index", None
            cache = Path(scratch) / "sources.pickle"
        elif args.tiles is None:
            parser.error("--tiles is needed (or --plot, or --tiny)")
        else:
            data, folders = Dataset.load(QUESTIONS), SETS
        named = f"pagesight-scale-{args.tiles}" + ("" if args.store == "local" else f"-{args.store}")
        root = args.reuse or args.out or Path(tempfile.gettempdir()) / named
        if not args.tiny:
            cache = root.parent / "pagesight-scale-sources.pickle"
        location = str(root) if args.store == "local" else f"qdrant:{root}"
        result: dict = {"batch": args.batch, "store": args.store}
        if args.reuse is None:
            result.update(build(location, args.tiles, args.batch, cache, folders))
        if not args.build_only:
            result.update(measure(root, location, list(data.queries.values())))
    result["index"] = str(root)
    harness.finish(args, __spec__.name, result)


if __name__ == "__main__":
    main()
