"""Document evidence in page ranking (search/documents.py): the pages of a document that matches
a query in several places rise above a lone page of another document that matches about as well."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight import Index
from pagesight.errors import PagesightError
from pagesight.eval.harness import Config
from pagesight.search.documents import document_fusion
from tests.conftest import make_pdf


def test_each_tile_gains_its_documents_best_pages():
    ranked = [(1, 10.0), (2, 8.0), (3, 7.0), (4, 6.0), (5, 2.0), (6, 1.0)]
    pages = {
        1: ("lone", 1),
        2: ("atlas", 1),
        3: ("atlas", 2),
        4: ("atlas", 3),
        5: ("atlas", 4),
        6: ("other", 1),
    }
    # Scaled by the best score: 1, 0.8, 0.7, 0.6, 0.2, 0.1. Atlas: its three best pages 2.1 (the
    # fourth does not count), lone 1, other 0.1; divided by the largest, atlas 1.
    fused = document_fusion(ranked, pages, weight=1.0)
    assert [tile for tile, _ in fused] == [2, 3, 4, 1, 5, 6]
    expected = {2: 1.8, 3: 1.7, 4: 1.6, 1: 1 + 1 / 2.1, 5: 1.2, 6: 0.1 + 0.1 / 2.1}
    assert dict(fused) == pytest.approx(expected)
    # A page counts once, by its best tile (tiles 2 and 3 share atlas's page 1: atlas 0.8, lone 1),
    # whose share its other tiles take in proportion (tile 3: 0.7 / 0.8 of it); a tile with no page
    # (deleted since the ranking) keeps its own scaled score.
    fused = dict(document_fusion(ranked, {1: ("lone", 1), 2: ("atlas", 1), 3: ("atlas", 1)}, weight=0.5))
    assert fused == pytest.approx({1: 1.5, 2: 1.2, 3: 0.7 + 0.4 * 0.7 / 0.8, 4: 0.6, 5: 0.2, 6: 0.1})
    # Documents of one page, however many tiles (web pages): the ranking stays as it was.
    web = {1: ("a", 1), 2: ("b", 1), 3: ("b", 1), 4: ("a", 1), 5: ("c", 1), 6: ("a", 1)}
    assert [tile for tile, _ in document_fusion(ranked, web, weight=1.0)] == [1, 2, 3, 4, 5, 6]
    # Negative scores (cosine similarities) are scaled from the lowest.
    fused = document_fusion([(1, 0.5), (2, -0.5)], {1: ("a", 1), 2: ("b", 1)}, weight=1.0)
    assert fused == [(1, 2.0), (2, 0.0)]
    assert document_fusion(ranked, pages, weight=0.0) == ranked


def corpus(folder: Path) -> Path:
    folder.mkdir()
    make_pdf(
        folder / "atlas.pdf",
        [
            ["Glacier moraines mark where the ice stopped.", "The valley floor is flat."],
            ["Lateral moraines line the glacier's sides.", "Boulders sit on the ridges."],
            ["A glacier leaves terminal moraines as it melts.", "Lakes fill the hollows."],
        ],
    )
    make_pdf(folder / "lone.pdf", [["Glacier moraines, glacier moraines: field notes."]])
    for name, line in [("tides", "Spring tides follow the full moon."), ("owls", "Barn owls hunt at night.")]:
        make_pdf(folder / f"{name}.pdf", [[line]])
    return folder


@pytest.mark.timeout(60)
def test_a_document_matching_on_several_pages_outranks_a_lone_page(tmp_path: Path):
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        assert index.add(corpus(tmp_path / "docs")).ok
        alone = index.search("glacier moraines", k=4, document_weight=0)
        assert alone[0].page_id == "lone_1"  # the page alone matches best
        hits = index.search("glacier moraines", k=4)
        assert [hit.doc_id for hit in hits[:3]] == ["atlas"] * 3 and hits[3].page_id == "lone_1"
        assert sorted(hit.page_id for hit in hits) == sorted(hit.page_id for hit in alone)
        with pytest.raises(PagesightError, match="document_weight must be from 0 to 100, got -1"):
            index.search("glacier moraines", document_weight=-1)


def test_evaluation_configurations_take_a_document_weight():
    config = Config.parse("rsf:0.2/doc:0")
    request = config.request
    assert (config.name, request.mode, request.alpha, request.document_weight) == (
        "rsf:0.2/doc:0",
        "hybrid",
        0.2,
        0.0,
    )
    assert (
        Config.parse("lexical").request.document_weight is None
    )  # the engine's: 1 for text, 0 for a picture
    with pytest.raises(PagesightError, match="'lexical/doc:-2': document_weight must be from 0 to 100"):
        Config.parse("lexical/doc:-2")
