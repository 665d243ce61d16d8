"""The labels ``pagesight fit-reader`` reads from a dataset's answers: the operation a TAT-QA
derivation shows (``program.OPERATIONS``), the figures it took (a row's or column's gold operands),
whether a cell holds one of them, the form of an answer, and which candidates answer right and
which of those the scorer learns to prefer."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

import numpy as np

from pagesight.answer.extractive.program import form

YEAR = re.compile(r"^(?:19|20)\d\d$")
_SPAN_FIGURE = re.compile(r"^[-$€£()\d.,% ]+$")


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
    if not texts and fields.get("answer_type") in (
        "span",
        "multi-span",
        None,
    ):  # a figure answered as printed
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


def form_of(answer: str | list[str], references: Sequence[str]) -> str:
    """What an answer is (``program.FORMS``, by ``program.form``): its spans' form."""
    answers = answer if isinstance(answer, list) else [answer]
    spans = [str(a).strip() for a in answers if str(a).strip()] or list(references)
    return form("; ".join(spans))


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


def whole(dataset, qid: str, texts: Sequence[str], right: np.ndarray) -> np.ndarray:
    """The right answers that state a reference whole, where one does (its unit too: "1,536
    bytes" for "1,536 bytes", where "1,536" is right by relaxed accuracy only); else the right
    ones. TAT-QA's metric judges a figure's scale itself."""
    from pagesight.eval.answers import DATASET_METRICS, contains

    if dataset.answer_metric in DATASET_METRICS or not right.any():
        return right
    references = dataset.references(qid)
    stated = right & np.array([contains(t, references) == 1 for t in texts], dtype=bool)
    return stated if stated.any() else right
