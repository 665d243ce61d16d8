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
payload instead of a list of the documents. ``WhereFields`` holds the catalog's methods that keep
the fields and find the documents passing.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any

from pagesight.store.qdrant.schema import (
    DOCUMENT_ROW,
    FORMAT_VERSION,
    document_row,
    is_document,
    qdrant_models,
    scroll,
)
from pagesight.store.rows import DocumentRow
from pagesight.where import Clause, Filter, document_fields

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


class WhereFields:
    """The ``where`` methods of ``QdrantCatalog``: finding the documents a filter passes, and
    keeping the fields on its documents and tiles (its index point, its two collections)."""

    def documents_where(self, given: Filter) -> list[DocumentRow]:
        """The documents the server's payload conditions let through (``fields.conditions``),
        checked here for the clauses they cannot say exactly."""
        let_through = scroll(self.client, self.catalog_name, conditions(given), with_payload=DOCUMENT_ROW)
        rows = (document_row(record.payload) for record in let_through)
        return sorted((row for row in rows if given.passes(document_fields(row))), key=lambda row: row.id)

    def _where(self, payload: dict) -> dict:
        """The ``where`` payload of the document point ``payload``."""
        return fields_payload(document_fields(document_row(payload)))

    def _upgrade_fields(self) -> None:
        """Formats 1 and 2 to 3: each document point (1) and each tile (1, 2) gains its document's
        ``where`` fields (``fields.py``). Any process opening the index may do it: it writes what
        every other would."""
        for payload in self._document_payloads():
            where = self._where(payload)
            if self._index["format_version"] == 1:
                self.client.set_payload(
                    self.catalog_name, {"where": where}, [self._document_point(payload["id"])]
                )
            self._tiles_where(payload["id"], where)
        self._index["format_version"] = FORMAT_VERSION
        self._save_index()

    def _tiles_where(self, doc_id: str, where: dict) -> None:
        """Give every tile of ``doc_id`` the ``where`` payload ``where``, indexed on a server."""
        if not self._has_tiles():
            return
        self._index_fields(where)
        models = qdrant_models()
        of_document = models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))
        self.client.set_payload(self.tiles_name, {"where": where}, models.Filter(must=[of_document]))

    def _index_fields(self, where: dict) -> None:
        """On a server, a payload index on the tiles and the documents for each field of ``where``
        not yet indexed (``fields.payload_indexes``; local mode has none), noted in the index
        record."""
        if self.path is not None:
            return
        indexed = self._index.setdefault("field_indexes", [])
        new = [(field, schema) for field, schema in payload_indexes(where) if field not in indexed]
        for field, schema in new:
            for collection in (self.tiles_name, self.catalog_name):
                self.client.create_payload_index(
                    collection, field, getattr(qdrant_models().PayloadSchemaType, schema)
                )
            indexed.append(field)
        if new:
            self._save_index()
