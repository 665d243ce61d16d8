"""What every benchmark shares. A benchmark is a module of this package, run from the repository's
root as ``python -m benchmarks.NAME [options]`` (benchmarks/README.md lists them):

- its arguments: ``--tiny`` (toy data the benchmark makes itself, a few seconds: what the suite
  runs, ``tests/test_benchmarks.py``) and ``--json FILE`` (the result also written there; the
  figures BENCHMARKS.md's table shows are read from such files, ``benchmarks/figures.py``);
- one JSON object out, its figures beside the record of the run (``run``): the command, the
  commit (and whether the tree had changes), the machine (``pagesight.bench.machine``) and its
  load averages at the start and the end, the wall seconds and the process's peak memory
  (``pagesight.bench.peak_rss_mb``);
- latency quantiles (``latency``: ``pagesight.bench.quantiles``);
- toy data: an evaluation dataset of typeset tables (``toy_dataset``: ``pagesight.eval.typeset``),
  or of prose pages (``prose=True``: ``pagesight.eval.synthetic``), and its index (``toy_index``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pagesight import bench
from pagesight.eval.dataset import Dataset

ROOT = Path(__file__).resolve().parents[1]
# the shared real data, beside the repository (or where PAGESIGHT_SHARED_DATA says: a worktree's)
SHARED = Path(os.environ.get("PAGESIGHT_SHARED_DATA") or ROOT.parent / "shared" / "data")
PYTHON_M = [sys.executable, "-m"]  # a module of this package run as a process of its own


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark has; its description ``doc``."""
    made = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    made.add_argument(
        "--tiny", action="store_true", help="toy data made here, in seconds (what the test suite runs)"
    )
    made.add_argument("--json", type=Path, metavar="FILE", help="also write the result here")
    return made


def start(made: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed arguments, with the moment and the load the run starts at."""
    args = made.parse_args(argv)
    args.started = (time.perf_counter(), load())
    return args


def load() -> list[float]:
    """The machine's load averages over 1, 5 and 15 minutes."""
    return [round(value, 2) for value in os.getloadavg()]


def commit() -> dict:
    """The commit the benchmark runs at, and whether the working tree differs from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        return {"commit": None, "changed": None}
    return {"commit": head, "changed": bool(changed)}


def command(module: str, argv: Sequence[str] | None = None) -> str:
    """The command line that runs ``module`` with ``argv`` (default: this process's arguments)."""
    given = sys.argv[1:] if argv is None else list(argv)
    return shlex.join(["python", "-m", module, *given])


def finish(args: argparse.Namespace, module: str, result: dict) -> dict:
    """``result`` with the record of the run, printed as one JSON object (and written to
    ``args.json``); returns it."""
    started, load_start = args.started
    record = {
        "benchmark": module.removeprefix("benchmarks."),
        "tiny": args.tiny,
        **result,
        "run": {
            "command": command(module),
            **commit(),
            "machine": bench.machine(),
            "load_start": load_start,
            "load_end": load(),
            "wall_s": round(time.perf_counter() - started, 2),
            **bench.peak_rss_mb(),
        },
    }
    text = json.dumps(record, indent=1, default=str)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return record


def latency(seconds: Sequence[float]) -> dict:
    """The p50, p95 and p99 of ``seconds``, in milliseconds."""
    found = bench.quantiles([1000 * value for value in seconds])
    return {f"{name}_ms": value for name, value in found.items()}


def toy_dataset(folder: Path, tables: int = 4, seed: int = 54, prose: bool = False) -> Dataset:
    """A small evaluation dataset made in ``folder``, judged by page, with answers: ``tables``
    one-page PDFs of typeset tables with questions about their cells (``pagesight.eval.typeset``),
    or with ``prose`` as many two-page registers of fictional companies, facts in sentences
    (``pagesight.eval.synthetic``)."""
    if prose:
        from pagesight.eval.synthetic import dataset

        return Dataset.load(dataset(folder, tables, seed=seed))
    from pagesight.eval.typeset import generate

    return Dataset.load(generate(folder, tables, seed))


def toy_index(folder: Path, dataset: Dataset, dense: bool = False, **settings):
    """A new index of ``dataset``'s documents (text layer only; with ``dense`` its text vectors)."""
    from pagesight import Index

    index = Index.open(folder, settings={"dense_model": None, **settings} if not dense else settings)
    report = index.add([dataset.documents], ocr="never")
    if not report.ok:
        raise SystemExit(f"the toy dataset did not ingest: {report.failed}")
    return index
