"""Draw the README's similarity-map picture: a tiny random-weight ColQwen2 (the tests' model, built
from a config, no download) indexes a sample page, and the map of a query is drawn over its tile.

    python benchmarks/similarity_map.py [--out docs/similarity-map.png]

Random weights match nothing in particular: the picture shows what the map looks like (each patch
tinted by its best similarity to the query's tokens, the strongest outlined), not what a trained
model finds. With a real checkpoint: ``pagesight search QUERY --index DIR --explain OUT/``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pagesight import Index  # noqa: E402
from pagesight.encode.visual.late_interaction import import_colpali  # noqa: E402
from tests.encode.visual.conftest import build_qwen  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "similarity-map.png")
    parser.add_argument("--query", default="West region revenue")
    args = parser.parse_args()
    models = import_colpali()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        build_qwen(folder / "colqwen2", "qwen2-vl", models.ColQwen2, models.ColQwen2Processor)
        settings = {
            "dense_model": None,
            "visual_encoder": "colqwen2",
            "visual_model": str(folder / "colqwen2"),
        }
        with Index.open(folder / "index", settings=settings, device="cpu") as index:
            assert index.add([ROOT / "samples" / "corpus" / "quarterly-report.pdf"], ocr="never").ok
            drawn = index.explain(args.query, "quarterly-report", 2, 0).draw()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    drawn.thumbnail((600, 800))
    drawn.save(args.out, optimize=True)
    print(args.out)


if __name__ == "__main__":
    main()
