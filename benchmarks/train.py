"""Issue 17's numbers: train on IRPAPERS' corpus alone, then evaluate on its 180 questions.

    python -m benchmarks.train --index DIR --work WORK [-- pagesight train options]
    python -m benchmarks.train --visual-step-rate STEPS   # the tiny visual model's step rate
    python -m benchmarks.train --tiny        # a synthetic register, one step of each, two visual steps

1. ``pagesight train --index DIR --out WORK/out --cross-encoder ...``: synthetic queries from the
   index's tiles (no IRPAPERS question or label is read), hard negatives, the dense MiniLM and a
   cross-encoder trained; timed, with the peak memory of the process.
2. ``pagesight ingest PDFS --index WORK/index --dense-model WORK/out/dense``: the corpus indexed
   again with the trained MiniLM (dense vectors change with the model); timed.
3. The questions searched on DIR (before) and WORK/index (after), as ``benchmarks.irpapers`` searches
   them: dense, lexical and the hybrid rsf:0.1, and the hybrid reranked by the trained
   cross-encoder over its top --rerank-candidates.

``--visual-step-rate`` times ``train_visual`` steps of a tiny random-weight DSE (Qwen2-VL) on this
machine, the measured base of the GPU plan in BENCHMARKS.md.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import harness
from benchmarks.irpapers import configurations, searched
from pagesight import Index
from pagesight.eval.dataset import Dataset

PAGESIGHT = [*harness.PYTHON_M, "pagesight"]
TINY_TRAIN = ["--per-tile", "1", "--negatives", "1", "--batch-size", "2", "--max-steps", "1",
              "--cross-passage-words", "48"]  # fmt: skip


def run(command: list[str]) -> tuple[str, float, float]:
    """stdout, seconds and the peak memory (MB) of the largest child so far."""
    print("$", " ".join(command), file=sys.stderr, flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)  # progress on stderr, as it goes
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{command[2]} failed ({done.returncode})")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return done.stdout, seconds, peak


def visual_step_rate(steps: int) -> dict:
    """Seconds per ``train_visual`` step of a tiny DSE, batch 4 with one hard negative each."""
    import transformers

    from pagesight.encode.visual import make_encoder
    from pagesight.train.contrastive import Example, Options, train_visual
    from tests.encode.visual.conftest import PAGE_LINES, PAGE_SIZES, build_qwen, render_page

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
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


def measure(
    index: Path, work: Path, data: Dataset, train_options: list[str], candidates: int, skip_train: bool
) -> dict:
    out = work / "out"
    result: dict = {}
    if not skip_train:
        command = [*PAGESIGHT, "train", "--index", str(index), "--out", str(out), "--cross-encoder", "--json"]
        stdout, seconds, peak = run(command + train_options)
        report = json.loads(stdout)
        report["dense"].pop("options", None)
        result["train"] = {"train_s": round(seconds, 1), "train_peak_rss_mb": round(peak), **report}
    trained_index = work / "index"
    if not (trained_index / "catalog.sqlite").exists():
        command = [*PAGESIGHT, "ingest", str(data.documents), "--index", str(trained_index)]
        _, seconds, peak = run(command + ["--dense-model", str(out / "dense"), "--json"])
        result["ingest_trained"] = {"ingest_s": round(seconds, 1), "peak_rss_mb": round(peak)}
    plain = configurations(["dense", "lexical"], None, 0, None)
    reranked = configurations(["rsf:0.1"], "cross-encoder", candidates, str(out / "cross-encoder"))
    for name, folder in (("before", index), ("after", trained_index)):
        with Index.open(folder, create=False) as opened:
            result[name], _ = searched(opened, data, plain + reranked)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--index", type=Path, help="the IRPAPERS index with dense vectors (read only)")
    parser.add_argument("--work", type=Path, help="where the trained models and the new index go")
    parser.add_argument("--data", type=Path, default=harness.SHARED / "irpapers")
    parser.add_argument("--rerank-candidates", type=int, default=50)
    parser.add_argument("--skip-train", action="store_true", help="reuse WORK/out")
    parser.add_argument(
        "--visual-step-rate", type=int, metavar="STEPS", help="time the tiny visual model only"
    )
    parser.add_argument("train_options", nargs="*", help="after --: more pagesight train options")
    args = harness.start(parser, argv)
    if args.visual_step_rate and not args.tiny:
        harness.finish(args, __spec__.name, {"visual": visual_step_rate(args.visual_step_rate)})
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            data = harness.toy_dataset(Path(tmp) / "data", tables=1, prose=True)
            data.qrels = dict(list(data.qrels.items())[:6])  # the questions searched
            harness.toy_index(Path(tmp) / "before", data, dense=True).close()
            result = measure(Path(tmp) / "before", Path(tmp) / "work", data, TINY_TRAIN, 3, False)
            result["visual"] = visual_step_rate(2)
        elif args.index and args.work:
            data = Dataset.load(args.data)
            result = measure(
                args.index, args.work, data, args.train_options, args.rerank_candidates, args.skip_train
            )
        else:
            parser.error("--index and --work are needed (or --visual-step-rate, or --tiny)")
    harness.finish(args, __spec__.name, result)


if __name__ == "__main__":
    main()
