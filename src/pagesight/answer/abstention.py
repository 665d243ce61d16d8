"""Answers that are not answers: a model reader's refusal recognised as one.

A reader may decline to answer: the extractive one when the line it would quote does not hold
what the question asks about (``extractive/support.py``), a model reader when its text says that
the pages do not tell ("I don't know", "The document does not mention...", "Not answerable").
Either way the ``Reading`` and the ``Answer`` are marked not answered (``answered`` False) with
the ``reason``, and evaluation counts them as SimpleQA does: not attempted, neither right nor
wrong.

``refusal`` is conservative: its first sentence must say that the answer cannot be given or is
not in the pages, and nothing after that may turn to an answer ("..., but it shows 12%").
"""

from __future__ import annotations

import re

_NOT = r"(?:not|n['’]t|never)"
_PAGES = (
    r"(?:document|documents|page|pages|context|text|passage|passages|image|images|report|slides?|"
    r"sources?|information|excerpts?|materials?|data|table|chart|figure)"
)
_REFUSALS = [
    rf"\bi\s+(?:do|did|can)\s*{_NOT}\s+(?:know|find|see|tell|determine|answer)\b",
    rf"\bi\s*(?:am|'m|’m)\s+(?:{_NOT}\s+(?:sure|able|certain)|unable)\b",
    r"\b(?:unable|impossible)\s+to\s+(?:find|determine|answer|locate|tell|identify|say|know)\b",
    rf"\b(?:i|we|it|this|that|one)\s+(?:can|could)\s*{_NOT}\s+(?:find|determine|answer|locate|tell|"
    r"identify|infer|say)\b",
    r"\bcannot\s+(?:find|determine|answer|locate|tell|identify|infer)\s+(?:this|that|it|the\s+answer)\b",
    rf"\b(?:can|could)\s*{_NOT}\s+be\s+(?:found|determined|answered|located|told|identified|inferred)\b",
    r"\bcannot\s+be\s+(?:found|determined|answered|located|told|identified|inferred)\b",
    r"\b(?:not|insufficient)\s+enough\s+(?:information|detail|data|context)\b",
    r"\binsufficient\s+(?:information|detail|data|context)\b",
    r"\bno\s+(?:information|mention|data|details?|answer|indication|record)\s+(?:about|on|of|regarding|is|was|"
    r"can|in|for)\b",
    rf"\b(?:is|are|was|were)\s+{_NOT}\s+(?:mentioned|stated|given|provided|shown|specified|available|"
    r"included|present|listed|reported|disclosed|found|answerable|described|visible)\b",
    rf"\b(?:the\s+)?(?:(?:given|provided|retrieved|supplied)\s*)?{_PAGES}\s+(?:do|does|did)\s*{_NOT}\s+"
    r"(?:say|mention|state|contain|show|provide|include|specify|give|list|report|disclose|tell|"
    r"indicate|describe|answer|have|cover|discuss)\b",
    r"\b(?:not|un)\s?answerable\b",
    r"^\s*(?:unknown|n/?a|none of the (?:pages|documents))\W*$",
]
_REFUSAL = re.compile("|".join(f"(?:{pattern})" for pattern in _REFUSALS), re.IGNORECASE)
# a turn after the refusal to something the pages do say: an answer given all the same
_TURN = re.compile(
    r"\b(?:but|however|although|though|nevertheless|nonetheless|instead|yet|still|that said|"
    r"assuming|likely|probably|approximately|estimated?)\b",
    re.IGNORECASE,
)
# a clause, a currency or a figure (a digit, commas and a decimal point: "1,234.5")
_STATED = re.compile(r"[;:]|[$€£¥%]|\d,*\.\d|\d{1,3},\d{3}")
_FIRST_SENTENCE = re.compile(r"\S.*?(?:[.!?](?=\s|$)|\n|$)", re.DOTALL)
MAX_LEAD = 80  # characters the refusal may start into its sentence ("According to the pages, ...")
MAX_REASON = 200  # characters of the refusal kept as its reason


def refusal(text: str) -> str | None:
    """Why ``text`` is a refusal (its first sentence, as said), or None when it is an answer: it is
    empty, or its first sentence says that the answer cannot be given or is not in the pages, and no turn
    ("but", "however", "based on", "approximately") follows to give one all the same."""
    text = text.strip()
    if not text:
        return "the reader gave no answer"
    first = _FIRST_SENTENCE.match(text)
    if first is None:
        return None
    sentence = first.group().strip()
    found = _REFUSAL.search(sentence)
    if found is None or found.start() > MAX_LEAD or _TURN.search(text, found.end()):
        return None
    if _STATED.search(sentence[: found.start()]):
        return None  # a figure or a clause stated before it: an answer, then what it lacks
    reason = " ".join(sentence.split())
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3].rstrip() + "..."
