"""Financial figures questions name without defining them: their textbook definitions, written as
the formulas ``figures`` reads from table cells ("current ratio", "inventory turnover", "EBITDA",
"working capital"), and a ratio named by its two sides ("long-term debt to total liabilities").

A question that writes its own definition ("DPO is defined as: ...") is read by it instead. An
"average" without a year is of the year asked and the one before, as analysts compute turnovers
and returns; a formula that divides gives a figure without a unit (a ratio, a number of days).
"""

from __future__ import annotations

import re

# name (a pattern) -> formula; the longer names first, so "fixed asset turnover" is not "asset turnover"
DEFINITIONS: dict[str, str] = {
    r"fixed asset turnover": "revenue / average property and equipment net",
    r"(?:total )?asset turnover": "revenue / average total assets",
    r"inventory turnover": "cost of sales / average inventories",
    r"(?:accounts )?receiv\w* turnover": "revenue / average accounts receivable",
    r"(?:accounts )?payables? turnover": "cost of sales / average accounts payable",
    r"days (?:of )?inventory outstanding|\bDIO\b": "365 * average inventories / cost of sales",
    r"days (?:of )?sales outstanding|\bDSO\b": "365 * average accounts receivable / revenue",
    r"days (?:of )?payables? outstanding|\bDPO\b": "365 * average accounts payable / cost of sales",
    r"cash conversion cycle|\bCCC\b": "365 * average inventories / cost of sales + 365 * average accounts "
    "receivable / revenue - 365 * average accounts payable / cost of sales",
    r"current ratio": "total current assets / total current liabilities",
    r"quick ratio": "(cash and cash equivalents + short-term investments + accounts receivable) "
    "/ total current liabilities",
    r"cash ratio": "cash and cash equivalents / total current liabilities",
    r"operating cash flow ratio": "net cash provided by operating activities / total current liabilities",
    r"operating cash flows?|cash flows? from operations|cash from operations": "net cash provided by "
    "operating activities",
    r"working capital": "total current assets - total current liabilities",
    r"return on assets|\bROA\b": "net income / average total assets",
    r"return on equity|\bROE\b": "net income / average total shareholders equity",
    r"interest coverage": "operating income / interest expense",
    r"(?<!un)(?<!un-)\bEBITDA\b|unadjusted EBITDA": "operating income + depreciation and amortization",
}
_NAMED = [(re.compile(rf"(?:{name})", re.IGNORECASE), formula) for name, formula in DEFINITIONS.items()]
# "X to Y ratio", "the ratio of X to Y", "X to Y for COSTCO in FY2021": the two sides of a ratio,
# each as (where the sides open, what a side may hold, what may follow the second side); the first
# side ends at the first " to ", the second as soon as what may follow it does (``sides``)
_SIDES = (
    (
        re.compile(r"\bratio of ", re.I),
        re.compile(r"[\w&,' -]*"),
        re.compile(r"(?= (?:for|of|in)\b|[?.]|$)", re.I),
    ),
    (
        re.compile(r"\b(?:what (?:is|was|were) (?:the )?|calculate (?:the )?)(?:FY ?\d{4} )?", re.I),
        re.compile(r"[\w&' -]*"),
        re.compile(r"(?: ratio)?(?= ?(?:for|of|in)\b|[?.]|$)", re.I),
    ),
)
_TO = re.compile(" to ", re.I)


def definition(text: str) -> str | None:
    """The formula of the first figure ``text`` names by its textbook name, or None."""
    text = _plain(text)
    for pattern, formula in _NAMED:
        if pattern.search(text):
            return formula
    return None


def sides(question: str) -> tuple[str, str] | None:
    """The two figures a ratio the question names by its sides divides ("sales to working capital
    ratio": "sales", "working capital"), or None."""
    text = _plain(question)
    for opening, side, after in _SIDES:
        found, position = None, 0
        while found is None and (opened := opening.search(text, position)) is not None:
            found, position = _sides_at(text, opened.end(), side, after)
        if found is not None:
            return found
    return None


def _sides_at(text: str, start: int, side: re.Pattern, after: re.Pattern) -> tuple[tuple | None, int]:
    """The two sides opening at ``start`` (or None) and where the next opening may be looked for:
    past the run of characters a side may hold, as an opening within it finds the same " to " and
    the same ends, so every character is read once."""
    run = side.match(text, start).end()
    to = _TO.search(text, start + 1, run)
    if to is not None:
        for end in range(to.end() + 1, run + 1):
            if after.match(text, end):
                return (text[start : to.start()].strip(), text[to.end() : end].strip()), run
    return None, max(run, start + 1)


def _plain(text: str) -> str:
    """Names as a metric's variable is written ("cash_ratio") and runs of spaces read as words."""
    return " ".join(text.replace("_", " ").split())
