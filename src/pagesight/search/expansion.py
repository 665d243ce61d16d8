"""Query expansion from a thesaurus: the other words a question's terms go by on the page.

An analyst asks for "capex" from "the cash flow statement"; the filing prints "Purchases of
property, plant and equipment" under "Consolidated Statements of Cash Flows". A thesaurus
(``thesauri/<name>.txt``, chosen by ``Settings.thesaurus``) names such things both ways: groups of
names for one thing (each searches the others) and terms with the words of the lines that answer
them. The lexical run reads the question with those words added; dense and visual runs read it as
asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, cached_property

from pagesight.choices import THESAURI, thesauri
from pagesight.errors import PagesightError


@dataclass(frozen=True)
class Entry:
    terms: tuple[str, ...]  # lower-cased phrases that call it up
    adds: str  # what the query is expanded with

    @cached_property
    def pattern(self) -> re.Pattern:
        """Any of the terms as whole words, compiled once per thesaurus load, not per query."""
        return re.compile("|".join(rf"(?<!\w){re.escape(term)}(?!\w)" for term in self.terms))

    def found_in(self, query: str) -> bool:
        return self.pattern.search(query) is not None

    @cached_property
    def keys(self) -> frozenset[str]:
        """The first word of each of its terms: a query holds a term whole only if it holds that
        word as a word of its own ("" for a term that opens with no word: always looked for)."""
        return frozenset(
            (_WORD.findall(term) or [""])[0] if term[:1].isalnum() else "" for term in self.terms
        )


_WORD = re.compile(r"\w+")


@cache
def _by_key(name: str) -> dict[str, tuple[Entry, ...]]:
    """The entries of the thesaurus ``name`` by the first words of their terms."""
    found: dict[str, list[Entry]] = {}
    for entry in thesaurus(name):
        for key in entry.keys:
            found.setdefault(key, []).append(entry)
    return {key: tuple(entries) for key, entries in found.items()}


@cache
def thesaurus(name: str) -> tuple[Entry, ...]:
    """The entries of the thesaurus ``name``."""
    if name not in thesauri():
        raise PagesightError(f"unknown thesaurus '{name}' (known: {', '.join(thesauri())})")
    text = (THESAURI / f"{name}.txt").read_text()
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip().lower()
        if not line or line.startswith("#"):
            continue
        if line.startswith("="):
            names = tuple(part.strip() for part in line[1:].split("|") if part.strip())
            entries += [Entry((name,), " ".join(other for other in names if other != name)) for name in names]
        elif "->" in line:
            terms, _, adds = line.partition("->")
            entries.append(Entry(tuple(t.strip() for t in terms.split("|") if t.strip()), adds.strip()))
        else:
            raise PagesightError(f"thesaurus {name}, line {number}: neither '= a | b' nor 'a | b -> words'")
    return tuple(entries)


def expand(query: str, name: str | None) -> str:
    """``query`` followed by what the thesaurus ``name`` adds for it (itself when ``name`` is None
    or nothing matches); words already in the query are not added again."""
    if not name:
        return query
    asked = _apostrophes(query.lower())
    by_key = _by_key(name)
    words = set(_WORD.findall(asked)) | {""}
    looked_for = {entry for word in words for entry in by_key.get(word, ())}
    added = [entry.adds for entry in thesaurus(name) if entry in looked_for and entry.found_in(asked)]
    return f"{query}\n{' '.join(dict.fromkeys(added))}" if added else query


def _apostrophes(text: str) -> str:
    """Possessives and plain quotes read alike: "shareholders' equity" is "shareholders equity"."""
    return re.sub(r"['’]", "", text)
