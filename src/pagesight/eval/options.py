"""What ``pagesight eval`` is asked, declared once and light to import (the command line derives
its options from it, ``cli.common.request_options``): the searches (``SearchGrid``), the request
fields a configuration's name sets (``SETTINGS``) and the ``AskRequest`` fields an answer grid
sweeps (``SWEPT``, each with ``eval.grid.AnswerGrid``'s field of its values)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pagesight.errors import PagesightError
from pagesight.request import SearchRequest, value_type
from pagesight.spec import option, spec

SWEPT = {"k": "ks", "compression": "compressions", "inputs": "inputs", "strategy": "strategies",
         "max_searches": "max_searches"}  # fmt: skip


def _settings() -> dict[str, tuple[str, type]]:
    """The request fields a configuration's name can set, by their name in it, with their type:
    ``doc`` for ``document_weight``, and every other number but ``k`` (eval's depth)."""
    found = {"doc": ("document_weight", float)}
    for f in dataclasses.fields(SearchRequest):
        kind, _ = value_type(f)
        if kind in (int, float) and f.name not in ("k", "document_weight"):
            found[f.name] = (f.name, kind)
    return found


SETTINGS = _settings()


def varied(given: Sequence[str], name: str = "vary") -> dict[str, list[str]]:
    """Settings swept, each ``NAME=VALUE,VALUE,...``, as each name's values."""
    found = {}
    for item in given:
        setting, equals, listed = item.partition("=")
        values = [value.strip() for value in listed.split(",") if value.strip()]
        if not equals or not setting.strip() or not values:
            raise PagesightError(f"{name}: give NAME=VALUE,VALUE,..., got '{item}'")
        found[setting.strip()] = values
    return found


def _searched(name: str) -> str:
    """The help of search request field ``name``."""
    return next(spec(f) for f in dataclasses.fields(SearchRequest) if f.name == name).help


@dataclass(frozen=True)
class SearchGrid:
    """What eval searches: the configurations named in ``modes`` (``harness.Config.parse``; hybrid
    when none), the alpha sweep when ``sweep``, each one searched with each value of every setting
    ``vary`` names instead (``SETTINGS``: every combination, named ``CONFIG/NAME:VALUE``),
    each of those reranked by ``rerank`` too (with ``rerank_candidates`` and ``rerank_model``),
    each of those searched within its questions' documents too when ``within_document``, and all of
    them over the documents passing ``where`` (``runner.configs``). ``check`` refuses options that
    need another. Each field is one ``pagesight eval`` option (``cli.common.request_options``)."""

    modes: tuple[str, ...] = option(
        (),
        "Configuration(s): lexical, dense, visual, hybrid (the search default), rrf, rsf:ALPHA; each with "
        "/doc:WEIGHT for another document weight, then /unranked (no learned ranker), then /within. "
        "Repeatable.",
        flags=("--mode", "-m"),
    )
    sweep: bool = option(False, "Add relative score fusion at alpha 0, 0.1, ..., 1.", flags=("--sweep",))
    vary: Mapping[str, Sequence[str | float]] = option(
        help="A search setting swept, NAME=VALUE,VALUE,...: every configuration searched with each value "
        f"instead, named CONFIG/NAME:VALUE ({', '.join(SETTINGS)}). Repeatable: every combination.",
        factory=dict,
        taken_as=list[str],
        read=varied,
    )
    rerank: str | None = option(
        None, "Also evaluate each configuration reranked by this reranker (see search --rerank)."
    )
    rerank_candidates: int | None = option(SearchRequest.rerank_candidates, _searched("rerank_candidates"))
    rerank_model: str | None = option(None, _searched("rerank_model"))
    within_document: bool = option(
        False,
        "Also search each question inside its own documents only (queries.jsonl's doc_ids, else its "
        "relevant pages' documents), as long-document benchmarks do.",
        flags=("--within-document",),
    )
    where: str | None = option(None, _searched("where"))

    def check(self) -> SearchGrid:
        if self.rerank_model is not None and self.rerank is None:
            raise PagesightError("--rerank-model needs --rerank")
        return self
