"""Whether the line the extractive reader would quote is evidence for an answer at all.

A question that cannot be answered from a document is most often a near miss on it: it asks for
another year than the pages give, a figure or table they do not have, an entity they never name
("What are the bankers' names associated with Apple Inc?" of a bank's report). The reader still
finds a best line; what gives it away is that the question's specific constraints are absent
from where that line stands. ``asked`` reads them from the question:

- years (1900-2099, "FY2019" and "'19" forms read as the year),
- other numbers of 10 and over, and any number naming a figure, table or section ("Figure 7"), but
  not a page, slide or step number (those are positions, not words of the page),
- capitalised words that do not open a sentence (names: "Shopee", "CONLL03", "Japan"), less a
  few generic ones (Figure, Table, USD, ...),
- phrases in quotation marks,

leaving out instructions on the answer's form ("Please write the answer in float format", "such
as 100, 200 or 300") and parentheses. ``unsupported`` names those the evidence lacks: the chosen
line's tile, its document's name and title (the first line of its first page: a k = 1 context
holds no more) and the titles (first lines) of that document's first tiles in the context. A name counts as present when its stems are (Americans holds American); a year when
it is a word of the evidence; a number when it is written the same (commas aside); a quoted phrase
when it appears as written.

The reader declines when anything is missing, or when its chosen line scores under
``MIN_SCORE`` on the signals other than MiniLM (too little of the question in it to be an answer).
Both were set on the reader's measurements, BENCHMARKS.md "Abstention": no answer it got right on
its own question sets (benchmarks/reader, samples, the synthetic register: 150) or on
financebench-dev and mmlongbench-dev (9) lacks a constraint, and the lowest of those right answers
scores .225 without MiniLM.
"""

from __future__ import annotations

import re

from pagesight.encode.lexical import terms

MIN_SCORE = 0.15  # the chosen line's score without MiniLM below which there is no answer in it

_INSTRUCTION = re.compile(
    r"^(?:please|answer|give|write|round|base|express|provide|respond|use|output|note|e\.g)\b", re.IGNORECASE
)
_SENTENCES = re.compile(r"(?<=[.?!])\s+(?=[A-Z(])")
_PARENTHESES = re.compile(r"\([^)]*\)")
_EXAMPLES = re.compile(r"\b(?:such as|e\.g\.?|for example)\b.*$", re.IGNORECASE)
_YEAR = re.compile(r"(?<![\d.,])(?:FY|fy|CY|cy|['’])?((?:19|20)\d\d)(?![\d,]|\.\d)")
_BARE_YEAR = re.compile(r"(?:19|20)\d\d")
_NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\w)")
_NAMES_PART = re.compile(
    r"\b(?:figure|fig\.?|table|section|chapter|appendix|exhibit|note|item|part)\s*$", re.I
)
_POSITION = re.compile(
    r"\b(?:page|pages|p\.|pp\.|slide|slides|step|steps|top|first|last|q)\s*(?:\d+\s*(?:-|–|to|and)\s*)?$",
    re.I,
)
_CAPITALISED = re.compile(r"(?<![\w'’.])([A-Z][\w&.-]*[\w&])")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,60})[\"”]|(?<!\w)['‘]([^'’]{2,60})['’](?!\w)")
_WORDS = re.compile(r"\w+")
_POSSESSIVE = re.compile(r"['’]s$")
_QUARTER_OR_FISCAL = re.compile(r"(?:FY|Q)\d*", re.IGNORECASE)
_GENERIC = frozenset(
    _WORDS.findall(
        "figure fig table page pages section chapter appendix slide slides exhibit item part note step "
        "usd eur gbp jpy cny dollars millions billions thousands i"
    )
)
_QUESTION_WORDS = frozenset(
    _WORDS.findall(
        "what which who whom whose when where why how is are was were did does do the a an in on of "
        "for to and or according among based besides please give answer tell if this that these those "
        "from by with as at it its can could would should will list name identify compare describe "
        "explain calculate find show"
    )
)


def _plain(text: str) -> str:
    """``text`` lower-cased, commas dropped, every other run of non-alphanumerics one space, padded."""
    return " " + re.sub(r"[^a-z0-9.]+|\.(?!\d)", " ", text.lower().replace(",", "")) + " "


def asked(question: str) -> list[str]:
    """The question's specific constraints: years, numbers, names and quoted phrases (see above)."""
    sentences = [s for s in _SENTENCES.split(question.strip()) if not _INSTRUCTION.match(s.strip())]
    sentences = [_EXAMPLES.sub(" ", _PARENTHESES.sub(" ", s)) for s in sentences]
    found: dict[str, None] = {}
    for sentence in sentences:
        for year in _YEAR.findall(sentence):
            found[year] = None
        for match in _NUMBER.finditer(sentence):
            number, before = match.group().replace(",", ""), sentence[: match.start()]
            if _BARE_YEAR.fullmatch(number) or _POSITION.search(before):
                continue
            if float(number) >= 10 or _NAMES_PART.search(before):
                found[number] = None
        opening = len(sentence) - len(sentence.lstrip())
        for match in _CAPITALISED.finditer(sentence):
            word = _POSSESSIVE.sub("", match.group(1))
            plain = word.lower().rstrip(".")
            if match.start() == opening or plain in _GENERIC or plain in _QUESTION_WORDS:
                continue
            if _YEAR.fullmatch(word) or _QUARTER_OR_FISCAL.fullmatch(word) or not terms(word):
                continue
            found[word] = None
        for quoted in _QUOTED.findall(sentence):
            found[quoted[0] or quoted[1]] = None
    return list(found)


def unsupported(question: str, evidence: str) -> list[str]:
    """The question's constraints (``asked``) that ``evidence`` does not hold."""
    plain = _plain(evidence)
    stems = set(terms(evidence))
    missing = []
    for wanted in asked(question):
        if f" {_plain(wanted).strip()} " in plain:
            continue
        if _BARE_YEAR.fullmatch(wanted) and (f" fy{wanted} " in plain or f" fy{wanted[2:]} " in plain):
            continue
        if wanted[:1].isalpha() and not _is_quoted(question, wanted) and set(terms(wanted)) <= stems:
            continue
        missing.append(wanted)
    return missing


def _is_quoted(question: str, wanted: str) -> bool:
    return any(wanted in (a, b) for a, b in _QUOTED.findall(question))
