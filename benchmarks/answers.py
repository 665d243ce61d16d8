"""Measure the extractive reader: answers and boxes against known ones, and `ask` latency.

    python benchmarks/answers.py                       # sample corpus + synthetic register
    python benchmarks/answers.py --irpapers DIR        # also ask latency on an IRPAPERS index

For each question set it reports how often the answer contains the expected value, for the
extractive reader and for the baseline of returning the top hit's snippet, and (synthetic set,
whose answer regions are known from the typesetting) how often the cited boxes overlap the true
region with IoU > 0.5. On IRPAPERS it times `Index.ask` over the 180 questions in a warm process
and counts the image tokens the same context would cost a Qwen2-VL reader at c = 1, 2, 4.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from pagesight import Index
from pagesight.answer.context import build_context, context_tokens
from pagesight.eval.dataset import Dataset
from pagesight.eval.synthetic import generate, iou, union

ROOT = Path(__file__).resolve().parents[1]


def score(index: Index, questions: list[dict], k: int) -> dict:
    """Containment of the expected answer (reader and top-snippet baseline) and box IoU > 0.5."""
    contained = baseline = grounded = with_region = 0
    latencies = []
    for q in questions:
        answer = index.ask(q["question"], k=k)
        latencies.append(answer.timings["total"])
        contained += q["answer"].lower() in answer.text.lower()
        top = answer.hits[0].snippet if answer.hits else ""
        baseline += q["answer"].lower() in top.lower()
        if q.get("region"):
            with_region += 1
            boxes = [b for c in answer.citations if c.page_id == q["page_id"] for b in c.boxes]
            grounded += bool(boxes) and iou(union(boxes), q["region"]) > 0.5
    n = len(questions)
    result = {
        "questions": n,
        "answer_contains_expected": round(contained / n, 4),
        "top_snippet_contains_expected": round(baseline / n, 4),
        "ask_ms_p50": round(1000 * statistics.median(latencies), 1),
    }
    if with_region:
        result["boxes_iou_over_0.5"] = round(grounded / with_region, 4)
    return result


def samples(k: int) -> dict:
    data = Dataset.load(ROOT / "samples")
    questions = [
        {"question": text, "answer": data.answers[qid]["answer"], "page_id": next(iter(data.qrels[qid]))}
        for qid, text in data.queries.items()
    ]
    with tempfile.TemporaryDirectory() as tmp:
        index = Index.open(Path(tmp) / "index")
        index.add([ROOT / "samples" / "corpus"])
        return score(index, questions, k)


def synthetic(k: int, documents: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "docs"
        made = generate(folder, n_documents=documents)
        index = Index.open(Path(tmp) / "index")
        index.add([folder])
        questions = [
            {"question": q.question, "answer": q.answer, "page_id": q.page_id, "region": q.region}
            for q in made
        ]
        return {"pages": index.info()["pages"], **score(index, questions, k)}


def irpapers(path: Path, k: int) -> dict:
    data = Dataset.load(ROOT.parent / "shared" / "data" / "irpapers")
    index = Index.open(path, create=False)
    index.ask("warm up the models", k=k)
    latencies, tokens = [], {1: [], 2: [], 4: []}
    for text in data.queries.values():
        start = time.perf_counter()
        answer = index.ask(text, k=k)
        latencies.append(time.perf_counter() - start)
        for c in tokens:
            tokens[c].append(context_tokens(build_context(index, answer.hits, c)))
    latencies.sort()
    return {
        "questions": len(latencies),
        "pages": index.info()["pages"],
        "k": k,
        "ask_ms_p50": round(1000 * statistics.median(latencies), 1),
        "ask_ms_p95": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 1),
        "qwen2_vl_image_tokens_mean": {f"c={c}": round(statistics.mean(v), 1) for c, v in tokens.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-k", type=int, default=5, help="tiles given to the reader")
    parser.add_argument("--documents", type=int, default=3, help="synthetic documents (2 pages each)")
    parser.add_argument("--irpapers", type=Path, help="an IRPAPERS index (pagesight ingest ... --index DIR)")
    args = parser.parse_args()
    result = {"samples": samples(args.k), "synthetic": synthetic(args.k, args.documents)}
    if args.irpapers:
        result["irpapers"] = irpapers(args.irpapers, args.k)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
