"""Who a request is: the key it carries, and the documents that key may see and write.

``pagesight serve --keys keys.json`` binds each key to a tenant::

    {
      "KEY-OF-RED": {"name": "red", "write": true},
      "KEY-OF-AUDIT": {"name": "audit", "where": "tenant in (red, blue)"}
    }

A tenant sees the documents whose fields pass its ``where`` (default ``tenant = NAME``, the field
its uploads carry), and nothing else: searches and answers rank only those documents, and a
document, page, tile or job of another tenant is answered 404 as if it did not exist. Its uploads
are saved under a name of its own (``NAME--file.pdf``, so never over another tenant's document)
and carry ``tenant = NAME``. A name is letters and digits, joined by single ``-`` or ``_`` and
starting with a letter: it holds no ``--``, so the first ``--`` of an upload's id ends its
tenant's name and no tenant's upload can take another's id (``acme`` and ``acme--eu`` would
share ``acme--eu--report``), and no name reads as a number (``1`` and ``01``). The default filter
quotes the name, so it is compared as text. ``--api-key KEY`` is the operator's key, which sees and writes
everything. Keys are compared in constant time, every key each time. The MCP tools at /mcp take
the caller's tenant from the request the guard saw (``serve.mcp.caller``), and see the same.
"""

from __future__ import annotations

import hmac
import json
import re
from dataclasses import dataclass
from pathlib import Path

from pagesight.errors import PagesightError
from pagesight.where import document_fields, parse

FIELD = "tenant"  # the field a tenant's uploads carry
SEPARATOR = "--"  # between a tenant's name and an uploaded file's name
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*")
MAX_NAME = 64


@dataclass(frozen=True)
class Tenant:
    name: str
    where: str | None  # the documents it sees; None: all
    write: bool

    def sees(self, row) -> bool:
        """Whether the document (a catalog row) is this tenant's to see."""
        return self.where is None or parse(self.where).passes(document_fields(row))

    def within(self, where: str | None) -> str | None:
        """``where`` narrowed to this tenant's documents (clauses only join by ``and``, so nothing
        a caller writes widens it). A tenant's own filter may not read ``path``: where its files
        are on the server is not its to learn, a character at a time."""
        if self.where is None:
            return where
        if where is None:
            return self.where
        if any(clause.field == "path" for clause in parse(where).clauses):
            raise PagesightError(
                "where: 'path' is not a field a tenant's filter reads (the file's id is 'id')"
            )
        return f"{self.where} and {where}"

    def narrowed(self, request):
        """``request`` (a ``SearchRequest`` or an ``AskRequest``) narrowed to this tenant's documents
        (``within``); the same object for a tenant that sees everything (a request is checked again
        when replaced)."""
        return request if self.where is None else request.replace(where=self.within(request.where))


OPERATOR = Tenant("operator", None, True)  # the --api-key: everything
PUBLIC = Tenant("public", None, False)  # no key configured: reads open, writes refused


def load_keys(path: Path) -> dict[str, Tenant]:
    """The keys file at ``path``: keys to tenants; ``PagesightError`` naming the file and the
    entry when it cannot be used."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PagesightError(f"{path}: cannot read the keys file ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise PagesightError(f"{path}: the keys file is not JSON ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise PagesightError(f'{path}: the keys file must be an object of keys, {{"KEY": {{"name": ...}}}}')
    keys, names = {}, set()
    for number, (key, entry) in enumerate(data.items(), 1):
        where = f"{path}: key {number}"
        if not isinstance(key, str) or len(key) < 16:
            raise PagesightError(f"{where}: a key must be a string of 16 characters or more")
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise PagesightError(f'{where}: give the tenant a name: {{"name": "...", "write": false}}')
        unknown = set(entry) - {"name", "where", "write"}
        if unknown:
            raise PagesightError(f"{where}: unknown {', '.join(sorted(unknown))} (name, where, write)")
        name = entry["name"]
        problem = name_problem(name)
        if problem:
            raise PagesightError(f"{where}: {problem}")
        if name in names:
            raise PagesightError(f"{where}: the name '{name}' is another key's already")
        names.add(name)
        filtered = entry.get("where") or own_documents(name)
        try:
            parse(filtered)
        except PagesightError as exc:
            raise PagesightError(f"{where}: {exc}") from None
        keys[key] = Tenant(name, filtered, bool(entry.get("write", False)))
    return keys


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a tenant's (see the module docstring), or None."""
    if len(name) > MAX_NAME or not _NAME.fullmatch(name):
        return (
            f"the name '{name[:MAX_NAME]}' must start with a letter and be letters and digits, "
            f"joined by single - or _ (at most {MAX_NAME} characters)"
        )
    return None


def own_documents(name: str) -> str:
    """The filter of the documents tenant ``name`` owns: its field, compared as text."""
    return f'{FIELD} = "{name}"'


def upload_name(tenant: Tenant, name: str) -> str:
    """The name an upload ``name`` is saved under for ``tenant``: its own (``NAME--name``) for a
    tenant that sees only some documents, as given for a key that sees them all."""
    return name if tenant.where is None else f"{tenant.name}{SEPARATOR}{name}"


def shown(documents: list[dict], tenant: Tenant) -> list[dict]:
    """Listed documents (``Index.document_list``) as ``tenant`` is shown them: the operator sees
    where each source is on the server, every other caller its file name alone."""
    if tenant is OPERATOR:
        return documents
    named = []
    for row in documents:
        name = Path(row["source"]).name
        named.append({**row, "source": name, "fields": {**row["fields"], "path": name}})
    return named


def identify(given: str, keys: dict[str, Tenant]) -> Tenant | None:
    """The tenant of key ``given``: every key compared, each in constant time."""
    found = None
    for key, tenant in keys.items():
        if hmac.compare_digest(given.encode(), key.encode()):
            found = tenant
    return found
