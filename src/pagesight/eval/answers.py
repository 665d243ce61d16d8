"""Answer metrics: exact match and token F1 (SQuAD), relaxed accuracy (ChartQA, VisRAG), LLM judge.

The judge follows the IRPAPERS answer-alignment protocol: a model is shown the question, the
reference answer and the system's answer and says whether the system's answer conveys the same
information as the reference (wording may differ, contradictions or missing key facts may not);
three independent verdicts are asked for and the majority decides. The model is any callable from
a prompt to its text reply, such as the ``openai`` reader's chat completion.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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


JUDGE_PROMPT = """You are judging a question-answering system.

Question: {question}
Reference answer: {reference}
System answer: {answer}

Does the system answer convey the same information as the reference answer? Different wording,
extra detail that does not contradict the reference, and equivalent numbers or units are fine. A
contradiction, a missing key fact or a refusal is not.
Reply with one word: YES or NO."""


@dataclass
class Verdict:
    aligned: bool
    votes: list[bool | None]  # None: a reply that said neither yes nor no
    replies: list[str]


class LLMJudge:
    def __init__(self, complete: Callable[[str], str], votes: int = 3):
        if votes < 1 or votes % 2 == 0:
            raise ValueError("votes must be a positive odd number, so a majority exists")
        self.complete = complete
        self.votes = votes

    def __call__(self, question: str, reference: str, answer: str) -> Verdict:
        prompt = JUDGE_PROMPT.format(question=question, reference=reference, answer=answer)
        replies = [self.complete(prompt) for _ in range(self.votes)]
        votes = [_vote(reply) for reply in replies]
        return Verdict(sum(vote is True for vote in votes) * 2 > self.votes, votes, replies)


def openai_judge(model: str, base_url: str | None = None) -> LLMJudge:
    """A judge asking ``model`` on an OpenAI-compatible endpoint, three sampled votes."""
    from pagesight.answer import make_reader

    # sampled, so that the three votes of the majority are three draws, not one answer thrice
    options = {"model": model, "temperature": 0.7}
    if base_url:
        options["base_url"] = base_url
    return LLMJudge(make_reader("openai", **options).chat)


def _vote(reply: str) -> bool | None:
    words = re.findall(r"[a-z]+", reply.lower())
    for word in words:
        if word in ("yes", "aligned", "true"):
            return True
        if word in ("no", "not", "false"):
            return False
    return None
