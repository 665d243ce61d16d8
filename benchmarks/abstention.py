"""Measure the extractive reader's abstention (issues 40 and 54) on documents it was not fitted on:
how many unanswerable questions it declines, and how many of the answers it gets right it keeps.

    python benchmarks/abstention.py --financebench IDX --mmlongbench IDX [--irpapers IDX]
        [--work DIR] [--fit]

IDX are indexes of the datasets' documents (``pagesight ingest DATA/pdfs --index IDX``). Every
question is searched within its right document (k = 5) and read by the extractive reader without
abstention: an answer is right when it contains the reference or is within 5% of it (eval's
``right``). Unanswerable questions are mmlongbench-dev's ``unanswerable.jsonl`` (36). IRPAPERS has
no reference answers: there an answer counts as right when its line is on the question's page
(its one relevant page), and its other answers are left out. The calibration sets, on which the
reader is right far more often, are ingested into ``--work`` (reused when there):
benchmarks/reader, the bundled samples and the synthetic register of ``eval.synthetic`` (3
documents). For each question the features of the reader's choice are taken
(``answer.extractive.confidence.features``).

The support model is scikit-learn's logistic regression on standardised features (``--features``;
L2-regularised with C = .1, as 36 unanswerable questions are few),
fitted on the right answers against the unanswerable questions (a wrong answer to an answerable
question is left out: its line may well name what the question asks about). It is measured by
group k-fold over the documents of all sets (``--folds``, 5): each fold's documents are judged by
a model fitted on the others' and its threshold, the probability under which no more than
``--lose`` (3 %) of their right answers fall. Prints one JSON object: per set, the right answers
kept and the unanswerable and wrong ones declined on the held-out folds, for the model's features
and for all of them (``FEATURES``); the same in-sample for the model fitted on everything; the
model, which ``--fit`` writes to the package (``answer/extractive/support.json``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import tempfile
from pathlib import Path

import numpy as np

from pagesight import Index
from pagesight.answer.context import build_context
from pagesight.answer.extractive import ExtractiveReader
from pagesight.answer.extractive.confidence import FEATURES, MODEL, features, probability
from pagesight.answer.extractive.figures import table_reading
from pagesight.answer.extractive.lines import answer_candidates
from pagesight.answer.extractive.reader import total
from pagesight.eval.answers import contains, relaxed_accuracy
from pagesight.eval.dataset import Dataset
from pagesight.eval.synthetic import generate

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
C = 0.1  # the logistic regression's inverse regularisation: held-out figures were no worse than at 1 or 10
# the features that carried over to held-out documents (the others declined right answers there)
USED = ["figures", "names", "near", "absent", "unconstrained", "margin"]


def judged(index: Index, name: str, questions: list, reader: ExtractiveReader) -> list[dict]:
    """One row per question of ``questions`` (id, text, documents, references: none for an
    unanswerable one, or the page id its answer is on): its set, document, whether the answer read
    without abstention is right (None: unanswerable) and the features of the reader's choice."""
    rows = []
    for qid, text, documents, references in questions:
        context = build_context(index, index.search(text, k=5, doc_ids=documents or None))
        document = documents[0] if documents else context[0].hit.doc_id
        table = table_reading(text, context, reader.thesaurus)
        if table is not None:  # read from table cells: kept unjudged, or declined by the cells
            if isinstance(references, str):  # the answer's page
                right = any(context[i].hit.page_id == references for i in table.cited)
            else:
                right = judge(table.text, references)
            rows.append({"set": name, "id": qid, "document": f"{name}:{document}", "table": True,
                         "declined": not table.answered, "right": right if references else None})  # fmt: skip
            continue
        candidates = answer_candidates(context)
        if not candidates:
            continue
        signals = reader.features(text, candidates, len(context))
        scores = total(signals)
        chosen = int(np.argmax(scores))
        score = total(signals, without=("dense",))[chosen]
        found, _ = features(text, context, candidates[chosen].item, scores, chosen, score)
        if isinstance(references, str):  # the answer's page
            right: bool | None = context[candidates[chosen].item].hit.page_id == references
        else:
            right = judge(reader.read(text, context).text, references)
        rows.append({"set": name, "id": qid, "document": f"{name}:{document}", "features": found,
                     "right": right if references else None})  # fmt: skip
    return rows


def judge(said: str, references: list[str]) -> bool:
    """eval's ``right``: the answer contains a reference or is within 5 % of one."""
    return bool(said) and max(contains(said, references), relaxed_accuracy(said, references)) == 1


def irpapers_questions(data: Dataset) -> list:
    """IRPAPERS' questions, each asked of its paper, its answer's page as its reference."""
    found = []
    for qid, text in data.queries.items():
        page = next(iter(data.qrels[qid]))
        found.append((qid, text, [page.rpartition("_")[0]], page))
    return found


def dataset_questions(data: Dataset) -> list:
    found = []
    for qid in data.answers:
        documents = sorted({page.rpartition("_")[0] for page in data.qrels.get(qid, {})})
        found.append((qid, data.queries[qid], documents, data.references(qid)))
    found += [(qid, row["text"], row["doc_ids"], []) for qid, row in data.unanswerable.items()]
    return found


def calibration(work: Path, reader: ExtractiveReader) -> list[dict]:
    rows = []
    for name, folder in (("reader", ROOT / "benchmarks" / "reader"), ("samples", ROOT / "samples")):
        data = Dataset.load(folder)
        index = Index.open(work / name)
        if not index.documents():
            index.add([data.documents])
        rows += judged(index, name, dataset_questions(data), reader)
    register = work / "register"
    made = generate(register / "docs", n_documents=3)
    index = Index.open(register / "index")
    if not index.documents():
        index.add([register / "docs"])
    questions = [(q.page_id, q.question, [q.page_id.rpartition("_")[0]], [q.answer]) for q in made]
    return rows + judged(index, "synthetic", questions, reader)


def fit(rows: list[dict], names: list[str], lose: float) -> dict:
    """The support model on features ``names`` fitted on ``rows`` (their right answers against
    their unanswerable questions), its threshold the probability under which no more than
    ``lose`` of their right answers fall."""
    from sklearn.linear_model import LogisticRegression

    used = [r for r in rows if r["right"] is not False and not r.get("table")]
    X = np.array([[r["features"][name] for name in names] for r in used])
    y = np.array([bool(r["right"]) for r in used])
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale == 0] = 1.0
    fitted = LogisticRegression(C=C, max_iter=2000).fit((X - mean) / scale, y)
    model = {
        "features": list(names),
        "mean": mean.round(6).tolist(),
        "scale": scale.round(6).tolist(),
        "coef": fitted.coef_[0].round(6).tolist(),
        "intercept": round(float(fitted.intercept_[0]), 6),
    }
    right = sorted(probability(r["features"], model) for r in used if r["right"])
    model["threshold"] = round(float(right[int(lose * len(right))]) - 1e-6, 6)
    return model


def held_out(rows: list[dict], names: list[str], folds: int, lose: float) -> list[bool]:
    """Whether each row is declined by the model fitted on the other folds' documents."""
    from sklearn.model_selection import GroupKFold

    declined = [False] * len(rows)
    groups = [r["document"] for r in rows]
    for train, test in GroupKFold(n_splits=folds).split(rows, groups=groups):
        model = fit([rows[i] for i in train], names, lose)
        for i in test:
            declined[i] = is_declined(rows[i], model)
    return declined


def is_declined(row: dict, model: dict) -> bool:
    """Whether the reader under ``model`` declines ``row``: a reading from table cells is not
    put to the model (it is declined only when its cells deny the question)."""
    if row.get("table"):
        return row["declined"]
    return probability(row["features"], model) < model["threshold"]


def figures(rows: list[dict], declined: list[bool]) -> dict:
    """Per set and per group of sets (development, calibration): right answers kept, wrong and
    unanswerable questions declined."""
    result: dict[str, dict] = {}
    for r, out in zip(rows, declined):
        group = "dev (financebench + mmlongbench)" if r["set"].endswith("-dev") else "calibration"
        for name in (r["set"], group) if r["set"] != "irpapers" else (r["set"],):
            counts = result.setdefault(name, {"right": 0, "right_kept": 0, "wrong": 0, "wrong_declined": 0})
            kind = "unanswerable" if r["right"] is None else "right" if r["right"] else "wrong"
            done = f"{kind}_kept" if kind == "right" else f"{kind}_declined"
            counts[kind] = counts.get(kind, 0) + 1
            counts[done] = counts.get(done, 0) + (not out if kind == "right" else out)
    return result


def collect(args: argparse.Namespace) -> list[dict]:
    reader = ExtractiveReader(abstain=False)
    rows = []
    for name, path in (("financebench-dev", args.financebench), ("mmlongbench-dev", args.mmlongbench)):
        if path is not None:
            data = Dataset.load(DATA / name)
            rows += judged(Index.open(path, create=False), name, dataset_questions(data), reader)
    if args.irpapers is not None:
        data = Dataset.load(DATA / "irpapers")
        rows += judged(Index.open(args.irpapers, create=False), "irpapers", irpapers_questions(data), reader)
    with tempfile.TemporaryDirectory() as tmp:
        rows += calibration(args.work or Path(tmp), reader)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--financebench", type=Path, help="an index of financebench-dev's documents")
    parser.add_argument("--mmlongbench", type=Path, help="an index of mmlongbench-dev's documents")
    parser.add_argument("--irpapers", type=Path, help="an index of IRPAPERS' documents")
    parser.add_argument(
        "--work", type=Path, help="where the calibration indexes go (default: a temporary folder)"
    )
    parser.add_argument("--folds", type=int, default=5, help="folds of documents (default 5)")
    parser.add_argument(
        "--lose", type=float, default=0.03, help="right answers a threshold may lose (default .03)"
    )
    parser.add_argument(
        "--features", default=",".join(USED), help=f"the model's features (default {','.join(USED)})"
    )
    parser.add_argument(
        "--fit", action="store_true", help="write the model fitted on everything to the package"
    )
    args = parser.parse_args()
    names = args.features.split(",")
    rows = collect(args)
    model = fit(rows, names, args.lose)
    in_sample = [is_declined(r, model) for r in rows]
    result = {
        "held_out": figures(rows, held_out(rows, names, args.folds, args.lose)),
        "held_out_all_features": figures(rows, held_out(rows, list(FEATURES), args.folds, args.lose)),
        "in_sample": figures(rows, in_sample),
    }
    model["about"] = (
        f"benchmarks/abstention.py --fit, {datetime.date.today()}: the right answers ({sum(bool(r['right']) and not r.get('table') for r in rows)}) "
        f"and unanswerable questions ({sum(r['right'] is None for r in rows)}) of financebench-dev, mmlongbench-dev, "
        f"IRPAPERS, benchmarks/reader, the samples and the synthetic register; threshold: the probability under "
        f"which {args.lose:.0%} of the right answers fall"
    )
    result["model"] = model
    if args.fit:
        MODEL.write_text(json.dumps(model, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
