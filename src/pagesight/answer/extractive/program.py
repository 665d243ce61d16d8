"""A question read once into a typed program: the operation it asks for, the periods it names,
the scale it wants its figure in, and a formula it writes out.

The operation is predicted by a model fitted on questions whose answers say how they were
computed (TAT-QA's derivations and answer types: ``pagesight fit-reader``), not by patterns of
their wording: a multinomial logistic regression over the question's words and word pairs (stems,
years and other numbers as placeholders) and its first words. Its probabilities are kept
(``Program.probabilities``): the reader computes the answer of every operation likely enough and
lets its candidate scorer choose between them, so a question read as a lookup and as a change
both get their candidates.

``OPERATIONS``:

- ``span``: a cell, a sentence or a part of one, read as it is printed;
- ``values``: several cells, in the order the question names them ("in 2019 and 2018
  respectively");
- ``years``: the periods a table's columns are headed by;
- ``list``: several items: the rows under a heading, or a sentence's list;
- ``largest``, ``smallest``: the period whose figure is the largest or smallest;
- ``count``: how many rows a section has, or how many periods' figures pass a bound the question
  writes (above it or below: both are offered, the scorer weighs which);
- ``change``: one figure less another (a later period's less an earlier's);
- ``percent_change``: that change over the earlier figure, in percent;
- ``average``, ``sum``: of the figures named;
- ``ratio``: one figure over another; ``share``: the same in percent;
- ``formula``: arithmetic the question writes out between named figures.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

import numpy as np

from pagesight.encode.lexical import stemmer

OPERATIONS = (
    "span",
    "values",
    "years",
    "list",
    "largest",
    "smallest",
    "count",
    "change",
    "percent_change",
    "average",
    "sum",
    "ratio",
    "share",
    "formula",
)
# operations whose answer is computed from figures, and the number of figures each takes (None: two
# or more)
ARITHMETIC = {
    "change": 2,
    "percent_change": 2,
    "average": None,
    "sum": None,
    "ratio": 2,
    "share": 2,
}
MODEL = Path(__file__).with_name("reader.json")

# the words of a question, and the figures and symbols it writes: what the question model reads
_TOKEN = re.compile(r"[^\W\d_]+|\d+(?:,\d{3}(?!\d))*(?:\.\d+)?|[%$€£*/+=×÷]")
# a period a question or a heading names: a year, alone or in a fiscal form (FY2019, FY19, '19)
PERIOD = re.compile(
    r"(?<![\w.,])(?:(?:FY|CY) ?(\d\d(?:\d\d)?)|['’](\d\d)|((?:19|20)\d\d))(?!\d|[,.]\d)", re.I
)
# a scale a figure is given in ("in millions", "USD thousands")
SCALE = re.compile(r"\b(thousand|million|billion)s?\b", re.IGNORECASE)
# arithmetic between words, spaced as a formula is written ("= revenue / total assets"; not "and/or")
_OPERATOR = re.compile(r"\S\s[*/×÷+]\s\S")
HASHED = 1 << 14  # the question model's feature space: word and pair hashes
PREFIX = 5  # letters of a stem that also count as a word of their own (question_features)
FORMS = ("number", "date", "name", "text")  # what an answer is: a figure, a date, a name or words
# a year or a date alone: "1966", "12/05/2022", "May 12, 2022", "12 May 2022", "FY2019"
_DATE = re.compile(
    r"^(?:FY ?)?(?:19|20)\d\d$|^\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}$"
    r"|^(?:\d{1,2} )?[A-Z][a-z]+\.?(?: \d{1,2},?)? (?:19|20)\d\d$"
)
# a figure: a number with at most a currency, a sign, a unit or a scale word ("$11.8 billion", "1.2 kg")
_NUMBER = re.compile(r"^[-+(]?[$€£¥]?\s?[-+(]?\d[\d,]*(?:\.\d+)?\)?%?(?: \S+){0,2}$")


@dataclass(frozen=True)
class Program:
    """What a question asks for (``OPERATIONS``), most likely first, with each operation's
    probability; the periods it names in its order (``years``), the scale it asks its figure in
    (None: the cells'), the formula it writes out, and the other figures it writes (``bounds``)."""

    operation: str
    probabilities: dict[str, float] = field(default_factory=dict)
    years: tuple[str, ...] = ()
    scale: str | None = None
    formula: str | None = None
    forms: dict[str, float] = field(default_factory=dict)  # each answer form's probability (``FORMS``)
    bounds: tuple[float, ...] = ()  # the figures it writes that are no periods ("exceed $5,000")

    def likely(self, floor: float) -> list[str]:
        """The operations at least ``floor`` likely, the most likely first (and always it)."""
        ranked = sorted(self.probabilities, key=self.probabilities.get, reverse=True)
        return [op for op in ranked if op == self.operation or self.probabilities[op] >= floor]


def read_question(question: str, fitted: dict | None = None) -> Program:
    """The program of ``question``: its operation and the form of its answer by the fitted
    question model (``fitted``; None: the packaged one; empty: every one alike), its periods,
    scale and formula read from its figures and symbols."""
    if fitted is None:
        fitted = reader_model()["question"]
    years = tuple(dict.fromkeys(full_year(m) for m in PERIOD.finditer(question)))
    scale = SCALE.search(question)
    formula = written_formula(question)
    x = hashed(question_features(question))
    probabilities = _probabilities(x, fitted.get("operation"), OPERATIONS)
    if formula is not None:
        probabilities = {op: 0.0 for op in probabilities} | {"formula": 1.0}
    forms = _probabilities(x, fitted.get("form"), FORMS)
    operation = max(probabilities, key=probabilities.get)
    bounds = tuple(
        float(token.replace(",", ""))
        for token in _TOKEN.findall(question)
        if token[0].isdigit() and not PERIOD.fullmatch(token)
    )
    scaled = scale.group(1).lower() if scale else None
    return Program(operation, probabilities, years, scaled, formula, forms, bounds)


@lru_cache(maxsize=1 << 16)
def form(text: str) -> str:
    """What an answer is (``FORMS``): a date when it is a year or a date, a number when a figure,
    a name when a few words each capitalised ("Hugo Kestrel", "Umeå", "Level 4"), words
    otherwise; several spans (separated by semicolons or lines) are text unless alike."""
    spans = [span.strip() for span in text.replace("\n", ";").split(";") if span.strip()]
    forms = {_form(span) for span in spans}
    return forms.pop() if len(forms) == 1 else "text"


def _form(span: str) -> str:
    if _DATE.match(span):
        return "date"
    if _NUMBER.match(span):
        return "number"
    words = span.split()
    return "name" if len(words) <= 4 and all(w[:1].isupper() or w[:1].isdigit() for w in words) else "text"


def full_year(match: re.Match) -> str:
    """The four-digit year of a ``PERIOD`` match ("FY19" -> "2019")."""
    year = next(group for group in match.groups() if group)
    return year if len(year) == 4 else f"20{year}"


def written_formula(question: str) -> str | None:
    """The arithmetic a question writes out between named figures: what follows its last colon or
    equals sign to the end of that sentence, when it holds a *, / or + between words; None when it
    writes none out."""
    before, colon, formula = question.replace("=", ":").rpartition(":")
    formula = formula.replace("? ", ". ").split(". ")[0]  # to the end of its sentence
    if not colon or not _OPERATOR.search(formula):
        return None
    return formula.strip().rstrip("?. ")


def question_features(question: str) -> list[str]:
    """What the question model reads: the question's stems (years "<year>", other numbers "<num>"),
    each pair of neighbours, the same by the stems' first ``PREFIX`` letters (a word's kin read
    alike: "percent" and "percentage", "decrease" and "decreased"), its first two words, and how
    many periods it names."""
    words = []
    for token in _TOKEN.findall(question.lower()):
        if token[0].isdigit():
            words.append("<year>" if PERIOD.fullmatch(token) else "<num>")
        else:
            words.append(token)
    stems = stemmer("en").stemWords(words)
    found = [f"w:{s}" for s in stems]
    found += [f"p:{a} {b}" for a, b in zip(stems, stems[1:])]
    heads = [stem[:PREFIX] if stem[:1] != "<" else stem for stem in stems]
    found += [f"h:{h}" for h, stem in zip(heads, stems) if h != stem]
    pairs = zip(heads, heads[1:], stems, stems[1:])
    found += [f"q:{a} {b}" for a, b, x, y in pairs if (a, b) != (x, y)]
    found += [f"s:{' '.join(stems[:n])}" for n in (1, 2)]
    periods = len({full_year(m) for m in PERIOD.finditer(question)})
    found.append(f"y:{min(periods, 3)}")
    return found


def hashed(features: list[str]) -> np.ndarray:
    """``features`` counted into ``HASHED`` buckets (CRC-32: the same in every process)."""
    x = np.zeros(HASHED, dtype=np.float32)
    for feature in features:
        x[zlib.crc32(feature.encode()) % HASHED] += 1.0
    norm = np.linalg.norm(x)
    return x / norm if norm else x


def _probabilities(x: np.ndarray, fitted: dict | None, classes: tuple[str, ...]) -> dict[str, float]:
    """Each class's probability under the multinomial model ``fitted`` for the hashed features
    ``x`` (every class alike without one)."""
    if not fitted:
        return {name: 1.0 / len(classes) for name in classes}
    weights = fitted["weights"]
    z = np.array(fitted["intercept"], dtype=np.float64)
    for bucket in np.flatnonzero(x):
        row = weights.get(str(bucket))
        if row is not None:
            z += x[bucket] * np.asarray(row)
    if len(fitted["classes"]) == 2 and len(z) == 1:  # a binary model: one row of weights
        z = np.array([0.0, z[0]])
    z -= z.max()
    p = np.exp(z) / np.exp(z).sum()
    found = {name: 0.0 for name in classes}
    found.update({name: float(p[k]) for k, name in enumerate(fitted["classes"])})
    return found


@cache
def reader_model() -> dict:
    """The fitted reader (``pagesight fit-reader``): its question model, candidate scorer and
    support model, as ``reader.json`` beside this module holds them."""
    return json.loads(MODEL.read_text())
