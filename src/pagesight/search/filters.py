"""A search kept to the documents passing a ``where`` filter (the language: ``pagesight.where``).

A search keeps the documents that pass and ranks only their tiles, in both stores, so ``k`` hits
come back however few documents pass. Each catalog finds the documents passing
(``Catalog.documents_where``): the SQLite catalog reads every document's fields, the Qdrant
catalog asks the server for the documents its payload conditions let through and checks those.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from pagesight.where import parse

_PASSED: OrderedDict[tuple[str, int, str], tuple[list[str], bool]] = OrderedDict()
_PASSED_LOCK = threading.Lock()


def passing_documents(store, where: str) -> tuple[list[str], bool]:
    """The ids of the documents of ``store`` passing ``where``, and whether they are all of them;
    kept per catalog generation and filter (finding them costs more than a search on a small
    index)."""
    key = (store.location, store.catalog.generation(), where)
    with _PASSED_LOCK:
        if key in _PASSED:
            _PASSED.move_to_end(key)
            return _PASSED[key]
    found = [row.id for row in store.catalog.documents_where(parse(where))]
    passed = (found, len(found) == store.catalog.document_count())
    with _PASSED_LOCK:
        _PASSED[key] = passed
        while len(_PASSED) > 64:
            _PASSED.popitem(last=False)
    return passed
