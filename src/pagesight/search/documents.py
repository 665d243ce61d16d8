"""Document evidence in page ranking: the pages of a document that matches the query in several
places rank above a lone page of another document that matches about as well.

Questions over collections of long documents are about a document's subject far more often than
about one page's exact words, and the right page's neighbours match the query too. Each candidate
tile's score is therefore fused with the score of its document, aggregated from the same ranking
(no second index, so every store and every retriever gets it alike):

    score(tile) = s(tile) + weight * D(document of the tile) / max D * s(tile) / s(best tile of its page)

``s`` is the ranking's score scaled to [0, 1] over the candidates: divided by the best one when no
score is negative (BM25, fused scores), so a short list keeps the gaps between its scores; min-max
otherwise (cosine similarities). ``D`` is the sum of the ``BEST_PAGES`` best scaled page scores of the document
among the candidates (a page counts once, by its best tile), so a long document does not win by
length alone. A page's best tile takes the whole of its document's share and its other tiles a
part in proportion to their own score, so the tiles of a page keep their order and, for a document
of one page (a web page cut into many tiles, a scan), the ranking stays as it was: its page is all
the evidence it has. The weight was chosen on IRPAPERS (the ablation is in BENCHMARKS.md); 0 leaves
the ranking as it was.
"""

from __future__ import annotations

from collections.abc import Mapping

from pagesight.search.fusion import Run

BEST_PAGES = 3  # the best pages of a document that make its score


def document_fusion(ranked: Run, pages: Mapping[int, tuple[str, int]], weight: float) -> Run:
    """``ranked`` (tile id, score) pairs, best first, fused with their documents' scores; ``pages``
    gives each tile's (document id, page number). A tile with no entry (deleted since the ranking
    was made) keeps its own scaled score."""
    if weight <= 0 or not ranked:
        return ranked
    scores = [score for _, score in ranked]
    low, high = min(0.0, min(scores)), max(scores)
    span = high - low
    scaled = [(tile_id, (score - low) / span if span > 0 else 1.0) for tile_id, score in ranked]
    best: dict[tuple[str, int], float] = {}  # a page's best tile
    for tile_id, score in scaled:
        page = pages.get(tile_id)
        if page is not None and score > best.get(page, -1.0):
            best[page] = score
    by_document: dict[str, list[float]] = {}
    for (doc_id, _), score in best.items():
        by_document.setdefault(doc_id, []).append(score)
    totals = {doc_id: sum(sorted(found, reverse=True)[:BEST_PAGES]) for doc_id, found in by_document.items()}
    top = max(totals.values(), default=0.0)
    if top <= 0:
        return ranked

    def fused(tile_id: int, score: float) -> float:
        page = pages.get(tile_id)
        if page is None:
            return score
        share = score / best[page] if best[page] > 0 else 1.0
        return score + weight * totals[page[0]] / top * share

    return sorted(((tile_id, fused(tile_id, score)) for tile_id, score in scaled), key=lambda item: -item[1])
