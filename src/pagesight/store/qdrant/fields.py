"""A document's ``where`` fields as the Qdrant store keeps them, and a filter as payload conditions.

Each document point, and each of its tiles, carries ``where``: for each of its fields
(``where.document_fields``) its text ``s`` (``str(value)``, what text clauses compare) and, when it
reads as a number, that number ``n`` (``float(value)``, what number clauses compare; an infinite
one as the largest double, a NaN none), under a key that is safe in a payload path (``f_<name>``,
or ``x_<hex>`` for a name with other characters). A server indexes each key's ``s`` and ``n`` on the
tiles (``payload_indexes``). A filter becomes conditions the server evaluates:

- exact for ``=``, ``!=`` and ``in`` (a number against ``n``, text against ``s``) and for number
  comparisons (``<``, ``<=``, ``>``, ``>=`` against ``n``: a field with no number fails them, as
  in ``where``);
- the field's presence for ``^=`` and text comparisons, which Qdrant has no match for.

Over the documents (``conditions``) they let through every document that passes and, but for those
two, only those; the catalog checks the ones let through with ``Filter.passes``
(``QdrantCatalog.documents_where``). A filter of exact clauses alone is also said over the tiles
(``tile_conditions``), so a search keeps to the passing documents' tiles by their own indexed
payload instead of a list of the documents.
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
    return qdrant_models().Filter(must=[is_document(), *(_condition(clause)[0] for clause in given.clauses)])


def tile_conditions(given: Filter):
    """The Qdrant filter over tile points that lets through exactly the tiles of the documents
    passing ``given``; None when a clause has no exact condition (``^=``, text comparisons)."""
    found = [_condition(clause) for clause in given.clauses]
    if not all(exact for _, exact in found):
        return None
    return qdrant_models().Filter(must=[condition for condition, _ in found])


def payload_indexes(where: dict[str, dict]) -> list[tuple[str, str]]:
    """The payload indexes a server keeps for the ``where`` payload ``where`` (``fields_payload``):
    (field path, schema) for each key's text and, where it has one, its number."""
    return [
        (f"where.{name}.{part}", schema)
        for name, entry in where.items()
        for part, schema in (("s", "KEYWORD"), ("n", "FLOAT"))
        if part in entry
    ]


def _condition(clause: Clause) -> tuple[Any, bool]:
    """The condition of ``clause``, and whether it is exact (else the field's presence)."""
    models = qdrant_models()
    base = f"where.{key(clause.field)}"
    present = models.Filter(must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=f"{base}.s"))])
    if clause.op == "in":
        equals = [_equal(base, value) for value in clause.values]
        exact = all(equal is not None for equal in equals)
        return models.Filter(should=[equal or present for equal in equals]), exact
    value = clause.values[0]
    if clause.op == "=":
        equal = _equal(base, value)
        return equal or present, equal is not None
    if clause.op == "!=":
        equal = _equal(base, value)
        return (models.Filter(must=[present], must_not=[equal]), True) if equal else (present, False)
    if clause.op in _RANGES and isinstance(value, float) and math.isfinite(value):
        return models.FieldCondition(key=f"{base}.n", range=models.Range(**{_RANGES[clause.op]: value})), True
    return present, False  # ^= and text comparisons: checked by the catalog


def _equal(base: str, value: str | float):
    """The condition of the field equalling ``value``; None for a number that is not finite."""
    models = qdrant_models()
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return models.FieldCondition(key=f"{base}.n", range=models.Range(gte=value, lte=value))
    return models.FieldCondition(key=f"{base}.s", match=models.MatchValue(value=value))
