"""Hard negatives mined from the index: tiles a retriever ranks high for a synthetic query that
are not the tile the query was made from.

Each query is searched with each retriever asked for (``lexical``, ``dense``, ``visual``,
``hybrid``); their rankings are interleaved, the query's own page left out, and the first
candidates that pass the false-negative filter are kept. Hard negatives teach most when they are
hard, and mislead most when they are in fact relevant; two rules drop the likely false negatives
(NV-Retriever's positive-aware mining):

- **too close**: in some retriever's run the candidate scores at least ``margin`` times the
  positive's score (scores of one run are comparable; a positive outside the run gives no bound);
- **contains the answer**: the candidate's text holds the query's answer span and at least
  ``min_shared`` of the query's terms, so it could answer the question too.

The report gives both thresholds and what each rule dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pagesight.encode.lexical import terms
from pagesight.train.corpus import TrainingTile
from pagesight.train.queries import SyntheticQuery, contains


@dataclass
class MiningReport:
    modes: list[str]
    depth: int
    margin: float
    min_shared: float
    queries: int = 0
    candidates: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    found_by: Counter = field(default_factory=Counter)  # retriever -> kept negatives it ranked
    without_negatives: int = 0

    def to_dict(self) -> dict:
        return {
            "modes": self.modes,
            "depth": self.depth,
            "thresholds": {
                "too_close": f"score >= {self.margin:g} x the positive's score in the same run",
                "contains_answer": f"holds the answer and >= {self.min_shared:.0%} of the query's terms",
            },
            "queries": self.queries,
            "candidates_seen": self.candidates,
            "kept": self.kept,
            "dropped": dict(self.dropped),
            "found_by": dict(self.found_by),
            "queries_without_negatives": self.without_negatives,
        }


def mine(
    index,
    queries: Sequence[SyntheticQuery],
    tiles: Sequence[TrainingTile],
    modes: Sequence[str] = ("hybrid",),
    per_query: int = 3,
    depth: int = 30,
    margin: float = 0.95,
    min_shared: float = 0.5,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[list[int]], MiningReport]:
    """Up to ``per_query`` hard negative tile ids for each query (in the order of ``queries``),
    from the top ``depth`` of each mode's ranking of the index."""
    by_key = {tile.key: tile for tile in tiles}
    report = MiningReport(list(modes), depth, margin, min_shared)
    mined = []
    for query in queries:
        runs = {}
        for mode in modes:
            hits = index.search(query.text, k=depth, mode=mode, evidence=False)
            runs[mode] = [(by_key[(h.doc_id, h.page, h.tile)], h.score) for h in hits]
        mined.append(_pick(query, runs, per_query, report))
        report.queries += 1
        if progress:
            progress(1)
    return mined, report


def _pick(
    query: SyntheticQuery, runs: dict[str, list[tuple[TrainingTile, float]]], n: int, report: MiningReport
):
    page = (query.doc_id, query.page)
    bounds = {}
    for mode, run in runs.items():
        positive = [score for tile, score in run if (tile.doc_id, tile.page) == page]
        if positive:
            bounds[mode] = max(positive) * report.margin
    scores = {mode: {tile.id: score for tile, score in run} for mode, run in runs.items()}
    query_terms = set(terms(query.text))
    seen: set[int] = set()
    chosen: list[int] = []
    for rank in range(max((len(run) for run in runs.values()), default=0)):
        for mode, run in runs.items():
            if rank >= len(run) or len(chosen) >= n:
                continue
            tile = run[rank][0]
            if (tile.doc_id, tile.page) == page or tile.id in seen:
                continue
            seen.add(tile.id)
            report.candidates += 1
            if any(scores[m].get(tile.id, float("-inf")) >= bound for m, bound in bounds.items()):
                report.dropped["too close"] += 1
            elif query.answer and _answers(tile.text, query.answer, query_terms, report.min_shared):
                report.dropped["contains answer"] += 1
            else:
                chosen.append(tile.id)
                report.found_by[mode] += 1
    report.kept += len(chosen)
    report.without_negatives += not chosen
    return chosen


def _answers(text: str, answer: str, query_terms: set[str], min_shared: float) -> bool:
    """Whether a tile of ``text`` could answer the query: it holds the answer and enough of the
    query's terms (a bare number is on many pages; with the question's terms around it, it answers)."""
    if not contains(text, answer):
        return False
    return len(query_terms & set(terms(text))) >= min_shared * max(1, len(query_terms))
