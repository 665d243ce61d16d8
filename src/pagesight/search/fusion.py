"""Rank fusion as IRPAPERS uses it for hybrid search.

A run is a list of (tile id, score) pairs, best first.

- Reciprocal rank fusion (Cormack et al., 2009): ``sum_r w_r / (k + rank_r)``, ranks from 1.
- Relative score fusion (Weaviate's ``relativeScoreFusion``): each run's scores are min-max scaled
  to [0, 1], then summed with weights; with two runs, ``alpha`` weighs the dense run and
  ``1 - alpha`` the lexical one (alpha = 1 is pure vector search, 0 pure keyword search).
"""

from __future__ import annotations

Run = list[tuple[int, float]]


def reciprocal_rank_fusion(runs: dict[str, Run], k: float = 60.0, weights: dict[str, float] | None = None):
    fused: dict[int, float] = {}
    for name, run in runs.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, (tile_id, _) in enumerate(run, start=1):
            fused[tile_id] = fused.get(tile_id, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda item: -item[1])


def relative_score_fusion(runs: dict[str, Run], weights: dict[str, float]):
    fused: dict[int, float] = {}
    for name, run in runs.items():
        if not run:
            continue
        scores = [score for _, score in run]
        low, high = min(scores), max(scores)
        span = high - low
        for tile_id, score in run:
            scaled = (score - low) / span if span > 0 else 1.0
            fused[tile_id] = fused.get(tile_id, 0.0) + weights.get(name, 0.0) * scaled
    return sorted(fused.items(), key=lambda item: -item[1])
