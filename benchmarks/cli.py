"""Whole `pagesight` command-line processes, cold start included, as a user times them (issue 14).

    python benchmarks/cli.py [--repeat 5]

Indexes the bundled samples into a temporary folder once, then runs each command ``--repeat``
times as a fresh process and prints the median and the slowest wall time per command as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "What was the West region's revenue in Q3?"


def commands(index: str) -> dict[str, list[str]]:
    return {
        "--help": ["--help"],
        "argument error": ["search", "x", "--index", index, "--mode", "pixels"],
        "info": ["info", "--index", index],
        "search --mode lexical": ["search", QUESTION, "--index", index, "--mode", "lexical"],
        "search (hybrid)": ["search", QUESTION, "--index", index],
        "ask": ["ask", QUESTION, "--index", index],
        "documents": ["documents", "--index", index],
        "missing file": ["ingest", "/nonexistent.pdf", "--index", index],
        "delete": ["delete", "scanned-memo", "--index", index + "-copy"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    binary = [sys.executable, "-m", "pagesight"]
    with tempfile.TemporaryDirectory() as tmp:
        index = str(Path(tmp) / "index")
        subprocess.run([*binary, "ingest", str(ROOT / "samples" / "corpus"), "--index", index], check=True,
                       capture_output=True)  # fmt: skip
        results = {}
        for name, argv in commands(index).items():
            times = []
            for _ in range(args.repeat):
                if name == "delete":  # a fresh copy each time, made outside the timing
                    shutil.rmtree(index + "-copy", ignore_errors=True)
                    shutil.copytree(index, index + "-copy")
                start = time.perf_counter()
                done = subprocess.run([*binary, *argv], capture_output=True, check=False)
                if name == "delete" and done.returncode != 0:
                    raise SystemExit(f"delete failed: {done.stderr.decode()}")
                times.append(time.perf_counter() - start)
            results[name] = {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}
        shutil.rmtree(index, ignore_errors=True)
    print(json.dumps({"repeat": args.repeat, "load_average": os.getloadavg(), "commands": results}, indent=1))


if __name__ == "__main__":
    main()
