"""Measure the extractive reader's abstention (issue 40): how many unanswerable questions it
declines, and how many of the answers it gets right it keeps.

    python benchmarks/abstention.py --financebench IDX --mmlongbench IDX [--work DIR]

IDX are indexes of the datasets' documents (``pagesight ingest DATA/pdfs --index IDX``). Every
question is searched within its right document (k = 5, as the issue asks) and read twice by the
extractive reader, with and without ``abstain``: an answer is right when, read without abstention,
it contains the reference or is within 5% of it (eval's ``right``); kept when, read with it, the
reader still answers. Unanswerable questions are mmlongbench-dev's ``unanswerable.jsonl`` (36).
The calibration sets, on which the reader is right far more often, are ingested into ``--work``
(reused when there): benchmarks/reader, the bundled samples and the synthetic register of
``eval.synthetic`` (3 documents). Prints one JSON object: per set, the answers right and kept,
the wrong ones declined, and the unanswerable ones declined (also by halves, odd and even ids).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from pagesight import Index
from pagesight.answer.context import build_context
from pagesight.answer.extractive import ExtractiveReader
from pagesight.eval.answers import contains, relaxed_accuracy
from pagesight.eval.dataset import Dataset
from pagesight.eval.synthetic import generate

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def measure(index: Index, questions: list[tuple[str, str, list[str], list[str]]], readers) -> dict:
    """``questions``: (id, text, documents, references; none: unanswerable)."""
    abstaining, quoting = readers
    counts = {"right": 0, "right_kept": 0, "wrong": 0, "wrong_declined": 0, "unanswerable": 0}
    halves = {"odd": [0, 0], "even": [0, 0]}
    for n, (_qid, text, documents, references) in enumerate(questions):
        context = build_context(index, index.search(text, k=5, doc_ids=documents or None))
        declined = not abstaining.read(text, context).answered
        if not references:
            counts["unanswerable"] += 1
            counts["unanswerable_declined"] = counts.get("unanswerable_declined", 0) + declined
            half = halves["odd" if n % 2 else "even"]
            half[0], half[1] = half[0] + 1, half[1] + declined
            continue
        said = quoting.read(text, context).text
        right = bool(said) and max(contains(said, references), relaxed_accuracy(said, references)) == 1
        key = "right" if right else "wrong"
        counts[key] += 1
        counts[f"{key}_kept" if right else "wrong_declined"] += (
            right and not declined or not right and declined
        )
    if counts["unanswerable"]:
        counts["unanswerable_declined_by_half"] = {k: f"{v[1]}/{v[0]}" for k, v in halves.items()}
    return counts


def dataset_questions(data: Dataset) -> list:
    found = []
    for qid in data.answers:
        documents = sorted({page.rpartition("_")[0] for page in data.qrels.get(qid, {})})
        found.append((qid, data.queries[qid], documents, data.references(qid)))
    found += [(qid, row["text"], row["doc_ids"], []) for qid, row in data.unanswerable.items()]
    return found


def calibration(work: Path, readers) -> dict:
    results = {}
    for name, folder in (("reader", ROOT / "benchmarks" / "reader"), ("samples", ROOT / "samples")):
        data = Dataset.load(folder)
        index = Index.open(work / name)
        if not index.documents():
            index.add([data.documents])
        results[name] = measure(index, dataset_questions(data), readers)
    register = work / "register"
    made = generate(register / "docs", n_documents=3)
    index = Index.open(register / "index")
    if not index.documents():
        index.add([register / "docs"])
    questions = [(q.page_id, q.question, [q.page_id.rpartition("_")[0]], [q.answer]) for q in made]
    results["synthetic"] = measure(index, questions, readers)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--financebench", type=Path, help="an index of financebench-dev's documents")
    parser.add_argument("--mmlongbench", type=Path, help="an index of mmlongbench-dev's documents")
    parser.add_argument(
        "--work", type=Path, help="where the calibration indexes go (default: a temporary folder)"
    )
    args = parser.parse_args()
    readers = (ExtractiveReader(), ExtractiveReader(abstain=False))
    result = {}
    for name, path in (("financebench-dev", args.financebench), ("mmlongbench-dev", args.mmlongbench)):
        if path is not None:
            index = Index.open(path, create=False)
            result[name] = measure(index, dataset_questions(Dataset.load(DATA / name)), readers)
    with tempfile.TemporaryDirectory() as tmp:
        result["calibration"] = calibration(args.work or Path(tmp), readers)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
