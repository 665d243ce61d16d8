"""Judges of answers: a model on an OpenAI-compatible endpoint, asked at temperature 0, grades an
answer against the reference answers (joined by OR: any one is enough).

- ``binary``: YES or NO, whether the answer conveys what the reference does (IRPAPERS' alignment).
- ``graded``: CORRECT, PARTIALLY_CORRECT or INCORRECT (ViDoRe V3's three grades; 1, 0.5, 0).
- ``simpleqa``: CORRECT, INCORRECT or NOT_ATTEMPTED (SimpleQA's grades, as PixelRAG uses them): an
  answer that commits to nothing is not attempted rather than wrong.

The prompts are this project's wording. An empty answer is graded without asking (NOT_ATTEMPTED,
INCORRECT or NO), so a reader that abstains with no text is counted as not attempting. A
multiple-choice question is graded by its letter, without a model. The model's thinking is
removed from its reply before the grade is read; a reply that names no grade is UNREADABLE (0).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pagesight.answer.prompts import strip_thinking
from pagesight.errors import PagesightError

JUDGES = ("binary", "graded", "simpleqa")
UNREADABLE = "UNREADABLE"
SCORES = {
    "YES": 1.0,
    "NO": 0.0,
    "CORRECT": 1.0,
    "PARTIALLY_CORRECT": 0.5,
    "INCORRECT": 0.0,
    "NOT_ATTEMPTED": 0.0,
    UNREADABLE: 0.0,
}
LABELS = {
    "binary": ("YES", "NO"),
    "graded": ("CORRECT", "PARTIALLY_CORRECT", "INCORRECT"),
    "simpleqa": ("CORRECT", "INCORRECT", "NOT_ATTEMPTED"),
}
# the grade of a right answer, of a wrong one, and of an empty one (or no letter chosen)
OUTCOMES = {
    "binary": ("YES", "NO", "NO"),
    "graded": ("CORRECT", "INCORRECT", "INCORRECT"),
    "simpleqa": ("CORRECT", "INCORRECT", "NOT_ATTEMPTED"),
}

_OPENING = """You are grading the answer a question-answering system gave, against the reference.

Question: {question}
Reference answer: {reference}
Answer to grade: {answer}

When several reference answers are joined by OR, agreeing with any one of them is enough. Other
wording, a number rounded no further than the reference's precision, units written otherwise and
extra detail that does not contradict the reference are all fine.
"""
PROMPTS = {
    "binary": _OPENING
    + """
Does the answer convey the same information as the reference? A contradiction, a missing key
fact or a refusal does not. Reply with one word: YES or NO.""",
    "graded": _OPENING
    + """
Grade it:
CORRECT: it states what the reference states.
PARTIALLY_CORRECT: it states part of it, or something close but imprecise, contradicting nothing.
INCORRECT: it contradicts the reference, misses its key fact, or gives no answer.
Reply with the grade alone: CORRECT, PARTIALLY_CORRECT or INCORRECT.""",
    "simpleqa": _OPENING
    + """
Grade it:
CORRECT: it commits to an answer that holds the reference's key information and contradicts none.
INCORRECT: it commits to something the reference contradicts, even with hedging, or to several
answers of which some are wrong.
NOT_ATTEMPTED: it commits to no answer: it says it does not know, that the pages do not say, or asks
for more, and states nothing the reference contradicts.
Reply with the grade alone: CORRECT, INCORRECT or NOT_ATTEMPTED.""",
}
_GRADE = re.compile(r"\b(PARTIALLY[ _-]CORRECT|NOT[ _-]ATTEMPTED|INCORRECT|CORRECT|YES|NO)\b")


@dataclass
class Grade:
    label: str  # one of the judge's grades, or UNREADABLE
    reply: str = ""  # what the model said (empty when no model was asked)

    @property
    def score(self) -> float:
        return SCORES[self.label]


class Judge:
    """Grades answers with ``complete`` (a prompt to the model's reply, at temperature 0)."""

    def __init__(self, kind: str, complete: Callable[[str], str]):
        if kind not in JUDGES:
            raise PagesightError(f"judge must be one of {', '.join(JUDGES)}, got '{kind}'")
        self.kind, self.complete = kind, complete

    @property
    def labels(self) -> tuple[str, ...]:
        return (*LABELS[self.kind], UNREADABLE)

    def __call__(self, question: str, references: Sequence[str], answer: str) -> Grade:
        answer = strip_thinking(answer)
        if not answer:
            return Grade(OUTCOMES[self.kind][2])
        prompt = PROMPTS[self.kind].format(
            question=question, reference=" OR ".join(references), answer=answer
        )
        reply = self.complete(prompt)
        return Grade(read_grade(reply, self.kind), reply)

    def choice(self, chosen: str | None, letter: str) -> Grade:
        """A multiple-choice answer graded by its letter: right, wrong, or none chosen."""
        right, wrong, empty = OUTCOMES[self.kind]
        return Grade(empty if chosen is None else right if chosen == letter else wrong)


def read_grade(reply: str, kind: str) -> str:
    """The first grade of judge ``kind`` that ``reply`` names (its thinking left out), or UNREADABLE."""
    for match in _GRADE.finditer(strip_thinking(reply).upper()):
        label = re.sub(r"[ -]", "_", match.group(1))
        if label in LABELS[kind]:
            return label
    return UNREADABLE


def openai_judge(kind: str, model: str, base_url: str | None = None, api_key: str | None = None) -> Judge:
    """A judge of ``kind`` asking ``model`` on an OpenAI-compatible endpoint, at temperature 0; an
    endpoint that cannot be reached is refused now, before any question is searched or answered."""
    from pagesight.answer import make_reader

    options = {"model": model, "temperature": 0.0, "base_url": base_url, "api_key": api_key}
    reader = make_reader("openai", **{key: value for key, value in options.items() if value is not None})
    _reachable(reader.base_url)
    return Judge(kind, reader.chat)


def _reachable(base_url: str, timeout: float = 5.0) -> None:
    """Refuse, in one line saying what to do, a judge endpoint whose host takes no connection."""
    import socket
    from urllib.parse import urlparse

    address = urlparse(base_url)
    port = address.port or (443 if address.scheme == "https" else 80)
    try:
        socket.create_connection((address.hostname, port), timeout=timeout).close()
    except OSError as exc:
        raise PagesightError(
            f"the judge's endpoint {base_url} cannot be reached ({exc}): give the judge's own with "
            "--judge-base-url URL (or --base-url, or PAGESIGHT_OPENAI_BASE_URL)"
        ) from None
