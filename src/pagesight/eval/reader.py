"""Fit the extractive reader (``answer.extractive``) on judged questions, and measure it on
documents it was not fitted on: ``pagesight fit-reader``.

Every question with a reference answer is read from its gold pages (eval's ``oracle`` context)
and, with ``retrieved``, from the tiles a search finds. Each reading logs what the reader
weighs: the question and the operation its answer's derivation shows (TAT-QA's answer types
and derivations: ``operation_of``), each table row's and column's features and whether it holds
an operand of that derivation, and every candidate's features and whether its answer is right by
the dataset's own metric (TAT-QA's exact match, else eval's relaxed accuracy or containment).

Four logistic models are fitted, each on what the one before gives: the question model (the
operation, over the question's words: ``program.question_features``), the row and column models
(``cells.ROW``, ``cells.COLUMN``), and the candidate scorer (``candidates.FEATURES``). The
support model is fitted on the answers chosen: right ones against the unanswerable questions'
(``confidence``), its threshold where no more than ``LOSE`` of any dataset's right answers fall.

Everything is measured by group folds over documents: each fold's questions are read with the
question, row and column models fitted on the other folds, and chosen by a scorer fitted on the
other folds' readings, so the figures reported are what documents unseen can expect. The models
written are fitted on everything.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pagesight.answer.extractive.candidates import FEATURES
from pagesight.answer.extractive.cells import COLUMN, ROW
from pagesight.errors import PagesightError
from pagesight.eval.derivations import form_of, holds, operand_values, operation_of, right_answers, whole
from pagesight.eval.logistic import C, Logistic, fit_head, fit_logistic

FOLDS = 5
C_SUPPORT = 0.1  # the support model's: its negatives (unanswerable questions) are few
LOSE = 0.035  # the share of a dataset's right answers the support model's threshold may decline
Progress = Callable[[int], None] | None
PAIRS = 30  # wrong candidates each right one is paired with in the scorer's fit


@dataclass
class Reading:
    """One question read from one context: what the reader weighed, with the gold labels."""

    qid: str
    group: str  # the document its gold pages are in: the folds' unit
    question: str
    operation: str | None  # its derivation's (TAT-QA), when known
    rows: np.ndarray = field(default_factory=lambda: np.zeros((0, len(ROW))))
    row_labels: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    columns: np.ndarray = field(default_factory=lambda: np.zeros((0, len(COLUMN))))
    column_labels: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    candidates: np.ndarray = field(default_factory=lambda: np.zeros((0, len(FEATURES))))
    right: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    answers: list[str] = field(default_factory=list)
    items: list[int] = field(default_factory=list)  # each candidate's context item
    best: np.ndarray | None = None  # the right candidates the scorer learns to prefer (``whole``)

    @property
    def preferred(self) -> np.ndarray:
        return self.right if self.best is None else self.best


def label_operands(offer, wanted: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows' and columns' features of an offer, each labelled by whether it holds one of the
    ``wanted`` figures."""
    operands, tables = offer.operands, offer.tables
    rows_held = {(p.table, p.row) for p in tables.cells if holds(p.cell.value, wanted)}
    columns_held = {(p.table, p.column) for p in tables.cells if holds(p.cell.value, wanted)}
    row_keys = list(operands.row_features)
    column_keys = list(operands.column_features)
    return (
        np.array([operands.row_features[k] for k in row_keys]).reshape(-1, len(ROW)),
        np.array([k in rows_held for k in row_keys], dtype=bool),
        np.array([operands.column_features[k] for k in column_keys]).reshape(-1, len(COLUMN)),
        np.array([k in columns_held for k in column_keys], dtype=bool),
    )


def groups_of(readings: Sequence[Reading], folds: int = FOLDS) -> list[set[str]]:
    """The documents split into ``folds`` groups of about as many questions each (largest first)."""
    sizes: dict[str, int] = {}
    for r in readings:
        sizes[r.group] = sizes.get(r.group, 0) + 1
    bins: list[set[str]] = [set() for _ in range(folds)]
    loads = [0] * folds
    for group in sorted(sizes, key=lambda g: (-sizes[g], g)):
        k = loads.index(min(loads))
        bins[k].add(group)
        loads[k] += sizes[group]
    return bins


def fit_scorer(readings: Sequence[Reading], C: float = C, pairs: int = PAIRS) -> Logistic:
    """The candidate scorer: a logistic model of which of two candidates of one question is the
    right one (each right candidate against up to ``pairs`` wrong ones, drawn with a fixed seed),
    on the candidates' features standardised, so it learns what sets a question's answer apart
    from that question's other candidates rather than what right answers share across questions.
    A question's pairs weigh as much together as any other question's of its set, and each set
    as much as the square root of its questions (TAT-QA's 1,668 do not drown the kinds of
    question the small sets ask)."""
    kept = [r for r in readings if len(r.candidates) and r.preferred.any() and not r.preferred.all()]
    if not kept:
        raise PagesightError("fitting the scorer needs questions with right and wrong candidates")
    sizes: dict[str, int] = {}
    for r in kept:
        sizes[_set_of(r)] = sizes.get(_set_of(r), 0) + 1
    X = np.vstack([r.candidates for r in kept])
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale < 1e-6] = 1.0
    rng = np.random.default_rng(0)
    differences, weights = [], []
    for r in kept:
        x = (r.candidates - mean) / scale
        right, wrong = np.flatnonzero(r.preferred), np.flatnonzero(~r.preferred)
        wrong = rng.choice(wrong, min(pairs, len(wrong)), replace=False)
        made = (x[right][:, None, :] - x[wrong][None, :, :]).reshape(-1, x.shape[1])
        differences.append(made)
        weights.append(np.full(len(made), 1.0 / (len(made) * math.sqrt(sizes[_set_of(r)]))))
    D, w = np.vstack(differences), np.concatenate(weights)
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise PagesightError("fitting the reader needs scikit-learn: pip install 'pagesight[eval]'") from None
    model = LogisticRegression(C=C, fit_intercept=False, max_iter=5000)
    model.fit(
        np.vstack([D, -D]),
        np.r_[np.ones(len(D)), np.zeros(len(D))],
        sample_weight=np.r_[w, w] * len(w) / w.sum(),
    )
    return Logistic(mean.round(6).tolist(), scale.round(6).tolist(), model.coef_[0].round(6).tolist(), 0.0)


def _set_of(reading: Reading) -> str:
    return reading.group.partition("/")[0]


def fit_operands(readings: Sequence[Reading]) -> dict:
    """The row and column models, fitted on the readings whose operands were found in the tables,
    each dataset weighing alike (as in the scorer)."""
    labelled = [r for r in readings if r.row_labels.any()]
    if not labelled:
        return {}
    sizes: dict[str, int] = {}
    for r in labelled:
        sizes[_set_of(r)] = sizes.get(_set_of(r), 0) + 1
    fitted = {}
    for name, features, labels in (("row", "rows", "row_labels"), ("column", "columns", "column_labels")):
        X = np.vstack([getattr(r, features) for r in labelled])
        y = np.concatenate([getattr(r, labels) for r in labelled])
        weights = np.concatenate(
            [np.full(len(getattr(r, labels)), 1.0 / sizes[_set_of(r)]) for r in labelled]
        )
        fitted[name] = fit_logistic(X, y, C, weights * len(y) / weights.sum()).to_dict()
    return fitted


@dataclass
class Judged:
    """A question to read: its set, id, text, context (``oracle``: its gold pages' tiles;
    ``retrieved``: a search's within its documents), document group, the operation and form of
    its answer, and its gold figures; an unanswerable question has no answer."""

    dataset: object
    qid: str
    question: str
    context: list
    group: str
    kind: str
    operation: str | None = None
    form: str | None = None
    wanted: list[float] = field(default_factory=list)
    answerable: bool = True


CONTEXTS = ("oracle", "retrieved")


def judged_questions(dataset, index, contexts: Sequence[str] = CONTEXTS, depth: int = 5) -> list[Judged]:
    """Every question of ``dataset`` with a reference answer read in each of ``contexts`` (the
    first ``depth`` tiles of its gold pages, eval's ``oracle``, or of a search within its
    documents; two contexts of the same tiles read once, their kinds joined: "oracle+retrieved"),
    and its unanswerable questions read from a search within their documents."""
    from pagesight.answer.context import build_context
    from pagesight.eval.grid import oracle
    from pagesight.eval.harness import corpus_unit
    from pagesight.request import SearchRequest

    held = {row.id for row in index.catalog.documents()}
    unit = corpus_unit(index, dataset.qrels)
    found = []
    for qid in dataset.answers:
        if qid not in dataset.queries:
            continue
        question = dataset.queries[qid]
        gold = {c for c, grade in dataset.qrels.get(qid, {}).items() if grade > 0}
        documents = sorted({c.rpartition("_")[0] if unit == "page" else c for c in gold} & held)
        fields = dataset.fields.get(qid, {})
        answer = dataset.answers[qid]["answer"]
        read: dict[tuple, str] = {}  # the tiles of each context read, and the contexts they are
        for kind in contexts:
            if kind == "oracle":
                hits = oracle(index, SearchRequest(question), gold, unit, held)[:depth]
            else:
                hits = index.search(SearchRequest(question, k=depth, doc_ids=documents or None))
            tiles = tuple(sorted((hit.doc_id, hit.page, hit.tile) for hit in hits))
            if not hits:
                continue
            if tiles in read:  # the same tiles (a one-page document's): read once, as both contexts
                same = next(j for j in reversed(found) if j.qid == qid and j.kind == read[tiles])
                same.kind = read[tiles] = f"{same.kind}+{kind}"
                continue
            read[tiles] = kind
            found.append(
                Judged(
                    dataset,
                    qid,
                    question,
                    build_context(index, hits),
                    f"{dataset.name}/{documents[0] if documents else hits[0].doc_id}",
                    kind,
                    operation_of(fields, answer) if fields.get("answer_type") else None,
                    form_of(answer, dataset.references(qid)),
                    operand_values(fields, answer),
                )
            )
    for qid, row in dataset.unanswerable.items():
        hits = index.search(SearchRequest(row["text"], k=depth, doc_ids=row["doc_ids"] or None))
        if hits:
            document = row["doc_ids"][0] if row["doc_ids"] else hits[0].doc_id
            context = build_context(index, hits)
            found.append(
                Judged(
                    dataset,
                    qid,
                    row["text"],
                    context,
                    f"{dataset.name}/{document}",
                    "retrieved",
                    answerable=False,
                )
            )
    return found


def read(
    judged: Sequence[Judged], reader_for: Callable[[dict], object], fitted: dict, progress: Progress = None
) -> list[Reading]:
    """Each question read by the reader ``reader_for(fitted)`` makes: its offer's features and labels."""
    reader = reader_for(fitted)
    found = []
    for n, j in enumerate(judged, 1):
        offer = reader.offer(j.question, j.context)
        rows, row_labels, columns, column_labels = label_operands(offer, j.wanted)
        texts = [c.text for c in offer.candidates]
        if j.answerable and texts:
            right = right_answers(j.dataset, j.qid, texts)
        else:
            right = np.zeros(len(texts), dtype=bool)
        found.append(
            Reading(
                j.qid,
                j.group,
                j.question,
                j.operation,
                rows,
                row_labels,
                columns,
                column_labels,
                np.array([c.vector() for c in offer.candidates]).reshape(-1, len(FEATURES)),
                right,
                texts,
                [c.item for c in offer.candidates],
                whole(j.dataset, j.qid, texts, right),
            )
        )
        if progress:
            progress(n)
    return found


@dataclass
class Fitted:
    """The fitted reader (``model``: what ``reader.json`` holds), its held-out figures by set and
    context (questions, right answers chosen, questions some candidate answers right, right
    answers kept and unanswerable questions declined by the support model), and the held-out
    answers by (set, context, question id)."""

    model: dict
    held_out: dict[str, dict[str, float]]
    answers: dict[tuple[str, str, str], str] = field(default_factory=dict)


def fit_reader(
    judged: Sequence[Judged],
    reader_for: Callable[[dict], object],
    folds: int = FOLDS,
    lose: float = LOSE,
    progress: Progress = None,
) -> Fitted:
    """The reader fitted on ``judged`` questions, measured by group folds over their documents
    (see the module's docstring)."""
    from pagesight.answer.extractive.confidence import features as support_features

    bins = groups_of(judged, folds)
    fold_of = {group: k for k, members in enumerate(bins) for group in members}
    fold = [fold_of[j.group] for j in judged]
    answerable = [j for j in judged if j.answerable]
    # the operands' features depend on no model: read once for the row and column labels
    plain = read(answerable, reader_for, {})
    plain_fold = [fold_of[j.group] for j in answerable]
    readings: list[Reading] = [None] * len(judged)  # type: ignore[list-item]
    done = 0
    for k in range(folds):
        train = [j for j, f in zip(judged, fold) if f != k]
        model = _models(train, [r for r, f in zip(plain, plain_fold) if f != k])
        held = [i for i, f in enumerate(fold) if f == k]
        for i, reading in zip(held, read([judged[i] for i in held], reader_for, model)):
            readings[i] = reading
        done += len(held)
        if progress:
            progress(done)
    chosen: list[int] = [-1] * len(judged)
    scores: list[np.ndarray] = [np.zeros(0)] * len(judged)
    for k in range(folds):
        scorer = fit_scorer([r for r, f, j in zip(readings, fold, judged) if f != k and j.answerable])
        for i in (i for i, f in enumerate(fold) if f == k):
            scores[i] = score(readings[i], scorer)
            chosen[i] = int(np.argmax(scores[i])) if len(scores[i]) else -1
    support_rows = []
    for j, r, c, s in zip(judged, readings, chosen, scores):
        if c < 0 or "retrieved" not in j.kind:
            support_rows.append(None)
            continue
        found, _ = support_features(j.question, j.context, r.items[c], s, c)
        support_rows.append((found, bool(r.right[c]), j.answerable, j.dataset.name))
    declined = _held_out_declines(support_rows, fold, folds, lose)
    held_out: dict[str, dict[str, float]] = {}
    answers = {}
    for j, r, c, out in zip(judged, readings, chosen, declined):
        key = f"{j.dataset.name}/{j.kind}"
        entry = held_out.setdefault(
            key, dict.fromkeys(("questions", "right", "reachable", "kept", "unanswerable", "declined"), 0)
        )
        if not j.answerable:
            entry["unanswerable"] += 1
            entry["declined"] += bool(out or c < 0)
            continue
        answers[j.dataset.name, j.kind, j.qid] = r.answers[c] if c >= 0 else ""
        right = bool(c >= 0 and r.right[c])
        entry["questions"] += 1
        entry["right"] += right
        entry["reachable"] += bool(r.right.any())
        entry["kept"] += right and not out
    model = _models(judged, plain)
    model["scorer"] = fit_scorer([r for r, j in zip(readings, judged) if j.answerable]).to_dict()
    model["support"] = fit_support([row for row in support_rows if row is not None], lose)
    return Fitted(model, held_out, answers)


def score(reading: Reading, scorer: Logistic) -> np.ndarray:
    """Each candidate's score (log-odds) under ``scorer``."""
    if not len(reading.candidates):
        return np.zeros(0)
    x = (reading.candidates - scorer.mean) / np.array(scorer.scale)
    return x @ np.array(scorer.coef) + scorer.intercept


def fit_support(rows: Sequence[tuple[dict, bool, bool, str]], lose: float = LOSE) -> dict:
    """The support model (``confidence.SUPPORT``'s features): the right answers read from a search
    against the unanswerable questions' choices, each dataset weighing alike, and its threshold
    the probability under which no more than ``lose`` of any dataset's right answers fall (the
    lowest of the datasets' quantiles: neither TAT-QA's many single pages nor a few long reports
    lose more than their share). Datasets with too few right answers to have such a quantile
    (fewer than ``1 / lose``: the least supported answer would stand for it) count pooled, when
    together they have enough (all the answers do, when no set has). Empty (no abstention)
    without both."""
    from pagesight.answer.extractive.confidence import SUPPORT, probability

    used = [(found, right, name) for found, right, answerable, name in rows if right or not answerable]
    if all(right for _, right, _ in used) or not any(right for _, right, _ in used):
        return {}  # no unanswerable questions (or no right answers) to tell apart: no abstention
    sizes: dict[tuple[str, bool], int] = {}
    for _, right, name in used:
        sizes[name, right] = sizes.get((name, right), 0) + 1
    X = np.array([[found[feature] for feature in SUPPORT] for found, _, _ in used])
    y = np.array([right for _, right, _ in used])
    weights = np.array([1.0 / sizes[name, right] for _, right, name in used])
    fitted = fit_logistic(X, y, C_SUPPORT, weights * len(y) / weights.sum())
    model = {"features": list(SUPPORT), **fitted.to_dict()}
    kept: dict[str, list[float]] = {}
    for found, right, name in used:
        if right:
            kept.setdefault(name, []).append(probability(found, model))
    enough = math.ceil(1 / lose)
    pooled = [p for ps in kept.values() if len(ps) < enough for p in ps]
    groups = [ps for ps in kept.values() if len(ps) >= enough] + ([pooled] if len(pooled) >= enough else [])
    groups = groups or [[p for ps in kept.values() for p in ps]]
    threshold = min(sorted(ps)[int(lose * len(ps))] for ps in groups)
    model["threshold"] = round(float(threshold) - 1e-6, 6)
    return model


def _held_out_declines(rows: list, fold: list[int], folds: int, lose: float) -> list[bool]:
    """Whether each row's answer is declined by a support model fitted on the other folds."""
    from pagesight.answer.extractive.confidence import probability

    declined = [False] * len(rows)
    for k in range(folds):
        train = [row for row, f in zip(rows, fold) if row is not None and f != k]
        if not any(answerable is False for _, _, answerable, _ in train) or not any(
            r for _, r, _, _ in train
        ):
            continue
        model = fit_support(train, lose)
        for i, row in enumerate(rows):
            if row is not None and fold[i] == k:
                declined[i] = probability(row[0], model) < model["threshold"]
    return declined


def _models(judged: Sequence[Judged], plain: Sequence[Reading]) -> dict:
    """The question model (its operation head fitted on the questions whose operation is known,
    its form head on all answerable ones) and the row and column models fitted on ``plain``
    readings."""
    labelled = [j for j in judged if j.operation is not None]
    formed = [j for j in judged if j.form is not None]
    question = {}
    if labelled:
        question["operation"] = fit_head([j.question for j in labelled], [j.operation for j in labelled])
    if len({j.form for j in formed}) > 1:
        question["form"] = fit_head([j.question for j in formed], [j.form for j in formed])
    return {"question": question, **fit_operands(plain)}


def fit_datasets(
    folders: Sequence[Path],
    indexes: Sequence[str] | None = None,
    contexts: Sequence[str] = CONTEXTS,
    folds: int = FOLDS,
    lose: float = LOSE,
    dense: bool | None = None,
    progress: Progress = None,
) -> Fitted:
    """The reader fitted on the datasets in ``folders``, each read from its index (``indexes``, in
    the folders' order; default: eval's, made when missing), with ``about`` saying so. ``dense``:
    whether the readers weigh candidates with MiniLM (None: when the extra is installed)."""
    import datetime

    from pagesight.answer.extractive import ExtractiveReader
    from pagesight.eval.dataset import Dataset
    from pagesight.eval.harness import default_index_dir, prepare_index

    if indexes and len(indexes) != len(folders):
        raise PagesightError(
            f"{len(indexes)} indexes for {len(folders)} datasets: give one for each, or none"
        )
    judged: list[Judged] = []
    names = set()
    for position, folder in enumerate(folders):
        data = Dataset.load(folder)
        if data.name in names:
            raise PagesightError(f"{folder}: a second dataset named {data.name}")
        names.add(data.name)
        if not data.answers:
            raise PagesightError(f"{folder}: no answers.jsonl: the reader is fitted on reference answers")
        path = Path(indexes[position]) if indexes else default_index_dir(data)
        index, _ = prepare_index(data, path, dense=False)
        judged += judged_questions(data, index, contexts)
    fitted = fit_reader(
        judged,
        lambda model: ExtractiveReader(dense=dense, abstain=False, fitted=model),
        folds,
        lose,
        progress,
    )
    fitted.model["about"] = (
        f"pagesight fit-reader, {datetime.date.today()}: {len(judged)} readings of "
        f"{', '.join(sorted(names))} ({', '.join(contexts)}); support threshold: the probability under which "
        f"no more than {lose:.1%} of any dataset's right answers fall"
    )
    return fitted
