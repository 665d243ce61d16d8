"""The search engine (``search/engine.py``) over a store, without ``Index``: a request in, hits with
their evidence out."""

from __future__ import annotations

import pytest

from pagesight import Index
from pagesight.errors import PagesightError
from pagesight.request import SearchRequest
from pagesight.search import engine
from tests.conftest import make_pdf


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("engine")
    docs = folder / "docs"
    docs.mkdir()
    make_pdf(docs / "owls.pdf", [["barn owls hunt voles at night"], ["owl pellets hold vole bones"]])
    make_pdf(docs / "tides.pdf", [["spring tides follow the new moon"]])
    index = Index.open(folder / "ix", settings={"dense_model": None})
    assert index.add([docs], jobs=1).ok
    yield index.store
    index.close()


@pytest.mark.timeout(60)
def test_a_lexical_search_gives_hits_with_snippets_and_boxes(store):
    hits = engine.search_text(store, SearchRequest("owl pellets", k=2))
    assert [hit.page_id for hit in hits] == ["owls_2", "owls_1"]
    assert "pellets" in hits[0].snippet and hits[0].boxes and hits[0].scores["bm25"] > 0
    bare = engine.search_text(store, SearchRequest("owl pellets", k=2), evidence=False)
    assert [hit.page_id for hit in bare] == ["owls_2", "owls_1"] and bare[0].snippet == ""


@pytest.mark.timeout(60)
def test_documents_restrict_the_search_and_a_rerank_step_reorders_it(store):
    only = engine.search_text(store, SearchRequest("owls tides moon", k=5, doc_ids=["tides"]))
    assert {hit.doc_id for hit in only} == {"tides"}

    def reverse(query: str, ranked):
        head = [(tile_id, float(n)) for n, (tile_id, _) in enumerate(ranked)]
        return sorted(head, key=lambda item: -item[1]), head

    plain = engine.search_text(store, SearchRequest("owls voles", k=2, document_weight=0))
    flipped = engine.search_text(store, SearchRequest("owls voles", k=2, document_weight=0), rerank=reverse)
    assert [h.page_id for h in flipped] == [h.page_id for h in plain][::-1]
    assert "rerank" in flipped[0].scores


@pytest.mark.timeout(60)
def test_what_the_index_cannot_answer_is_refused(store):
    for request, message in (
        (SearchRequest("owls", mode="dense"), "index has no dense vectors"),
        (SearchRequest("owls", mode="visual"), "index has no visual vectors"),
        (SearchRequest("   "), "the query is empty"),
        (SearchRequest("owls", doc_ids=["bats"]), "no document 'bats'"),
    ):
        with pytest.raises(PagesightError, match=message):
            engine.search_text(store, request)
