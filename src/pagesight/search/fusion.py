"""Rank fusion as IRPAPERS uses it for hybrid search.

A run is a list of (tile id, score) pairs, best first.

- Reciprocal rank fusion (Cormack et al., 2009): ``sum_r w_r / (k + rank_r)``, ranks from 1.
- Relative score fusion (Weaviate's ``relativeScoreFusion``): each run's scores are min-max scaled
  to [0, 1], then summed with weights; with two runs, ``alpha`` weighs the dense run and
  ``1 - alpha`` the lexical one (alpha = 1 is pure vector search, 0 pure keyword search).

Both weigh the runs alike (``fusion_weights``): the visual run ``visual_weight``, the text runs the
rest, split by ``alpha`` between dense and BM25. Their defaults differ: relative score fusion's are
``choices.default_alpha`` (the index's dense model's; for a multilingual one, more when the
question is matched across languages: ``language_alpha``) and ``DEFAULT_VISUAL_WEIGHT``,
reciprocal rank fusion's weigh every run the same, which is the unweighted sum.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pagesight.choices import DEFAULT_VISUAL_WEIGHT, default_alpha

Run = list[tuple[int, float]]


def fusion_weights(
    fusion: str,
    names: Collection[str],
    alpha: float | None = None,
    visual_weight: float | None = None,
    dense_model: str | None = None,
) -> dict[str, float] | None:
    """Each run's weight, for the runs ``names`` fused by ``fusion`` ("rsf" or "rrf"): ``visual_weight``
    for the visual run when there is one, and of the rest ``alpha`` for dense and the remainder for
    BM25 (all of it without a dense run). None given: the fusion's default (see the module
    docstring; relative score fusion's alpha is ``dense_model``'s); for reciprocal rank fusion with
    neither given, None: no weights."""
    equal = fusion == "rrf"
    if equal and alpha is None and visual_weight is None:
        return None
    if alpha is None:
        alpha = 0.5 if equal else default_alpha(dense_model)
    if visual_weight is None:
        visual_weight = 1 / len(names) if equal else DEFAULT_VISUAL_WEIGHT
    text = 1.0 - visual_weight if "visual" in names else 1.0
    weights = {"bm25": text * (1.0 - alpha), "dense": text * alpha} if "dense" in names else {"bm25": text}
    if "visual" in names:
        weights["visual"] = visual_weight
    return weights


def language_alpha(dense_model: str | None, language: str, head: Sequence[str | None]) -> float:
    """Relative score fusion's dense weight for a question in ``language`` whose dense run's first
    tiles are in the languages ``head``: the model's weight across languages
    (``choices.ACROSS_ALPHA``) when fewer than half of them are the question's, else its own. BM25
    matches a question only through the words it shares with a page, few across languages; a
    multilingual model's first tiles in other languages say that the question's pages are in them."""
    same = sum(code == language for code in head)
    return default_alpha(dense_model, across=bool(head) and same < len(head) / 2)


def reciprocal_rank_fusion(runs: dict[str, Run], k: float = 60.0, weights: dict[str, float] | None = None):
    """The runs fused by their ranks; a run ``weights`` leaves out weighs 1. The weights are scaled
    so the heaviest is 1 (the ranking is the same) and compared at 12 digits, so that weights meant
    to be equal (1/3 against (1 - 1/3) / 2) give the unweighted sums exactly, ties included."""
    given = {name: 1.0 if weights is None else weights.get(name, 1.0) for name in runs}
    top = max(given.values(), default=0.0) or 1.0
    fused: dict[int, float] = {}
    for name, run in runs.items():
        weight = round(given[name] / top, 12)
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
