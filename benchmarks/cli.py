"""Whole `pagesight` command-line processes, cold start included, as a user times them (issue 14).

    python -m benchmarks.cli [--repeat 5] [--json FILE]
    python -m benchmarks.cli --tiny          # a lexical index of two typeset tables, three commands once

Indexes the bundled samples (with ``--tiny``: a toy dataset's documents, no dense vectors) into a
temporary folder once, then runs each command ``--repeat`` times as a fresh process; the median and
the slowest wall time per command.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import harness

QUESTION = "What was the West region's revenue in Q3?"
PAGESIGHT = [*harness.PYTHON_M, "pagesight"]
TINY = ("--help", "search --mode lexical", "delete")  # the commands --tiny times


def commands(index: str, deleted: str) -> dict[str, list[str]]:
    return {
        "--help": ["--help"],
        "argument error": ["search", "x", "--index", index, "--mode", "pixels"],
        "info": ["info", "--index", index],
        "search --mode lexical": ["search", QUESTION, "--index", index, "--mode", "lexical"],
        "search (hybrid)": ["search", QUESTION, "--index", index],
        "ask": ["ask", QUESTION, "--index", index],
        "documents": ["documents", "--index", index],
        "missing file": ["ingest", "/nonexistent.pdf", "--index", index],
        "delete": ["delete", deleted, "--index", index + "-copy"],
    }


def measure(corpus: Path, repeat: int, dense: bool, folder: Path, names=None) -> dict:
    index = str(folder / "index")
    ingest = [*PAGESIGHT, "ingest", str(corpus), "--index", index] + ([] if dense else ["--no-dense"])
    subprocess.run(ingest, check=True, capture_output=True)
    deleted = sorted(path.stem for path in corpus.iterdir())[0]
    results = {}
    for name, argv in commands(index, deleted).items():
        if names is not None and name not in names:
            continue
        times = []
        for _ in range(repeat):
            if name == "delete":  # a fresh copy each time, made outside the timing
                shutil.rmtree(index + "-copy", ignore_errors=True)
                shutil.copytree(index, index + "-copy")
            start = time.perf_counter()
            done = subprocess.run([*PAGESIGHT, *argv], capture_output=True, check=False)
            if name == "delete" and done.returncode != 0:
                raise SystemExit(f"delete failed: {done.stderr.decode()}")
            times.append(time.perf_counter() - start)
        results[name] = {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}
    return results


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="processes a command (default 5; tiny 1)")
    args = harness.start(parser, argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.tiny:
            corpus, repeat = harness.toy_dataset(folder / "data", tables=2).documents, 1
        else:
            corpus, repeat = harness.ROOT / "samples" / "corpus", args.repeat
        results = measure(corpus, repeat, not args.tiny, folder, TINY if args.tiny else None)
    harness.finish(args, __spec__.name, {"corpus": corpus.name, "repeat": repeat, "commands": results})


if __name__ == "__main__":
    main()
