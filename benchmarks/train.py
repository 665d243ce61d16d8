"""Issue 17's numbers: train on IRPAPERS' corpus alone, then evaluate on its 180 questions.

    python benchmarks/train.py --index DIR --work WORK [-- pagesight train options]
    python benchmarks/train.py --visual-step-rate            # the tiny visual model's step rate

1. ``pagesight train --index DIR --out WORK/out --cross-encoder ...``: synthetic queries from the
   index's tiles (no IRPAPERS question or label is read), hard negatives, the dense MiniLM and a
   cross-encoder trained; timed, with the peak memory of the process.
2. ``pagesight ingest PDFS --index WORK/index --dense-model WORK/out/dense``: the corpus indexed
   again with the trained MiniLM (dense vectors change with the model); timed.
3. ``benchmarks/irpapers.py`` on DIR (before) and WORK/index (after): dense, lexical and the
   default hybrid, and the hybrid reranked by the trained cross-encoder over its top
   --rerank-candidates.

``--visual-step-rate`` times ``train_visual`` steps of a tiny random-weight DSE (Qwen2-VL) on this
machine, the measured base of the GPU plan in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(command: list[str]) -> tuple[str, float, float]:
    """stdout, seconds and the peak memory (MB) of the largest child so far."""
    print("$", " ".join(command), file=sys.stderr, flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)  # progress on stderr, as it goes
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{command[0]} failed ({done.returncode})")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return done.stdout, seconds, peak


def evaluate(index: Path, configs: list[str], cross_encoder: Path | None, candidates: int) -> list[dict]:
    command = [sys.executable, str(ROOT / "benchmarks" / "irpapers.py"), "--index", str(index)]
    command += ["--configs", *configs]
    if cross_encoder:
        command += ["--rerank", "cross-encoder", "--rerank-model", str(cross_encoder)]
        command += ["--rerank-candidates", str(candidates)]
    stdout, _, _ = run(command)
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def visual_step_rate(steps: int) -> dict:
    """Seconds per ``train_visual`` step of a tiny DSE, batch 4 with one hard negative each."""
    import tempfile

    import transformers

    sys.path.insert(0, str(ROOT))
    from pagesight.encode.visual import make_encoder
    from pagesight.train.contrastive import Example, Options, train_visual
    from tests.encode.visual.conftest import PAGE_LINES, PAGE_SIZES, build_qwen, render_page

    folder = Path(tempfile.mkdtemp())
    model = build_qwen(
        folder / "dse",
        "qwen2-vl",
        transformers.Qwen2VLForConditionalGeneration,
        transformers.Qwen2VLProcessor,
    )
    pages = [render_page(size, lines, n) for n, (size, lines) in enumerate(zip(PAGE_SIZES, PAGE_LINES))]
    examples = [Example(f"query {n}", "", [], n % 3, [(n + 1) % 3]) for n in range(3)]
    encoder = make_encoder("dse", model=str(folder / "dse"), device="cpu", batch_size=4)
    options = Options(batch_size=4, epochs=1000, max_steps=steps, lora=True, learning_rate=1e-4)
    report = train_visual(encoder, examples, lambda i: pages[i], folder / "out", options)
    return {
        "model": "tiny DSE (Qwen2-VL, 2 layers, hidden 64)",
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": report.steps,
        "seconds": report.seconds,
        "seconds_per_step": round(report.seconds / report.steps, 3),
        "peak_rss_mb": report.peak_rss_mb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="the IRPAPERS index with dense vectors (read only)")
    parser.add_argument("--work", type=Path, help="where the trained models and the new index go")
    parser.add_argument("--data", type=Path, default=ROOT / "../shared/data/irpapers")
    parser.add_argument("--rerank-candidates", type=int, default=50)
    parser.add_argument("--skip-train", action="store_true", help="reuse WORK/out")
    parser.add_argument(
        "--visual-step-rate", type=int, metavar="STEPS", help="time the tiny visual model only"
    )
    args, train_options = parser.parse_known_args()
    if args.visual_step_rate:
        print(json.dumps(visual_step_rate(args.visual_step_rate)))
        return
    if not (args.index and args.work):
        parser.error("--index and --work are needed")
    out = args.work / "out"
    pagesight = [sys.executable, "-m", "pagesight"]
    if not args.skip_train:
        command = [
            *pagesight,
            "train",
            "--index",
            str(args.index),
            "--out",
            str(out),
            "--cross-encoder",
            "--json",
        ]
        stdout, seconds, peak = run(command + [o for o in train_options if o != "--"])
        report = json.loads(stdout)
        report["dense"].pop("options", None)
        print(
            json.dumps({"train_s": round(seconds, 1), "train_peak_rss_mb": round(peak), **report}), flush=True
        )
    trained_index = args.work / "index"
    if not (trained_index / "catalog.sqlite").exists():
        command = [*pagesight, "ingest", str(args.data / "pdfs"), "--index", str(trained_index)]
        _, seconds, peak = run(command + ["--dense-model", str(out / "dense"), "--json"])
        print(json.dumps({"ingest_trained_s": round(seconds, 1), "peak_rss_mb": round(peak)}), flush=True)
    for name, index in (("before", args.index), ("after", trained_index)):
        for row in evaluate(index, ["dense", "lexical"], None, 0):
            print(json.dumps({"dense_model": name, **row}), flush=True)
        for row in evaluate(index, ["rsf:0.1"], out / "cross-encoder", args.rerank_candidates):
            print(json.dumps({"dense_model": name, **row}), flush=True)


if __name__ == "__main__":
    main()
