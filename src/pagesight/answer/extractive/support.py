"""What a question asks about specifically, and whether a text names it however it is worded.

A question that cannot be answered from a document is most often a near miss on it: it asks for
another year than the pages give, a figure or table they do not have, an entity they never name
("What are the bankers' names associated with Apple Inc?" of a bank's report). ``asked`` reads
those constraints from the question:

- years (1900-2099, "FY2019" and "'19" forms read as the year),
- other numbers of 10 and over or with decimals ("Windows 9.0", "2.5 mm"), and a figure, table, section or equation with its number
  ("Figure 7"), but not a page, slide or step number (positions, not words of the page),
- capitalised words that do not open a sentence (names: "Shopee", "CONLL03", "Japan"), less a
  few generic ones (Figure, Table, USD, ...) and words that only say what the answer should be
  ("the Word written in the box", "Yes"); none from a sentence written in capitals,
- phrases in quotation marks, unless they only name an answer's form ('yes' or 'no'),

leaving out what parentheses hold ("(in USD millions)", "(Please write the answer in float
format)"). Nothing here reads the question's wording by pattern: its words are told apart by word
lists (the words questions are asked with, the words that say an answer's form, generic ones).

``Evidence`` is a text read so that a constraint is found however the page words it
(``Evidence.holds``): case and punctuation aside; hyphens and line-break hyphenation aside
("e-commerce", "ecom-\\nmerce"); by its stems (Americans holds American); an adjective where the
page has the noun, or the other way ("Japanese", "Japan"); a figure, table, equation or number
abbreviated ("Fig. 3", "Eq. 2", "No. 5"); a code read by OCR with its usual confusions (0/O, 1/l/I,
5/S, 8/B); a name of 5 letters or more misspelt by one letter ("Germen"; 7 letters and more: a
letter added or left out too). A year is found in its fiscal forms too (FY2019, FY19); any other
number, and a reference, only as written (commas aside, abbreviations written out).
"""

from __future__ import annotations

import bisect
import re
from functools import cached_property

from pagesight.answer.extractive.program import PERIOD, full_year
from pagesight.encode.lexical import terms

_NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\w)")
_REFERENCE = re.compile(
    r"\b(figure|fig\.?|table|tab\.|section|sec\.|chapter|appendix|exhibit|equation|eq\.?|note|item|part)"
    r"\s*(\d+(?:\.\d+)?)\b",
    re.IGNORECASE,
)
_POSITIONS = frozenset(
    ("page", "pages", "p.", "pp.", "slide", "slides", "step", "steps")
)  # a number after: where
_CAPITALISED = re.compile(r"(?<![\w'’.])([A-Z][\w&.-]*[\w&])")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,60})[\"”]|(?<!\w)['‘]([^'’]{2,60})['’](?!\w)")
_WORDS = re.compile(r"\w+")
_GENERIC = frozenset(
    _WORDS.findall(
        "figure fig table page pages section chapter appendix slide slides exhibit item part note step "
        "usd eur gbp jpy cny dollars millions billions thousands i equation eq"
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
# words that say what the answer is to be, not what it is about ("the Word written in the box")
_FORMAT_WORDS = frozenset(
    _WORDS.findall(
        "yes no true false word words text answer answers format float int integer string json arabic "
        "numeral numerals option "
        "options choice choices number numbers value values directly only all every"
    )
)
_REFERENCE_NAMES = {"fig": "figure", "tab": "table", "sec": "section", "eq": "equation"}
_ABBREVIATED = re.compile(r"\b(fig|figs|tab|sec|sect|eq|eqs|no|nos|ch|chap)\.?\s*(?=\(?\d)", re.IGNORECASE)
_FULL = {"fig": "figure", "figs": "figures", "tab": "table", "sec": "section", "sect": "section",
         "eq": "equation", "eqs": "equations", "no": "number", "nos": "numbers", "ch": "chapter",
         "chap": "chapter"}  # fmt: skip
_ADJECTIVE = ("ese", "ian", "ean", "ish", "ical", "ic", "al", "an", "n")  # Japan-ese, Canad-ian, ...
_OCR = str.maketrans("oilsb", "01158")  # letters OCR reads for digits (a code's O for 0, l for 1)


def asked(question: str) -> list[str]:
    """The question's specific constraints: years, numbers, references, names and quoted phrases
    (see above)."""
    found: dict[str, None] = {}
    for sentence in _sentences(_without_parentheses(question.strip())):
        for match in _REFERENCE.finditer(sentence):
            name = match.group(1).lower().rstrip(".")
            found[f"{_REFERENCE_NAMES.get(name, name).capitalize()} {match.group(2)}"] = None
        sentence = _REFERENCE.sub(" ", sentence)
        for match in PERIOD.finditer(sentence):
            found[full_year(match)] = None
        for match in _NUMBER.finditer(sentence):
            number, before = match.group().replace(",", ""), sentence[: match.start()]
            decimal = "." in number and (not before or before[-1].isspace())  # not "GPT-3.5"'s
            words = before.replace("-", " ").replace("–", " ").split()
            while words and (words[-1].isdigit() or words[-1].lower() in ("to", "and")):
                words.pop()  # "pages 400-640", "slides 3 to 12": a range of positions
            after_position = bool(words) and words[-1].lower() in _POSITIONS
            if not _year(number) and not after_position and (float(number) >= 10 or decimal):
                found[number] = None
        for name in _names(_QUOTED.sub(" ", sentence)):  # a quoted phrase counts once, whole
            found[name] = None
        for quoted in _QUOTED.findall(sentence):
            phrase = quoted[0] or quoted[1]
            if not set(_WORDS.findall(phrase.lower())) <= _FORMAT_WORDS:
                found[phrase] = None
    return list(found)


def _year(text: str) -> bool:
    return len(text) == 4 and text.isdigit() and text[:2] in ("19", "20")


def _without_parentheses(text: str) -> str:
    """``text`` without what its parentheses hold."""
    kept, depth = [], 0
    for ch in text:
        depth += ch == "("
        if depth == 0:
            kept.append(ch)
        depth -= ch == ")" and depth > 0
        if ch == ")" and depth == 0 and kept and kept[-1] != " ":
            kept.append(" ")
    return "".join(kept)


def _sentences(text: str) -> list[str]:
    """``text`` cut after each full stop, question or exclamation mark that a capital follows."""
    found, start = [], 0
    for i in range(1, len(text) - 1):
        if text[i - 1] in ".?!" and text[i].isspace() and text[i + 1 :].lstrip()[:1].isupper():
            found.append(text[start:i])
            start = i + 1
    return [*found, text[start:]]


def _names(sentence: str) -> list[str]:
    """The capitalised words of ``sentence`` that name something (none when it is in capitals)."""
    words = [w for w in _WORDS.findall(sentence) if w[:1].isalpha()]
    if len(words) >= 4 and sum(w.isupper() for w in words) > 0.6 * len(words):
        return []  # a question in capitals: its capitals say nothing
    opening = len(sentence) - len(sentence.lstrip())
    names = []
    for match in _CAPITALISED.finditer(sentence):
        word = match.group(1)
        word = word[:-2] if word.endswith(("'s", "’s")) else word
        plain = word.lower().rstrip(".")
        if (
            match.start() == opening
            or plain in _GENERIC
            or plain in _QUESTION_WORDS
            or plain in _FORMAT_WORDS
        ):
            continue
        fiscal = plain[:2] == "fy" and plain[2:].isdigit() or plain[:1] == "q" and plain[1:].isdigit()
        if PERIOD.fullmatch(word) or fiscal or not terms(word):
            continue
        names.append(word)
    return names


def _plain(text: str) -> str:
    """``text`` with abbreviated references written out, lower-cased, line-break hyphens joined,
    commas dropped, every other run of non-alphanumerics one space, padded."""
    text = _ABBREVIATED.sub(lambda m: _FULL[m.group(1).lower()] + " ", text)
    text = re.sub(r"(?<=[a-z])-\s*\n\s*(?=[a-z])", "", text.lower())
    return " " + re.sub(r"[^a-z0-9.]+|\.(?!\d)", " ", text.replace(",", "")) + " "


class Evidence:
    """A text read for ``holds``: its plain form, words, stems, and their indexes, made when first
    needed."""

    def __init__(self, text: str):
        self.plain = _plain(text)

    @cached_property
    def words(self) -> list[str]:
        return sorted(set(self.plain.split()))

    @cached_property
    def squashed(self) -> str:
        return self.plain.replace(" ", "")

    @cached_property
    def stems(self) -> set[str]:
        return set(terms(self.plain))

    @cached_property
    def codes(self) -> set[str]:
        return {w.translate(_OCR) for w in self.words if any(c.isdigit() for c in w)}

    @cached_property
    def by_length(self) -> dict[int, list[str]]:
        lengths: dict[int, list[str]] = {}
        for w in self.words:
            if w.isalpha() and len(w) >= 4:
                lengths.setdefault(len(w), []).append(w)
        return lengths

    def holds(self, wanted: str) -> bool:
        """Whether the text names the constraint ``wanted`` in any of the ways above."""
        plain = _plain(wanted).strip()
        if f" {plain} " in self.plain:
            return True
        if _year(plain):
            return f" fy{plain} " in self.plain or f" fy{plain[2:]} " in self.plain
        if _NUMBER.fullmatch(plain) or _REFERENCE.fullmatch(wanted):
            return False  # a number, or a figure or table by its number, only as written
        if len(plain.replace(" ", "")) >= 5 and plain.replace(" ", "") in self.squashed:
            return True
        return all(self._has_word(w) for w in plain.split())

    def _has_word(self, word: str) -> bool:
        stems = set(terms(word))
        if f" {word} " in self.plain or stems and stems <= self.stems:
            return True
        if any(c.isdigit() for c in word):
            return word.translate(_OCR) in self.codes
        return self._related(word) or (len(word) >= 5 and self._one_letter_off(word))

    def _related(self, word: str) -> bool:
        """An adjective of a noun here, or a noun of an adjective here (Japanese and Japan, Canada
        and Canadian)."""
        nouns = [word, word[:-1]] if word[-1] in "aeiouy" else [word]  # Canad-a, Ital-y
        roots = [word[: -len(s)] for s in _ADJECTIVE if word.endswith(s) and len(word) - len(s) >= 4]
        for root in [*nouns, *roots]:
            at = bisect.bisect_left(self.words, root)
            for other in self.words[at : at + 50]:
                if not other.startswith(root):
                    break
                rest = other[len(root) :]
                if rest in _ADJECTIVE if root in nouns else len(rest) <= 2:
                    return True
        return False

    def _one_letter_off(self, word: str) -> bool:
        """A word here one letter changed from ``word``, or (7 letters and more) one letter added
        or left out ("Spain" is not "spin")."""
        lengths = (len(word) - 1, len(word), len(word) + 1) if len(word) >= 7 else (len(word),)
        return any(_one_edit(word, other) for n in lengths for other in self.by_length.get(n, ()))


def is_figure(wanted: str) -> bool:
    """Whether the constraint ``wanted`` is a year, a number or a reference ("Figure 7"), which
    the line's own tile should hold, rather than a name, which its document may hold anywhere."""
    return bool(_NUMBER.fullmatch(wanted) or _REFERENCE.fullmatch(wanted))


def _one_edit(a: str, b: str) -> bool:
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if len(a) == len(b):
        return a[i + 1 :] == b[i + 1 :]
    return a[i:] == b[i + 1 :]
