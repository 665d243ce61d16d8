"""Measure the extractive reader on questions whose answer is one value on the page (issue 14).

    python benchmarks/reader.py                      # benchmarks/reader, both splits, k = 5
    python benchmarks/reader.py --split dev -v       # the tuning half, every miss printed
    python benchmarks/reader.py --index DIR          # keep the index in DIR (reused when there)

The question set (``benchmarks/reader``, made by ``benchmarks/reader/generate.py``) is ingested
into a fresh index and every question is asked with the extractive reader. Retrieval and reading
are scored apart, so a wrong answer is charged to the right stage:

- ``retrieval_hit@k``: the page holding the answer is among the k tiles the reader was given
  (``retrieval_hit@1``: it is the first);
- ``accuracy``: the answer contains the expected value (``pagesight.eval.answers.contains``, with
  amounts compared as numbers: "$24.00" holds "24.00", "25.68" holds "£25.68");
- ``reader_accuracy``: the same over the questions whose page was retrieved, so reader errors
  are counted apart from retrieval errors;
- ``exact``: the answer is the value and little else (exact match, or the same single number).

Prints one JSON object: per split, and per kind of question.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
from pathlib import Path

from pagesight import Index
from pagesight.answer.extractive import ExtractiveReader
from pagesight.eval.answers import contains, exact_match, relaxed_accuracy
from pagesight.eval.dataset import Dataset

DATA = Path(__file__).resolve().parent / "reader"
_AMOUNT = re.compile(r"[$£€]?\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s?%)?")
_PLAIN_AMOUNT = re.compile(r"[$£€]?\d[\d,]*(\.\d+)?%?")


def amounts(text: str) -> set[tuple[float, bool]]:
    """Every number in ``text`` as (value, is a percentage)."""
    return {
        (float(m.group(1).replace(",", "") + (m.group(2) or "")), bool(m.group(3)))
        for m in _AMOUNT.finditer(text)
    }


def found(prediction: str, expected: str) -> bool:
    """The prediction contains the expected answer; a bare amount is compared by value."""
    if contains(prediction, expected):
        return True
    if _PLAIN_AMOUNT.fullmatch(expected.strip()):
        return amounts(expected) <= amounts(prediction)
    return False


def exact(prediction: str, expected: str) -> bool:
    if exact_match(prediction, expected):
        return True
    if _PLAIN_AMOUNT.fullmatch(expected.strip()):
        return len(amounts(prediction)) == 1 and amounts(expected) == amounts(prediction)
    return bool(relaxed_accuracy(prediction, expected, tolerance=0.0))


def summary(rows: list[dict]) -> dict:
    n = len(rows)
    if not n:
        return {"questions": 0}
    retrieved = [r for r in rows if r["hit@k"]]
    return {
        "questions": n,
        "retrieval_hit@1": round(sum(r["hit@1"] for r in rows) / n, 3),
        "retrieval_hit@k": round(len(retrieved) / n, 3),
        "accuracy": round(sum(r["correct"] for r in rows) / n, 3),
        "exact": round(sum(r["exact"] for r in rows) / n, 3),
        "reader_accuracy": round(sum(r["correct"] for r in retrieved) / len(retrieved), 3)
        if retrieved
        else None,
        "reader_errors": sum(r["hit@k"] and not r["correct"] for r in rows),
        "retrieval_errors": n - len(retrieved),
    }


def run(index: Index, data: Dataset, k: int, splits: set[str], verbose: bool) -> dict:
    reader = ExtractiveReader()
    index.ask("warm up", reader, k=k)
    rows, reads = [], []
    for qid, question in data.queries.items():
        meta = data.answers[qid]
        if meta.get("split", "dev") not in splits:
            continue
        page_id = next(iter(data.qrels[qid]))
        answer = index.ask(question, reader, k=k)
        reads.append(answer.timings["read"])
        pages = [hit.page_id for hit in answer.hits]
        row = {
            "id": qid,
            "split": meta.get("split", "dev"),
            "kind": meta.get("kind", ""),
            "hit@1": bool(pages) and pages[0] == page_id,
            "hit@k": page_id in pages,
            "correct": found(answer.text, meta["answer"]),
            "exact": exact(answer.text, meta["answer"]),
        }
        rows.append(row)
        if verbose and not row["correct"]:
            where = "reader" if row["hit@k"] else "retrieval"
            print(f"[{where}] {qid} {question}\n    expected {meta['answer']!r}, got {answer.text!r}")
    result = {split: summary([r for r in rows if r["split"] == split]) for split in sorted(splits)}
    result["all"] = summary(rows)
    result["by_kind"] = {
        kind: summary([r for r in rows if r["kind"] == kind]) for kind in sorted({r["kind"] for r in rows})
    }
    result["read_ms_p50"] = round(1000 * statistics.median(reads), 1)
    result["read_ms_max"] = round(1000 * max(reads), 1)
    result["k"] = k
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA, help="the question set (a dataset folder)")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="all")
    parser.add_argument("-k", type=int, default=5, help="tiles given to the reader")
    parser.add_argument("--index", type=Path, help="index folder to build or reuse (default: a fresh one)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every wrong answer")
    args = parser.parse_args()
    data = Dataset.load(args.data)
    splits = {"dev", "test"} if args.split == "all" else {args.split}
    with tempfile.TemporaryDirectory() as tmp:
        index = Index.open(args.index or Path(tmp) / "index")
        report = index.add([data.documents])
        if not report.ok:
            raise SystemExit(f"ingestion failed: {report.failed}")
        print(json.dumps(run(index, data, args.k, splits, args.verbose), indent=1))


if __name__ == "__main__":
    main()
