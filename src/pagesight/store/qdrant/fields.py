"""A document's ``where`` fields as the Qdrant catalog keeps them, and a filter as payload conditions.

Each document point carries ``where``: for each of its fields (``where.document_fields``) its text
``s`` (``str(value)``, what text clauses compare) and, when it reads as a number, that number ``n``
(``float(value)``, what number clauses compare; an infinite one as the largest double, a NaN
none), under a key that is safe in a payload path (``f_<name>``, or ``x_<hex>`` for a name with
other characters). A filter becomes conditions the server evaluates over the documents:

- exact for ``=``, ``!=`` and ``in`` (a number against ``n``, text against ``s``) and for number
  comparisons (``<``, ``<=``, ``>``, ``>=`` against ``n``: a field with no number fails them, as
  in ``where``);
- the field's presence for ``^=`` and text comparisons, which Qdrant has no match for.

The conditions let through every document that passes and, but for those two, only those; the
catalog checks the ones let through with ``Filter.passes`` (``QdrantCatalog.documents_where``), so
a search keeps to exactly the documents ``where`` says, reading only those.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any

from pagesight.store.qdrant.schema import is_document, qdrant_models
from pagesight.where import Clause, Filter

_SAFE = re.compile(r"[A-Za-z0-9_]+")
_RANGES = {"<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}


def key(name: str) -> str:
    """The payload key of field ``name`` under ``where``."""
    return f"f_{name}" if _SAFE.fullmatch(name) else f"x_{name.encode().hex()}"


def fields_payload(fields: dict[str, Any]) -> dict[str, dict]:
    """The ``where`` payload of a document whose fields are ``fields`` (None: no field)."""
    kept = {}
    for name, value in fields.items():
        if value is None:
            continue
        entry: dict[str, Any] = {"s": str(value)}
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = None
        if number is not None and not math.isnan(number):
            entry["n"] = max(-sys.float_info.max, min(number, sys.float_info.max))
        kept[key(name)] = entry
    return kept


def conditions(given: Filter):
    """The Qdrant filter over document points that lets through every document passing ``given``."""
    return qdrant_models().Filter(must=[is_document(), *(_condition(clause) for clause in given.clauses)])


def _condition(clause: Clause):
    models = qdrant_models()
    base = f"where.{key(clause.field)}"
    present = models.Filter(must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=f"{base}.s"))])
    if clause.op == "in":
        return models.Filter(should=[_equal(base, value) or present for value in clause.values])
    value = clause.values[0]
    if clause.op == "=":
        return _equal(base, value) or present
    if clause.op == "!=":
        equal = _equal(base, value)
        return models.Filter(must=[present], must_not=[equal]) if equal else present
    if clause.op in _RANGES and isinstance(value, float) and math.isfinite(value):
        return models.FieldCondition(key=f"{base}.n", range=models.Range(**{_RANGES[clause.op]: value}))
    return present  # ^= and text comparisons: checked by the catalog


def _equal(base: str, value: str | float):
    """The condition of the field equalling ``value``; None for a number that is not finite."""
    models = qdrant_models()
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return models.FieldCondition(key=f"{base}.n", range=models.Range(gte=value, lte=value))
    return models.FieldCondition(key=f"{base}.s", match=models.MatchValue(value=value))
