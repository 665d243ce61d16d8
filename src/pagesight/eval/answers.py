"""Answer metrics: exact match and token F1 (SQuAD), relaxed accuracy (ChartQA, VisRAG),
containment, and multiple choice scored by letter (LiveVQA, ArxivQA); the judges are in ``judges.py``;
a dataset's own metric, which its dataset.json declares (TAT-QA's: ``tatqa.py``), beside them.

Every metric takes several reference answers (aliases, NQ's way): a prediction matching any one of
them scores. A reasoning model's ``<think>...</think>`` is removed before anything is scored.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from pagesight.answer.prompts import strip_thinking
from pagesight.eval import tatqa

# a dataset's own answer metric, as its dataset.json names it: its scores of a prediction against
# the question's answers.jsonl row (and whether it was answered), and the score that says an
# answer is right
DATASET_METRICS = {"tatqa": (tatqa.scores, "tatqa_em")}
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")


def normalize(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, references: str | Sequence[str]) -> float:
    refs = [references] if isinstance(references, str) else references
    return float(any(normalize(prediction) == normalize(ref) for ref in refs))


def token_f1(prediction: str, references: str | Sequence[str]) -> float:
    refs = [references] if isinstance(references, str) else references
    return max(_f1(normalize(prediction).split(), normalize(ref).split()) for ref in refs)


def _f1(predicted: list[str], gold: list[str]) -> float:
    if not predicted or not gold:
        return float(predicted == gold)
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def to_number(text: str) -> float | None:
    """The number a short answer states ('1,234', '12.5%', '-3'), or None when it states none or several."""
    found = _NUMBER.findall(text)
    if len(found) != 1:
        return None
    value = float(found[0].replace(",", ""))
    return value / 100 if text.strip().endswith("%") else value


def relaxed_accuracy(prediction: str, references: str | Sequence[str], tolerance: float = 0.05) -> float:
    """ChartQA's relaxed correctness: numbers within ``tolerance`` (relative), other answers exact."""
    refs = [references] if isinstance(references, str) else references
    for ref in refs:
        target, value = to_number(ref), to_number(prediction)
        if target is not None and value is not None:
            if (value == target) if target == 0 else abs(value - target) / abs(target) <= tolerance:
                return 1.0
        elif prediction.strip().lower() == ref.strip().lower():
            return 1.0
    return 0.0


def contains(prediction: str, references: str | Sequence[str]) -> float:
    """1 when a normalised reference appears in the normalised prediction (extractive answers)."""
    refs = [references] if isinstance(references, str) else references
    padded = f" {normalize(prediction)} "
    return float(any(normalize(ref) and f" {normalize(ref)} " in padded for ref in refs))


def answer_scores(prediction: str, references: str | Sequence[str]) -> dict[str, float]:
    return {
        "exact_match": exact_match(prediction, references),
        "f1": token_f1(prediction, references),
        "relaxed_accuracy": relaxed_accuracy(prediction, references),
    }


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# a letter standing for an option: leading the answer ('B', 'B.', '(B)', 'B: ...'), named ('the
# answer is B', 'option (B)'), or in parentheses anywhere; a capital opening a sentence is none
_LETTERS = (
    re.compile(r"^\s*\(?([A-Z])(?:[.:)]|\s*$)"),
    re.compile(r"(?i:answer|option|choice)\s*(?:(?i:is)\s*)?:?\s*\(?([A-Z])(?![A-Za-z])"),
    re.compile(r"\(([A-Z])\)"),
)


def choice_question(question: str, options: Sequence[str]) -> str:
    """A multiple-choice question as a reader is asked it: the options lettered, then the instruction."""
    lines = [f"{LETTERS[n]}. {option}" for n, option in enumerate(options)]
    return "\n".join([question, "Options:", *lines, "Answer with the letter of the right option."])


def chosen_letter(prediction: str, options: Sequence[str]) -> str | None:
    """The option a prediction chose: a letter of an option standing for it ('B', '(B)', 'B.', 'the
    answer is B'), else the one option whose text the prediction contains; None when neither tells."""
    prediction = strip_thinking(prediction)
    letters = LETTERS[: len(options)]
    for pattern in _LETTERS:
        found = [match.group(1) for match in pattern.finditer(prediction) if match.group(1) in letters]
        if found:
            return found[0]
    padded = f" {normalize(prediction)} "
    found = [letter for letter, option in zip(letters, options) if f" {normalize(option)} " in padded]
    return found[0] if len(found) == 1 else None


def scores(
    prediction: str, references: Sequence[str], options: Sequence[str] | None = None
) -> dict[str, float]:
    """Every metric of one answer (``<think>`` removed): exact match, F1, relaxed accuracy and
    containment against any of ``references``; for a multiple-choice question (``options``, the
    references being its letter) each is whether the letter chosen is the reference's."""
    prediction = strip_thinking(prediction)
    if options:
        right = float(chosen_letter(prediction, options) in references)
        return dict.fromkeys(("exact_match", "f1", "relaxed_accuracy", "contains"), right)
    return {**answer_scores(prediction, references), "contains": contains(prediction, references)}
