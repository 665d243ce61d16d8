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
(``confidence``), its threshold where no more than ``LOSE`` of the right answers fall.

Everything is measured by group folds over documents: each fold's questions are read with the
question, row and column models fitted on the other folds, and chosen by a scorer fitted on the
other folds' readings, so the figures reported are what documents unseen can expect. The models
written are fitted on everything.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pagesight.answer.extractive.candidates import FEATURES
from pagesight.answer.extractive.cells import COLUMN, ROW
from pagesight.answer.extractive.program import hashed, question_features
from pagesight.errors import PagesightError

YEAR = re.compile(r"^(?:19|20)\d\d$")
_SPAN_FIGURE = re.compile(r"^[-$€£()\d.,% ]+$")
FOLDS = 5
C_QUESTION = 10.0  # the question model's inverse regularisation (held-out accuracy at 1, 3, 10, 30: .82, .86, .87, .87)
C = 1.0


def operation_of(fields: dict, answer: str | list[str]) -> str | None:
    """The operation a TAT-QA question's answer shows (``program.OPERATIONS``) by its answer type
    and derivation, or None when its derivation is of no shape the reader computes."""
    kind = fields.get("answer_type")
    derivation = str(fields.get("derivation") or "")
    answers = answer if isinstance(answer, list) else [answer]
    if kind == "count":
        return "count"
    if kind == "span":
        if ">" in derivation or "<" in derivation:
            return "largest" if ">" in derivation else "smallest"
        return "span"
    if kind == "multi-span":
        if all(YEAR.match(a.strip()) for a in answers):
            return "years"
        if all(_SPAN_FIGURE.match(a.strip()) for a in answers if a.strip()):
            return "values"
        return "list"
    if kind != "arithmetic":
        return None
    shape = _shape(derivation)
    if shape == "(n-n)":
        return "change"
    if shape in ("((n-n)/n)", "(((n-n)/n)*n)", "((n/n)-n)"):
        return "percent_change"
    if re.fullmatch(r"\(+n(?:\+n\)?)+/n\)", shape):
        return "average"
    if re.fullmatch(r"\(*n(?:\+n\)*)+", shape):
        return "sum"
    if shape in ("(n/n)", "((n/n)*n)"):
        return "share" if fields.get("scale") == "percent" else "ratio"
    return None


def _shape(derivation: str) -> str:
    """A derivation's arithmetic as its shape: numbers as ``n``, each operation bracketed."""
    text = derivation.replace("$", "").replace("[", "(").replace("]", ")").replace("%", "").replace(",", "")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return "?"

    def shape(node) -> str:
        if isinstance(node, ast.Constant):
            return "n"
        if isinstance(node, ast.UnaryOp):
            return shape(node.operand)
        if isinstance(node, ast.BinOp):
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(type(node.op), "?")
            return f"({shape(node.left)}{op}{shape(node.right)})"
        return "?"

    return shape(tree)


def operand_values(fields: dict, answer: str | list[str]) -> list[float]:
    """The figures a question's answer was read or computed from: its derivation's numbers, or a
    figure it answers with as printed."""
    derivation = str(fields.get("derivation") or "")
    texts = re.findall(r"\d[\d,]*\.?\d*", derivation) if derivation else []
    if not texts and fields.get("answer_type") in ("span", "multi-span"):
        answers = answer if isinstance(answer, list) else [answer]
        texts = [a for a in answers if _SPAN_FIGURE.match(a.strip())]
    found = []
    for text in texts:
        digits = text.replace(",", "").replace("$", "").replace("%", "").strip("() ")
        try:
            found.append(abs(float(digits)))
        except ValueError:
            continue
    return found


def holds(value: float | None, wanted: list[float]) -> bool:
    """A cell's ``value`` is one of the ``wanted`` figures (as printed: to its own precision)."""
    if value is None:
        return False
    return any(abs(abs(value) - w) <= 1e-6 + 5e-4 * max(w, 1.0) for w in wanted)


@dataclass
class Logistic:
    """A fitted logistic model as the reader's package file holds it."""

    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float

    def to_dict(self) -> dict:
        return {"mean": self.mean, "scale": self.scale, "coef": self.coef, "intercept": self.intercept}


def fit_logistic(X: np.ndarray, y: np.ndarray, C: float = C, weights: np.ndarray | None = None) -> Logistic:
    """scikit-learn's logistic regression on standardised features."""
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise PagesightError("fitting the reader needs scikit-learn: pip install 'pagesight[eval]'") from None
    if y.all() or not y.any():
        raise PagesightError("fitting needs both right and wrong examples")
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=C, max_iter=5000).fit((X - mean) / scale, y, sample_weight=weights)
    return Logistic(
        mean.round(6).tolist(),
        scale.round(6).tolist(),
        model.coef_[0].round(6).tolist(),
        round(float(model.intercept_[0]), 6),
    )


def fit_head(questions: Sequence[str], labels: Sequence[str], C: float = C_QUESTION) -> dict:
    """One head of the question model: a (multinomial) logistic regression over each question's
    hashed features (``program.question_features``), its weights kept for the buckets questions
    use."""
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise PagesightError("fitting the reader needs scikit-learn: pip install 'pagesight[eval]'") from None
    from scipy import sparse

    X = sparse.csr_matrix(np.vstack([hashed(question_features(q)) for q in questions]))
    model = LogisticRegression(C=C, max_iter=5000).fit(X, np.array(labels))
    classes = [str(c) for c in model.classes_]
    used = np.flatnonzero(np.abs(model.coef_).max(axis=0) > 1e-3)
    weights = {str(int(b)): model.coef_[:, b].round(4).tolist() for b in used}
    return {"classes": classes, "intercept": model.intercept_.round(4).tolist(), "weights": weights}


def form_of(answer: str | list[str], references: Sequence[str]) -> str:
    """What an answer is (``program.FORMS``): a figure when each of its spans reads as one."""
    answers = answer if isinstance(answer, list) else [answer]
    spans = [str(a) for a in answers if str(a).strip()] or list(references)
    return "figure" if spans and all(_SPAN_FIGURE.match(a.strip()) for a in spans) else "text"


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


def choose(readings: Sequence[Reading], scorer: Logistic) -> list[int]:
    """The candidate each reading's scorer chooses (-1: none offered)."""
    chosen = []
    for r in readings:
        if not len(r.candidates):
            chosen.append(-1)
            continue
        x = (r.candidates - scorer.mean) / np.array(scorer.scale)
        chosen.append(int(np.argmax(x @ np.array(scorer.coef) + scorer.intercept)))
    return chosen


def fit_scorer(readings: Sequence[Reading], C: float = C) -> Logistic:
    """The candidate scorer, fitted on the readings' candidates, each question weighing the same."""
    kept = [r for r in readings if len(r.candidates)]
    X = np.vstack([r.candidates for r in kept])
    y = np.concatenate([r.right for r in kept])
    weights = np.concatenate([np.full(len(r.candidates), 1.0 / math.sqrt(len(r.candidates))) for r in kept])
    return fit_logistic(X, y, C, weights)


def fit_operands(readings: Sequence[Reading]) -> dict:
    """The row and column models, fitted on the readings whose operands were found in the tables."""
    labelled = [r for r in readings if r.row_labels.any()]
    if not labelled:
        return {}
    rows = fit_logistic(
        np.vstack([r.rows for r in labelled]), np.concatenate([r.row_labels for r in labelled])
    )
    columns = fit_logistic(
        np.vstack([r.columns for r in labelled]), np.concatenate([r.column_labels for r in labelled])
    )
    return {"row": rows.to_dict(), "column": columns.to_dict()}


Progress = Callable[[int], None] | None


def right_answers(dataset, qid: str, texts: Sequence[str]) -> np.ndarray:
    """Whether each of ``texts`` answers question ``qid`` right: by the dataset's own metric
    (TAT-QA: an exact match, or a text span's F1 of 0.6 and more), else by eval's relaxed
    accuracy or containment of a reference."""
    from pagesight.eval.answers import DATASET_METRICS, contains, relaxed_accuracy

    row = dataset.answers[qid]
    if dataset.answer_metric in DATASET_METRICS:
        score, _ = DATASET_METRICS[dataset.answer_metric]
        found = []
        for text in texts:
            s = score(text, row)
            found.append(s["tatqa_em"] == 1 or s["tatqa_f1"] >= 0.6)
        return np.array(found, dtype=bool)
    references = dataset.references(qid)
    return np.array(
        [max(relaxed_accuracy(t, references), contains(t, references)) == 1 for t in texts], dtype=bool
    )


@dataclass
class Judged:
    """A question to read: its set, id, text, context, document group and gold figures."""

    dataset: object
    qid: str
    question: str
    context: list
    group: str
    operation: str | None
    form: str
    wanted: list[float]


def judged_questions(dataset, index, depth: int = 5) -> list[Judged]:
    """Every question of ``dataset`` with a reference answer, with the first ``depth`` of its gold
    pages' tiles as the context (eval's ``oracle``), in the order of its answers."""
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
        gold = {c for c, grade in dataset.qrels.get(qid, {}).items() if grade > 0}
        hits = oracle(index, SearchRequest(dataset.queries[qid]), gold, unit, held)[:depth]
        if not hits:
            continue
        fields = dataset.fields.get(qid, {})
        answer = dataset.answers[qid]["answer"]
        found.append(
            Judged(
                dataset,
                qid,
                dataset.queries[qid],
                build_context(index, hits),
                f"{dataset.name}/{hits[0].doc_id}",
                operation_of(fields, answer) if fields.get("answer_type") else None,
                form_of(answer, dataset.references(qid)),
                operand_values(fields, answer),
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
                right_answers(j.dataset, j.qid, texts) if texts else np.zeros(0, dtype=bool),
                texts,
            )
        )
        if progress:
            progress(n)
    return found


@dataclass
class Fitted:
    """The fitted reader (``model``: what ``reader.json`` holds) and its held-out figures by set:
    questions, right answers chosen, and questions some candidate answered right."""

    model: dict
    held_out: dict[str, dict[str, float]]
    answers: dict[tuple[str, str], str] = field(default_factory=dict)  # (set, question id): held out


def fit_reader(
    judged: Sequence[Judged],
    reader_for: Callable[[dict], object],
    folds: int = FOLDS,
    progress: Progress = None,
) -> Fitted:
    """The reader fitted on ``judged`` questions, measured by group folds over their documents
    (see the module's docstring)."""
    bins = groups_of(judged, folds)
    fold_of = {group: k for k, members in enumerate(bins) for group in members}
    # the operands' features depend on no model: read once for the row and column labels
    plain = read(judged, reader_for, {})
    readings: list[Reading | None] = [None] * len(judged)
    done = 0
    for k in range(folds):
        train = [j for j in judged if fold_of[j.group] != k]
        model = _models(train, [r for r, j in zip(plain, judged) if fold_of[j.group] != k])
        held = [i for i, j in enumerate(judged) if fold_of[j.group] == k]
        for i, reading in zip(held, read([judged[i] for i in held], reader_for, model)):
            readings[i] = reading
        done += len(held)
        if progress:
            progress(done)
    scored = [r for r in readings if r is not None]
    held_out: dict[str, dict[str, float]] = {}
    chosen = [0] * len(scored)
    for k in range(folds):
        train = [r for r, j in zip(scored, judged) if fold_of[j.group] != k]
        scorer = fit_scorer(train)
        test = [i for i, j in enumerate(judged) if fold_of[j.group] == k]
        for i, c in zip(test, choose([scored[i] for i in test], scorer)):
            chosen[i] = c
    answers = {}
    for j, r, c in zip(judged, scored, chosen):
        name = j.dataset.name
        answers[name, j.qid] = r.answers[c] if c >= 0 else ""
        entry = held_out.setdefault(name, {"questions": 0, "right": 0, "reachable": 0})
        entry["questions"] += 1
        entry["right"] += bool(c >= 0 and r.right[c])
        entry["reachable"] += bool(r.right.any())
    model = _models(judged, plain)
    model["scorer"] = fit_scorer(scored).to_dict()
    return Fitted(model, held_out, answers)


def _models(judged: Sequence[Judged], plain: Sequence[Reading]) -> dict:
    """The question model (its operation head fitted on the questions whose operation is known,
    its form head on all) and the row and column models fitted on ``plain`` readings."""
    labelled = [j for j in judged if j.operation is not None]
    question = {}
    if labelled:
        question["operation"] = fit_head([j.question for j in labelled], [j.operation for j in labelled])
    if len({j.form for j in judged}) > 1:
        question["form"] = fit_head([j.question for j in judged], [j.form for j in judged])
    return {"question": question, **fit_operands(plain)}
