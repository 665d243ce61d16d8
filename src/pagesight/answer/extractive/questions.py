"""The extractive reader's questions: what kind of answer a question asks for (an amount, a rate, a
date, a place, a person, a name), its subject and the words that stand for its terms, and whether
a candidate holds that kind, names it in a label or states it of the subject."""

from __future__ import annotations

import re

from pagesight.answer.extractive.lines import (
    DATE,
    PRINTED_YEAR,
    AnswerCandidate,
    is_number,
)
from pagesight.encode.lexical import terms

WORD = re.compile(r"(?u)\w+")


_NUMBER_WORDS = frozenset(
    [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "sixty",
        "seventy",
        "eighty",
        "ninety",
        "hundred",
        "thousand",
        "million",
        "billion",
        "dozen",
        "half",
        "percent",
    ]
)


_AMOUNT = re.compile(r"[$€£¥]?\d[\d,]*(?:\.\d+)?(?:\s?%|\s?percent\b|\s?per cent\b)?", re.IGNORECASE)


_MONTHS = re.compile(
    r"\b(jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sep(tember)?|oct(ober)?"
    r"|nov(ember)?|dec(ember)?)\b",
    re.IGNORECASE,
)


_QUANTITY = re.compile(
    r"^\s*(how (many|much|large|long|big|far|often|old|tall|wide|high|fast|heavy)|by how much"
    r"|what (is the |was the |are the |were the )?(number|amount|value|percentage|share|rate|size|total|"
    r"count|price|cost|ratio|proportion|fraction|score|accuracy|dimension|resolution)"
    r"|at what (resolution|rate|size|speed|temperature|price|cost))",
    re.IGNORECASE,
)


_MEASURE = re.compile(
    r"\b(revenue|sales|income|profit|loss|cost|price|budget|spend|salary|wage|fee|tax|margin|growth|"
    r"temperature|weight|height|length|width|depth|distance|duration|speed|latency|throughput|"
    r"population|headcount|percentage|percent|share|rate|ratio|score|accuracy|recall|precision|count|"
    r"number|amount|total|subtotal|vat|earnings|expenditures?|dividend)s?\b",
    re.IGNORECASE,
)


# a quantity question that wants a proportion ("what VAT rate"), not an amount ("how much VAT")
RATE = re.compile(
    r"\b(rate|percentage|percent|proportion|ratio|share|interest|margin|yield)\b", re.IGNORECASE
)


_TIME = re.compile(r"^\s*(when|in what year|what year|which year|what date|on what date)\b", re.IGNORECASE)


_PLACE = re.compile(
    r"^\s*(where|from where|in (what|which) (city|country|town|region|place|state))\b"
    r"|\b(which|what) (city|country|town|region|place|state)\b",
    re.IGNORECASE,
)


_LOCATIVE = re.compile(r"\b(?:in|at|near|from|to)\s+([A-Z]\w+)")


_PERSON = re.compile(r"^\s*(who|whom|whose)\b", re.IGNORECASE)


_PERSON_NAME = re.compile(r"\b[A-Z][a-z]+\s+(?:&\s+)?[A-Z][a-z]+")


_NAME = re.compile(r"^\s*(which|what (company|supplier|organi[sz]ation|team|model|product))\b", re.IGNORECASE)


# "what does X do", "what is X", "when does X run": X, the subject the answer should be about, is
# what follows the opening up to a closing verb and the question mark (read by ``_subject``: a
# pattern with X lazy between optional ends backtracks cubically)
_SUBJECT = re.compile(r"^\s*(?:what|when|how|why)\s+(?:does|do|did|is|are|was|were)\s+", re.IGNORECASE)
_SUBJECT_VERBS = ("do", "does", "mean", "means", "run", "happen", "work", "return", "contain", "stand for")


# where the head of X ends: the first preposition or clause word between spaces
_HEAD_END = re.compile(r"\s(?:of|in|on|for|from|with|at|to|when|if|that|which)\s", re.IGNORECASE)


# words of a question that only say it is a question
ASKING = frozenset(
    terms("how much many what which who whom whose when where why were was did does do is are has have had")
)


# what a question's words ask about, in the words a label would use
_ATTRIBUTES = {
    "weigh": "weight",
    "heavi": "weight",
    "long": "length",
    "tall": "height",
    "high": "height",
    "wide": "width",
    "deep": "depth",
    "far": "distanc",
    "old": "age",
    "big": "size",
    "larg": "size",
    "cost": "price",
    "price": "cost",
}


_KIND_LABELS = {  # labels that announce a value of the kind asked for (stems)
    "time": ("date", "time", "day", "year"),
    "person": ("name", "author", "contact", "sign"),
    "place": ("place", "locat", "address", "venu"),
}


_ORDINAL_QUARTERS = {"first": "q1", "second": "q2", "third": "q3", "fourth": "q4"}


_QUARTER = re.compile(r"\b(first|second|third|fourth) quarter\b|\bq([1-4])\b", re.IGNORECASE)


_ENUMERATION = re.compile(r"^(\d+(\.\d+)*\.?|[ivxlc]+\.|\(?[a-z0-9]\))$", re.IGNORECASE)


def other_years(text: str, years: set[str]) -> bool:
    """The text names years, none of them one the question asks about."""
    found = set(PRINTED_YEAR.findall(text))
    return bool(found) and not found & years


def label_terms(question: str, asked: str | None) -> set[str]:
    """Terms a label would use for what the question asks: "how heavy" -> weight, Q4 <-> fourth
    quarter, "when" -> date."""
    found = set()
    for t in terms(question):
        if t in _ATTRIBUTES:
            found.add(_ATTRIBUTES[t])
    for match in _QUARTER.finditer(question):
        if match.group(1):
            found.add(_ORDINAL_QUARTERS[match.group(1).lower()])
        else:
            ordinal = next(k for k, v in _ORDINAL_QUARTERS.items() if v == f"q{match.group(2)}")
            found |= {ordinal, "quarter"}
    found.update(_KIND_LABELS.get(asked or "", ()))
    return found


def label_match(
    c: AnswerCandidate, wanted: set[str], idf: dict[str, float], total: float, asked: str | None
) -> float:
    """How much of the question a candidate's label names (1 when it names a kind asked for)."""
    if not c.label:
        return 0.0
    label = set(terms(c.label))
    share = sum(idf.get(t, 0.0) for t in wanted & label) / total
    if _names_kind(label, asked):
        share += 0.5
    return min(share, 1.0)


def _names_kind(label: set[str], asked: str | None) -> bool:
    """The label announces a value of the kind asked for ("Date" for "when")."""
    return asked in _KIND_LABELS and any(t.startswith(_KIND_LABELS[asked]) for t in label)


def subject_terms(question: str) -> list[str]:
    """The head of X in "what does X do", "what is X": the terms the answer should open with."""
    subject = _subject(question)
    if subject is None:
        return []
    end = _HEAD_END.search(subject)
    return terms(subject[: end.start()] if end else subject)


def _subject(question: str) -> str | None:
    """X of "what is X?", "what does X do?" (on one line), or None."""
    opening = _SUBJECT.match(question)
    if opening is None:
        return None
    subject = question[opening.end() :].rstrip()
    if subject.endswith("?"):
        subject = subject[:-1].rstrip()
    for verb in _SUBJECT_VERBS:
        before = subject[: len(subject) - len(verb)]
        if subject[-len(verb) :].lower() == verb and before[-1:].isspace() and before.strip():
            subject = before.rstrip()
            break
    return subject if subject and "\n" not in subject else None


def opens_with(text: str, subject: list[str]) -> bool:
    """``text`` opens with the subject (after an article or a section number at most)."""
    if not subject:
        return False
    words = text.split()[: len(subject) + 3]
    if words and _ENUMERATION.match(words[0]):
        words = words[1:]
    start = terms(" ".join(words[: len(subject) + 1]))
    return set(subject) <= set(start)


def answer_text(c: AnswerCandidate, question: str) -> str:
    """What to return: a table's cell, a label's value (the number of the kind asked for), or the
    candidate's text."""
    question_words = {w.lower() for w in WORD.findall(question)}
    cell = _cell(c, set(terms(question)), question_words)
    if cell:
        return cell
    if not c.value or not c.label:
        return c.answer
    asked = asked_kind(question)
    label = set(terms(c.label))
    if not label & (set(terms(question)) | label_terms(question, asked)) and not _names_kind(label, asked):
        return c.answer  # the label names something else: the whole line is the answer
    value = c.value.strip().rstrip(".;,")
    if asked == "quantity":
        rate = bool(RATE.search(question)) and not question.lower().startswith("how much")
        amounts = [m.group().strip() for m in _AMOUNT.finditer(value)]
        fitting = [a for a in amounts if _is_rate(a) == rate]
        if not fitting and amounts:
            return c.answer
        if len(amounts) > 1:
            if all(is_number(t) for t in value.split()):
                return fitting[-1]  # figures on a row: the amount is the last ("VAT 7%  1.68")
            return c.answer  # several amounts among words: which one is meant needs the words
    return value if len(value.split()) <= 8 else c.answer


def _is_rate(amount: str) -> bool:
    return amount.endswith("%") or amount.lower().endswith("cent")


def _cell(candidate: AnswerCandidate, question_terms: set[str], question_words: set[str]) -> str | None:
    """The row's cell under the one header column the question names, if it names exactly one."""
    header = candidate.header
    if not header:
        return None
    cells = candidate.answer.split()
    numeric = 0
    while numeric < len(cells) and is_number(cells[len(cells) - 1 - numeric]):
        numeric += 1
    columns = header.split()[-numeric:] if numeric else []
    if len(columns) < numeric:
        return None
    named = [
        c
        for c, name in enumerate(columns)
        if name.lower() in question_words or set(terms(name)) & question_terms
    ]
    if len(named) != 1:
        return None
    return cells[len(cells) - numeric + named[0]]


def asked_kind(question: str) -> str | None:
    """The kind of answer ``question`` asks for: time, quantity, place, person, name (None: none
    of them)."""
    if _TIME.search(question):
        return "time"
    if _QUANTITY.search(question) or _MEASURE.search(question):
        return "quantity"
    if _PLACE.search(question):
        return "place"
    if _PERSON.search(question):
        return "person"
    if _NAME.search(question):
        return "name"
    return None


def has_kind(text: str, kind: str | None, question_words: set[str], rate: bool = False) -> float:
    """1 when ``text`` holds, beyond the question's own words, the kind of answer asked for."""
    if kind is None:
        return 0.0
    if kind == "quantity":
        amounts = [
            m.group()
            for m in _AMOUNT.finditer(text)
            if m.group().split()[0].strip("$€£¥").lower() not in question_words
        ]
        words = [
            w for w in WORD.findall(text) if w.lower() in _NUMBER_WORDS and w.lower() not in question_words
        ]
        if not amounts and not words:
            return 0.0
        if rate:
            return 1.0 if any(_is_rate(a) for a in amounts) else 0.3
        plain = [a for a in amounts if not _is_rate(a)]
        if not plain:
            return 0.3 if amounts else 1.0  # only percentages, or a number in words
        return (
            0.5 if all(PRINTED_YEAR.fullmatch(a) for a in plain) else 1.0
        )  # a bare year is seldom the amount
    words = [w for w in WORD.findall(text) if w.lower() not in question_words]
    if kind == "time":
        rest = " ".join(words)
        return float(bool(PRINTED_YEAR.search(rest) or _MONTHS.search(rest) or DATE.search(text)))
    if kind == "place":
        return float(any(m.lower() not in question_words for m in _LOCATIVE.findall(text)))
    if kind == "person":
        return float(any(not set(m.lower().split()) & question_words for m in _PERSON_NAME.findall(text)))
    return float(any(w[:1].isupper() for w in words))


def novel_words(text: str, question_words: set[str]) -> int:
    """Words of ``text`` the question does not have (a leading section number aside)."""
    words = text.split()
    if words and _ENUMERATION.match(words[0]):
        words = words[1:]
    return sum(
        1
        for w in WORD.findall(" ".join(words).lower())
        if w not in question_words and (len(w) > 1 or w.isdigit())
    )
