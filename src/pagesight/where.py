"""The ``where`` language: expressions over a document's fields, and those fields.

    type = pdf and year >= 2020 and path ^= reports/
    author in ("Ada Lovelace", "Alan Turing") and pages < 40

An expression is clauses joined by ``and``; a clause is a field, an operator and a value: ``=``,
``!=``, ``<``, ``<=``, ``>``, ``>=``, ``^=`` (starts with) or ``in (v, ...)``. A value is a number,
a quoted string or a bare word. Numbers compare as numbers, the rest as text (ISO dates compare in
order); a document without the field fails the clause.

A document's fields (``document_fields``): ``id``, ``path`` (its source), ``type``, ``title``,
``pages``, ``size``, ``modified`` (the file's date, ``YYYY-MM-DD``), ``year`` (of ``modified``, or of
the PDF's creation date), the PDF's ``author``, ``subject``, ``keywords`` and ``created``, and the
fields given at ingestion (``ingest --meta key=value``, ``Index.add(meta=...)``, a
``<file>.meta.json`` beside the file), which take precedence over the descriptive ones (``title``,
``year``, ``author``, ...) but never over the catalog's facts (``FACTS``: ``id``, ``path``, ``type``,
``pages``, ``size``, ``modified``, ``language``), so no writer can make a document pass a filter
on those that it does not pass.

A leaf module (it imports nothing of pagesight but its errors): requests parse expressions with
it, stores read documents' fields with it (the Qdrant store keeps them as payload conditions can
read them, ``store/qdrant/fields.py``), ``search.filters`` keeps a search to the documents passing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from pagesight.errors import PagesightError

OPERATORS = ("<=", ">=", "!=", "^=", "=", "<", ">")
FACTS = ("id", "path", "type", "pages", "size", "modified", "language")  # the catalog's, never given
MAX_WHERE = 4000  # characters of an expression
_NUMBER = re.compile(r"-?\d+(\.\d+)?")
# a token after the spaces before it (the spaces read from their first: ``(?<!\s)``, so a run of
# them is read once wherever a search starts)
_TOKEN = re.compile(
    r"""(?<!\s)\s*(?:
        (?P<string>"[^"]*"|'[^']*')
      | (?P<op><=|>=|!=|\^=|=|<|>)
      | (?P<punct>[(),])
      | (?P<word>[^\s"'(),=<>!^]+)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Clause:
    field: str
    op: str  # one of OPERATORS, or "in"
    values: tuple[str | float, ...]

    def passes(self, fields: dict[str, Any]) -> bool:
        if self.field not in fields or fields[self.field] is None:
            return False
        have = fields[self.field]
        if self.op == "in":
            return any(_equal(have, value) for value in self.values)
        value = self.values[0]
        if self.op == "=":
            return _equal(have, value)
        if self.op == "!=":
            return not _equal(have, value)
        if self.op == "^=":
            return str(have).startswith(str(value))
        pair = _comparable(have, value)
        if pair is None:  # a number asked of a field that holds none
            return False
        left, right = pair
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[self.op]


@dataclass(frozen=True)
class Filter:
    """Clauses that must all pass."""

    text: str
    clauses: tuple[Clause, ...]

    def passes(self, fields: dict[str, Any]) -> bool:
        return all(clause.passes(fields) for clause in self.clauses)


@lru_cache(maxsize=256)
def parse(text: str) -> Filter:
    """The filter ``text`` says; ``PagesightError`` naming the token where it goes wrong, or when it
    is longer than ``MAX_WHERE`` characters (expressions are kept parsed)."""
    if len(text) > MAX_WHERE:
        raise PagesightError(f"where: the expression is longer than {MAX_WHERE} characters")
    tokens = _tokens(text)
    clauses = []
    position = 0

    def take(kind: str | None = None, what: str = "") -> tuple[str, str]:
        nonlocal position
        if position >= len(tokens):
            raise PagesightError(f"where: '{text}' ends where {what} should follow")
        token = tokens[position]
        if kind is not None and token[0] != kind:
            raise PagesightError(f"where: expected {what}, got '{token[1]}' in '{text}'")
        position += 1
        return token

    while True:
        _, field = take("word", "a field name")
        kind, op = take(None, f"an operator ({', '.join(OPERATORS)} or in) after '{field}'")
        if kind == "word" and op.lower() == "in":
            take("punct", "'(' after in")
            values = [_value(take(None, "a value"), text)]
            while (separator := take("punct", "',' or ')'")[1]) == ",":
                values.append(_value(take(None, "a value"), text))
            if separator != ")":
                raise PagesightError(f"where: expected ',' or ')', got '{separator}' in '{text}'")
            clauses.append(Clause(field, "in", tuple(values)))
        elif kind == "op":
            clauses.append(Clause(field, op, (_value(take(None, f"a value after '{op}'"), text),)))
        else:
            raise PagesightError(f"where: expected an operator after '{field}', got '{op}' in '{text}'")
        if position == len(tokens):
            return Filter(text, tuple(clauses))
        kind, joiner = take()
        if kind != "word" or joiner.lower() != "and":
            raise PagesightError(f"where: expected 'and' between clauses, got '{joiner}' in '{text}'")


def document_fields(row) -> dict[str, Any]:
    """The fields a ``where`` expression reads of a catalog's document row (see the module
    docstring)."""
    meta = row.meta or {}
    modified = datetime.fromtimestamp(row.mtime_ns / 1e9, tz=timezone.utc).date().isoformat()
    fields: dict[str, Any] = {
        "id": row.id,
        "path": str(row.source),
        "type": row.type,
        "title": meta.get("title", ""),
        "pages": row.n_pages,
        "size": row.size,
        "modified": modified,
        "year": int(modified[:4]),
        # the language of most of its pages (text.language); English for documents read before
        "language": max((meta.get("languages") or {"en": 1}).items(), key=lambda item: item[1])[0],
    }
    pdf = meta.get("pdf") or {}
    fields.update(pdf)
    if str(pdf.get("created", ""))[:4].isdigit():
        fields["year"] = int(str(pdf["created"])[:4])
    given = meta.get("fields") or {}
    fields.update({name: value for name, value in given.items() if name not in FACTS})
    return fields


def _tokens(text: str) -> list[tuple[str, str]]:
    found, position = [], 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise PagesightError(f"where: cannot read '{text[position:].strip()[:20]}' in '{text}'")
        kind = match.lastgroup
        found.append((kind, match.group(kind)))
        position = match.end()
    if not found:
        raise PagesightError("where: the expression is empty")
    return found


def _value(token: tuple[str, str], text: str) -> str | float:
    kind, value = token
    if kind == "string":
        return value[1:-1]
    if kind != "word":
        raise PagesightError(f"where: expected a value, got '{value}' in '{text}'")
    return float(value) if _NUMBER.fullmatch(value) else value


def _equal(have: Any, value: str | float) -> bool:
    if isinstance(value, float):
        try:
            return float(have) == value
        except (TypeError, ValueError):
            return False
    return str(have) == value


def _comparable(have: Any, value: str | float) -> tuple[Any, Any] | None:
    if isinstance(value, float):
        try:
            return float(have), value
        except (TypeError, ValueError):
            return None
    return str(have), value
