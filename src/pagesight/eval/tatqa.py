"""TAT-QA's answer metric (Zhu et al., ACL 2021): exact match and a numeracy-aware F1, computed as
the authors' evaluation script computes them (NExTplusplus/TAT-QA, ``tatqa_eval.py``), so figures
measured here compare with the published ones.

- **Answers as strings.** The gold answer's spans (one for a span, several for a multi-span, the
  figure for arithmetic and count) are sorted and each written out: a span that reads as a number
  becomes that number with the answer's ``scale`` applied (thousand, million, billion; percent as
  a hundredth), to four decimals; another span keeps its words, with the scale's word after it.
  The spans are then joined by a space, so a multi-span answer is compared as the set of its spans
  (their order does not matter) and scored on its words as one bag, which is what the script's
  DROP alignment reduces to when each side is one string.
- **The prediction** is a reader's text, its spans separated by line breaks or semicolons. It has
  no scale of its own: its words carry it, as the script reads a prediction given without one.
  ``"1,234 million"`` is 1.234e9 and ``"12.5%"`` is 0.125 (a scale word right after the first
  number, a per-cent sign, a figure in brackets without a thousands comma negative), and a
  single bare number is also tried as it stands, so 0.2342 matches 23.42 per cent.
- **Normalisation**, word by word: lower case, punctuation dropped from a word that is not a
  number, a number written as its value, articles dropped.
- **Scores.** Exact match: the normalised strings equal. F1: the harmonic mean of precision and
  recall of the two sets of words, rounded to two decimals; for arithmetic and count answers F1 is
  the exact match. The best of the prediction's readings counts, exact match first.

A declined answer, or an empty one, scores 0. A number that reads oddly is scored as the script
scores it (``"(1,234)"`` is positive, ``".5"`` is no number), whatever a reader would mean.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence

import numpy as np

# a scale word, found inside a longer word as the script finds it ("millions", "percentage")
SCALES: dict[str, int | float] = {
    "hundred": 100,
    "thousand": 1_000,
    "million": 1_000_000,
    "billion": 1_000_000_000,
    "percent": 0.01,
}
NUMERIC_TYPES = ("arithmetic", "count")  # answer types whose F1 is their exact match

_NOT_DIGITS = str.maketrans("", "", "'\"\\$€£¥%(),[]")  # dropped from a word before it is read
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_FIRST_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?|[+-]?\.\d+")
_SCALED = re.compile(r"[\d.]+\s?[a-zA-Z]+")  # a number and the word after it
_BRACKETED = re.compile(r"\([\d.\s]+\)")  # (134): negative
_PER_CENT = re.compile(r"[\d.\s]+%")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_SPANS = re.compile(r"\n|;")  # what separates a prediction's spans


def scale_factor(word: str) -> int | float:
    """The factor a scale word stands for (the first of ``SCALES`` it contains), else 1."""
    word = word.lower()
    return next((factor for name, factor in SCALES.items() if name in word), 1)


def is_number(text: str) -> bool:
    """Whether ``text`` reads as a number: its first word (without currency signs, brackets,
    commas, quotes or %) parses as one, and its second word, if any, is a scale word."""
    words = text.translate(_NOT_DIGITS).split()
    if not words:
        return False
    try:
        value = float(words[0])
    except ValueError:
        return False
    return not math.isnan(value) and (len(words) < 2 or scale_factor(words[1]) != 1)


def to_number(text: str) -> int | float | None:
    """The value ``text`` states: its first number, times the scale word after a number, negative
    in brackets, a hundredth with %; rounded to 4 decimals. None when it starts with no digit."""
    match = _FIRST_NUMBER.search(text.translate(_NOT_DIGITS))
    if match is None or match.group().lstrip("+-").startswith("."):
        return None
    found = match.group()
    value = float(found) if "." in found else int(found)
    scaled = _SCALED.search(text)
    factor = scale_factor(scaled.group()) if scaled else 1
    stripped = text.strip()
    sign = -1 if _BRACKETED.search(stripped) else 1
    per_cent = 0.01 if _PER_CENT.search(stripped) else 1
    return round(value * factor * sign * per_cent, 4)


def normalize(text: str) -> str:
    """Each word (split at single spaces) lower-cased, its punctuation dropped unless it is a
    number, a number written as its value, articles dropped; the words joined by single spaces."""
    words = []
    for word in text.split(" "):
        word = word.lower()
        if not is_number(word):
            word = word.translate(_PUNCTUATION)
        if is_number(word):
            word = str(to_number(word))
        word = " ".join(_ARTICLES.sub(" ", word).split())
        if word:
            words.append(word)
    return " ".join(words)


def answer_string(spans: Sequence[str], scale: str) -> str:
    """The spans sorted, each a number with ``scale`` applied (to 4 decimals) or its words with the
    scale's, joined by spaces: the string an answer is compared as."""
    written = []
    for span in sorted(spans):
        value = to_number(span) if is_number(span) else None
        if value is None:
            written.append(f"{span} {scale}" if scale else span)
        elif "%" in span:  # the span gives its own scale
            written.append(f"{value:.4f}")
        else:
            written.append(f"{round(value, 2) * scale_factor(scale):.4f}")
    return " ".join(written)


def _f1(predicted: set[str], gold: set[str]) -> float:
    common = len(predicted & gold)
    precision = common / len(predicted) if predicted else 1.0
    recall = common / len(gold) if gold else 1.0
    return 0.0 if precision == recall == 0 else 2 * precision * recall / (precision + recall)


def match(predicted: str, gold: str) -> tuple[float, float]:
    """Exact match and F1 (rounded to 2 decimals) of two answer strings."""
    predicted, gold = normalize(predicted), normalize(gold)
    f1 = float(np.round(_f1(set(predicted.split()), set(gold.split())), 2))
    return float(predicted == gold), f1


def spans_of(prediction: str) -> list[str]:
    """A prediction's spans: its parts between line breaks and semicolons, stripped."""
    return [part.strip() for part in _SPANS.split(prediction) if part.strip()]


def gold_spans(answer: str | Sequence[str], answer_type: str | None) -> list[str]:
    """The spans of a gold answer: a list as it is; a count as a whole number."""
    if isinstance(answer, str):
        return [str(int(float(answer)))] if answer_type == "count" else [answer]
    return [str(span) for span in answer]


def em_f1(
    prediction: str, answer: str | Sequence[str], scale: str = "", answer_type: str | None = None
) -> tuple[float, float]:
    """TAT-QA's exact match and F1 of a reader's text against a gold answer (its spans, scale and
    type, as answers.jsonl's TAT-QA rows hold them)."""
    spans = spans_of(prediction)
    if not spans:
        return 0.0, 0.0
    gold = answer_string(gold_spans(answer, answer_type), scale)
    readings = [answer_string(spans, "")]
    if len(spans) == 1 and "%" not in spans[0] and is_number(spans[0]):  # a bare number as it stands
        value = to_number(spans[0])
        if value is not None:
            readings.append(f"{value:.4f}")
    exact, f1 = max(match(reading, gold) for reading in readings)
    return exact, exact if answer_type in NUMERIC_TYPES else f1


def scores(prediction: str, row: dict, answered: bool = True) -> dict[str, float]:
    """``tatqa_em`` and ``tatqa_f1`` of a prediction against an answers.jsonl row (``answer``,
    ``scale``, ``answer_type``); a declined answer scores 0."""
    exact, f1 = (
        em_f1(prediction, row["answer"], row.get("scale") or "", row.get("answer_type"))
        if answered
        else (0.0, 0.0)
    )
    return {"tatqa_em": exact, "tatqa_f1": f1}
