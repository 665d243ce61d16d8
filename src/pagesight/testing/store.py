"""The store contract (``store/base.py``) as a test suite to subclass: what every store must do,
checked through the ``Store`` and ``Catalog`` methods themselves, not ``Index``.

A store of another package passes when a class gives its location::

    import pytest
    from pagesight.testing.store import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def location(self, tmp_path):
            return f"myscheme:{tmp_path / 'index'}"

The project runs it against its local store and Qdrant's local mode (``tests/store/test_contract.py``),
and against a store declared by a plug-in's entry point (``tests/test_plugins.py``). Needs pytest
and pytest-timeout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pagesight.errors import SettingsConflict
from pagesight.records import Document, Page, Span, Tile
from pagesight.settings import Settings
from pagesight.store.base import Allowed, open_store, store_exists
from pagesight.where import document_fields, parse

SETTINGS = Settings(dense_model=None)


def document(doc_id: str, pages: list[list[str]], source: str = "") -> Document:
    """A document of one tile a page, each line of a page a span 20 pixels high."""
    made = []
    for number, lines in enumerate(pages, 1):
        spans = [Span(text, (10.0, 20.0 * i, 300.0, 20.0 * i + 18), "pdf") for i, text in enumerate(lines)]
        tile = Tile(0, (0.0, 0.0, 400.0, 20.0 * len(lines) + 20), spans)
        made.append(Page(number, 400, 20 * len(lines) + 20, "pdf", [tile]))
    return Document(doc_id, source or f"/docs/{doc_id}.pdf", f"sha-{doc_id}", "pdf", 100, 1, made)


OWLS = document("owls", [["barn owls hunt voles at night"], ["owl pellets hold vole bones"]])
TIDES = document("tides", [["spring tides follow the new moon"]])


class StoreContract:
    @pytest.fixture
    def location(self, tmp_path: Path) -> str:
        raise NotImplementedError

    @pytest.fixture
    def store(self, location: str):
        opened = open_store(location, create=True, settings=SETTINGS)
        yield opened
        opened.close()

    @staticmethod
    def put(store, *documents: Document) -> None:
        with store.writing():
            for doc in documents:
                store.catalog.put_document(doc, {})
            store.refresh()

    @staticmethod
    def found(store, query: str, allowed=None) -> list[str]:
        """The documents of the lexical run's tiles, best first."""
        run = store.retrievers().lexical.search(query, 10, allowed)
        rows = store.catalog.tiles([tile_id for tile_id, _ in run], spans=False)
        return [rows[tile_id].doc_id for tile_id, _ in run]

    @pytest.mark.timeout(120)
    def test_a_document_is_stored_whole_and_read_back(self, store):
        before = store.catalog.generation()
        self.put(store, OWLS, TIDES)
        catalog = store.catalog
        assert catalog.generation() > before
        assert [row.id for row in catalog.documents()] == ["owls", "tides"]
        row = catalog.document("owls")
        assert (row.n_pages, row.sha256, row.type) == (2, "sha-owls", "pdf")
        assert [r.id for r in catalog.documents_from("/docs/owls.pdf")] == ["owls"]
        assert catalog.counts()["documents"] == 2 and catalog.counts()["pages"] == 3
        tile = catalog.tile_at("owls", 2, 0)
        assert tile is not None and tile.spans[0][0] == "owl pellets hold vole bones"
        assert [t.idx for t in catalog.page_tiles("owls", 1)] == [0] and catalog.n_tiles("owls", 1) == 1
        ids = catalog.tile_ids_of(["owls"])
        assert len(ids) == 2 and set(catalog.tiles(list(ids)).keys()) == set(ids.tolist())
        assert sorted(text for _, text in catalog.tile_texts())[0].startswith("barn owls")
        assert catalog.document("nothing") is None

    @pytest.mark.timeout(120)
    def test_each_tile_has_its_pages_heading_without_running_lines(self, store):
        statements = document(
            "filing",
            [
                ["ACME Corp", "Consolidated Balance Sheets", "Total assets 1,204 1,100"],
                ["ACME Corp", "Notes to the statements", "The balance sheet is described here, in prose."],
                ["ACME Corp", "Consolidated Statements of Cash Flows", "Capital expenditures (220) (198)"],
                ["ACME Corp", "the cash flow statement is described here, at length, in prose."],
            ],
        )
        self.put(store, statements, TIDES)
        ids = [store.catalog.tile_at("filing", page, 0).id for page in (1, 2, 3, 4)]
        headings = store.catalog.headings(ids + [10**9])  # an unknown id is left out
        # the company's name opens every page: a running line, no heading
        assert [headings[i] for i in ids] == [
            "Consolidated Balance Sheets",
            "Notes to the statements",
            "Consolidated Statements of Cash Flows",
            "",
        ]
        # kept or read again, the same
        assert store.catalog.headings(ids[:1]) == {ids[0]: "Consolidated Balance Sheets"}
        assert store.catalog.headings([]) == {}
        # each tile's document and page, kept or read again; an unknown id is left out
        for _ in range(2):
            pages = store.catalog.tile_pages([*ids, 10**9])
            assert pages == {tile_id: ("filing", page) for tile_id, page in zip(ids, (1, 2, 3, 4))}

    @pytest.mark.timeout(120)
    def test_each_tile_has_its_pages_language(self, store):
        mixed = document("mixed", [["spring tides follow the new moon"], ["les marées suivent la lune"]])
        mixed.pages[1].language = "fr"
        self.put(store, mixed)
        ids = [store.catalog.tile_at("mixed", page, 0).id for page in (1, 2)]
        for _ in range(2):  # kept or read again, the same; an unknown id is left out
            assert store.catalog.tile_languages([*ids, 10**9]) == {ids[0]: "en", ids[1]: "fr"}
        assert store.catalog.tile_languages([]) == {}

    @pytest.mark.timeout(120)
    def test_searches_see_the_documents_and_keep_to_the_allowed_tiles(self, store):
        self.put(store, OWLS, TIDES)
        assert self.found(store, "voles owls")[0] == "owls"
        assert self.found(store, "moon tides") == ["tides"]
        only = store.catalog.tile_ids_of(["tides"])
        assert self.found(store, "owls tides moon", only) == ["tides"]
        assert self.found(store, "owls", np.zeros(0, dtype=np.int64)) == []

    @pytest.mark.timeout(120)
    def test_a_replaced_document_has_its_new_pages_only(self, store):
        self.put(store, OWLS)
        self.put(store, document("owls", [["snowy owls nest on tundra"]]))
        assert store.catalog.document("owls").n_pages == 1
        assert [t.spans[0][0] for t in (store.catalog.tile_at("owls", 1, 0),)] == [
            "snowy owls nest on tundra"
        ]
        assert store.catalog.tile_at("owls", 2, 0) is None
        assert self.found(store, "voles pellets") == []
        assert self.found(store, "tundra") == ["owls"]

    @pytest.mark.timeout(120)
    def test_a_deleted_document_is_gone_from_catalog_and_search(self, store):
        self.put(store, OWLS, TIDES)
        with store.writing():
            assert store.catalog.delete_document("owls")
            assert not store.catalog.delete_document("owls")
            store.refresh()
        assert [row.id for row in store.catalog.documents()] == ["tides"]
        assert len(store.catalog.tile_ids_of(["owls"])) == 0
        assert self.found(store, "owls voles tides") == ["tides"]

    @pytest.mark.timeout(120)
    @pytest.mark.parametrize("phrases", [True, False])
    def test_words_side_by_side_outrank_the_same_words_apart(self, location, phrases):
        """With ``phrases`` (the default) a row "Total current liabilities" outranks prose holding
        those words apart, more often; without, the prose wins, as plain BM25 has it."""
        statements = [
            document(f"statement{n}", [["Total current liabilities 4,521 3,980", "Total assets 9,100"]])
            for n in (1, 2)
        ]
        prose = document("prose", [["In total, liabilities grew; current debt fell"]])
        store = open_store(location, create=True, settings=Settings(dense_model=None, phrases=phrases))
        try:
            self.put(store, *statements, prose, OWLS, TIDES)
            first = self.found(store, "What were the total current liabilities?")[0]
        finally:
            store.close()
        assert (first != "prose") == phrases

    @pytest.mark.timeout(120)
    @pytest.mark.parametrize("term_weights", [True, False])
    def test_a_questions_subject_outweighs_its_instructions(self, location, term_weights):
        """With ``term_weights`` (the default) "liabilities", which clusters on the pages about
        it, outweighs "information provided" and "based", spread over every page: the statement
        leads. Without, the prose holding all the question's words does."""
        filler = [
            document(f"item{n}", [[f"The information provided in this filing is based on item {n}"]])
            for n in range(12)
        ]
        statement = document("statement", [["Liabilities: current liabilities 10, other liabilities 4"]])
        prose = document("prose", [["The information provided on liabilities is based on notes"]])
        store = open_store(
            location, create=True, settings=Settings(dense_model=None, term_weights=term_weights)
        )
        try:
            self.put(store, *filler, statement, prose)
            first = self.found(store, "Based on the information provided, what were the liabilities?")[0]
        finally:
            store.close()
        assert first == ("statement" if term_weights else "prose")

    @pytest.mark.timeout(120)
    def test_a_moved_file_is_touched_not_rewritten(self, store):
        self.put(store, OWLS)
        generation = store.catalog.generation()
        with store.writing():
            store.catalog.touch_document("owls", "/elsewhere/owls.pdf", 7)
        row = store.catalog.document("owls")
        assert (str(row.source), row.mtime_ns) == ("/elsewhere/owls.pdf", 7)
        assert store.catalog.generation() == generation

    @pytest.mark.timeout(120)
    def test_the_documents_where_are_exactly_those_whose_fields_pass(self, store):
        """``documents_where`` keeps to what ``where`` says of each document's fields, whatever
        the store narrows them by: numbers against text, prefixes, absent fields, odd names."""
        given = {
            "atlas": {"team": "red", "rank": 0, "code": "007", "budget": 3.5, "region.name": "north"},
            "basin": {"team": "blue", "rank": "1", "code": "7", "budget": "unknown", "tags": ["ice"]},
            "cirque": {"team": "red team", "rank": 2.0, "budget": float("inf"), "region.name": "south"},
            "delta": {"team": "Red", "rank": True, "code": "nan", "budget": -12},
        }
        documents = [document(doc_id, [[f"{doc_id} moraine"]]) for doc_id in given]
        for made in documents:
            made.meta = {"fields": given[made.id]}
        self.put(store, *documents)
        store.catalog.documents()  # every row once, as the reference reads them
        for text in (
            "team = red",
            "team != red",
            "team ^= red",
            "team in (red, blue, 5)",
            "rank = 1",
            "rank >= 1 and team != blue",
            "rank < 1",
            "code = 7",
            "code = '007'",
            "code != 7",
            "budget > 3",
            "budget <= 3.5",
            "budget = unknown",
            "region.name = north",
            "region.name > n",
            "tags = \"['ice']\"",
            "missing != 1",
            "title >= ''",
            "id in (atlas, delta) and pages = 1",
            "type = pdf and size > 50",
        ):
            given_filter = parse(text)
            expected = [
                row.id for row in store.catalog.documents() if given_filter.passes(document_fields(row))
            ]
            assert [row.id for row in store.catalog.documents_where(given_filter)] == expected, text
            assert self.searched_where(store, expected, given_filter) == expected, text
        assert store.catalog.document_count() == 4
        with store.writing():
            store.catalog.touch_document("atlas", "/elsewhere/atlas.pdf", 7)
        assert [row.id for row in store.catalog.documents_where(parse("path ^= /elsewhere/"))] == ["atlas"]
        moved = parse("path = '/elsewhere/atlas.pdf'")
        assert self.searched_where(store, ["atlas"], moved) == ["atlas"]  # a store's tiles follow too

    @staticmethod
    def searched_where(store, passing: list[str], given_filter) -> list[str]:
        """The documents of the tiles a lexical search for every document keeps to when it is
        allowed the documents ``passing`` found by ``given_filter`` (a store may filter its tiles by
        the filter itself: ``Allowed.where``)."""
        allowed = Allowed(passing, lambda: store.catalog.tile_ids_of(passing), given_filter)
        run = store.retrievers().lexical.search("moraine", 10, allowed)
        pages = store.catalog.tile_pages([tile_id for tile_id, _ in run])
        return sorted({doc_id for doc_id, _ in pages.values()})

    @pytest.mark.timeout(120)
    def test_the_visual_encoder_spec_is_kept(self, store):
        assert store.catalog.visual_spec() is None
        spec = {"encoder": "clip", "dim": 4, "multi_vector": False}
        with store.writing():
            store.catalog.set_visual_spec(spec)
        assert store.catalog.visual_spec() == spec

    @pytest.mark.timeout(120)
    def test_a_store_opened_again_holds_its_documents_and_its_settings(self, location, store):
        self.put(store, OWLS)
        store.close()
        assert store_exists(location)
        again = open_store(location, create=False, settings=None)
        try:
            assert [row.id for row in again.catalog.documents()] == ["owls"]
            assert again.catalog.settings == SETTINGS
            assert self.found(again, "pellets") == ["owls"]
        finally:
            again.close()
        with pytest.raises(SettingsConflict):
            open_store(location, create=False, settings={"dpi": SETTINGS.dpi + 1})
