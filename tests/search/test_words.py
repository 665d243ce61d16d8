"""A tile's words by line (``search.words``): read once per tile, what a hit quotes and the ranker
reads."""

from __future__ import annotations

import dataclasses

import pytest

from pagesight import Index
from pagesight.encode.lexical import query_stems, term_matcher
from pagesight.request import SearchRequest
from pagesight.search.words import matching_lines, spans_text, tile_text, tile_texts
from tests.conftest import make_pdf


@pytest.mark.timeout(60)
def test_each_span_stays_one_line_and_counts_what_the_pattern_counts():
    spans = [
        ["Revenue by region", [0, 0, 10, 10]],
        ["West revenue\nrose", [0, 10, 10, 20]],  # a break inside a span must not shift the next lines
        ["Region West 4,870", [0, 20, 10, 30]],
        ["", [0, 30, 10, 40]],
    ]
    text = tile_text(spans_text(spans))
    lines = [span[0] for span in spans]
    stems = query_stems("West region's revenue")
    assert (
        matching_lines(stems, text, len(spans))
        == term_matcher("West region's revenue")(lines)
        == [2, 2, 2, 0]
    )
    assert text.words == 9 and text.figures == pytest.approx(1 / 9)


@pytest.mark.timeout(120)
def test_a_tiles_words_are_kept_by_id_and_quoted_by_its_hits(tmp_path):
    (tmp_path / "docs").mkdir()
    make_pdf(
        tmp_path / "docs" / "report.pdf",
        [
            ["Revenue by region", "Region Q1 Q2 Q3", "West 4,215 4,460 4,870", "East 3,100 3,020 2,950"],
            ["Shipments by product line"],
        ],
    )
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    index.add([tmp_path / "docs"])
    hit = index.search(SearchRequest("West revenue", k=1, mode="lexical"))[0]
    assert hit.snippet == "Revenue by region … West 4,215 4,460 4,870" and len(hit.boxes) == 2
    tile_id = index.catalog.tile_at(hit.doc_id, hit.page, hit.tile).id
    assert set(index.catalog.derived.get([tile_id])) == {tile_id}  # kept for the next search
    assert tile_texts(index.catalog, [tile_id, 10**9]).keys() == {tile_id}  # an unknown id is left out
    # a tile not kept yet is read from the rows a search has already read, not again from the catalog
    other = index.catalog.tile_at("report", 2, 0)
    given = dataclasses.replace(other, spans=[["Given line", [0, 0, 1, 1]]])
    assert tile_texts(index.catalog, [other.id], {other.id: given})[other.id].words == 2
