"""Draw the README's similarity-map picture: a tiny random-weight ColQwen2 (the tests' model, built
from a config, no download) indexes a sample page, and the map of a query is drawn over its tile.

    python -m benchmarks.similarity_map [--out similarity-map.png]
    python -m benchmarks.similarity_map --out docs/similarity-map.png     # the picture the docs show
    python -m benchmarks.similarity_map --tiny     # drawn into a temporary folder, its size given

Random weights match nothing in particular: the picture shows what the map looks like (each patch
tinted by its best similarity to the query's tokens, the strongest outlined), not what a trained
model finds. With a real checkpoint: ``pagesight search QUERY --index DIR --explain OUT/``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks import harness
from pagesight import Index
from pagesight.encode.visual.late_interaction import import_colpali
from tests.encode.visual.conftest import build_qwen


def draw(query: str, out: Path, work: Path) -> dict:
    models = import_colpali()
    build_qwen(work / "colqwen2", "qwen2-vl", models.ColQwen2, models.ColQwen2Processor)
    settings = {"dense_model": None, "visual_encoder": "colqwen2", "visual_model": str(work / "colqwen2")}
    with Index.open(work / "index", settings=settings, device="cpu") as index:
        if not index.add([harness.ROOT / "samples" / "corpus" / "quarterly-report.pdf"], ocr="never").ok:
            raise SystemExit("the sample page did not ingest")
        start = time.perf_counter()
        drawn = index.explain(query, "quarterly-report", 2, 0).draw()
        seconds = time.perf_counter() - start
    out.parent.mkdir(parents=True, exist_ok=True)
    drawn.thumbnail((600, 800))
    drawn.save(out, optimize=True)
    return {
        "out": str(out),
        "size": list(drawn.size),
        "bytes": out.stat().st_size,
        "explain_s": round(seconds, 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--out", type=Path, help="where the picture goes (default: similarity-map.png here)")
    parser.add_argument("--query", default="West region revenue")
    args = harness.start(parser, argv)
    with tempfile.TemporaryDirectory() as work:
        out = args.out or (Path(work) / "similarity-map.png" if args.tiny else Path("similarity-map.png"))
        result = draw(args.query, out, Path(work))
    harness.finish(args, __spec__.name, {"query": args.query, **result})


if __name__ == "__main__":
    main()
