"""The Qdrant store, run in qdrant-client's local mode: the server's API without a server (none
can be installed here). Every verb works on it and gives the local store's results."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.errors import PagesightError
from pagesight.settings import Settings
from tests.conftest import SAMPLES, cli, make_pdf

pytest.importorskip("qdrant_client")

TOPICS = {
    "owls": ["Barn owls hunt small mammals at night", "Owl pellets hold the bones of voles"],
    "tides": ["Spring tides follow the full and new moon", "Neap tides have the smallest range"],
    "glaciers": ["Glaciers carve U-shaped valleys", "Moraines mark where the ice stopped"],
    "volcanoes": ["Basalt lava flows are runny and hot", "Ash clouds ground aircraft for days"],
}
QUERIES = [
    "bones of voles",
    "full moon tides",
    "U-shaped valleys",
    "aircraft grounded by ash",
    "West region Q3",
]


def corpus(folder: Path) -> Path:
    folder.mkdir()
    for name, pages in TOPICS.items():
        make_pdf(
            folder / f"{name}.pdf", [[line, f"notes on {name} page {n}"] for n, line in enumerate(pages)]
        )
    (folder / "quarterly-report.pdf").write_bytes((SAMPLES / "quarterly-report.pdf").read_bytes())
    return folder


def test_the_qdrant_store_gives_the_local_stores_results(tmp_path: Path):
    docs = corpus(tmp_path / "docs")
    local = Index.open(tmp_path / "local")
    remote = Index.open(f"qdrant:{tmp_path / 'q'}")
    for index in (local, remote):
        report = index.add([docs])
        assert report.ok and len(report.added) == 5
    counts = local.catalog.counts()
    assert remote.catalog.counts() == counts and counts["vectors"] > 0
    assert remote.documents() == local.documents()
    for query in QUERIES:
        for mode in ("lexical", "dense", "hybrid"):
            ours, theirs = local.search(query, k=3, mode=mode), remote.search(query, k=3, mode=mode)
            assert [h.page_id for h in theirs] == [h.page_id for h in ours], (query, mode)
            assert [(h.snippet, h.boxes, h.tile_box) for h in theirs] == [
                (h.snippet, h.boxes, h.tile_box) for h in ours
            ]
            if mode == "dense":  # a tile's best chunk, by Qdrant's MAX_SIM over its chunk vectors
                # (float32 in Qdrant, float16 in the local store: within its rounding)
                assert [h.score for h in theirs] == pytest.approx([h.score for h in ours], abs=1e-3)
            if mode == "hybrid":  # the learned ranker reads the same headings and scores
                ranked = [h.scores["ranker"] for h in ours]
                assert [h.scores["ranker"] for h in theirs] == pytest.approx(ranked, abs=1e-3)
    # how widely a search looks: local mode searches exactly (a server's hnsw_ef), and no Qdrant
    # index is an IVF one, while the local store's small parts are exact whatever nprobe says
    dense = [h.page_id for h in remote.search(QUERIES[0], k=3, mode="dense")]
    assert [h.page_id for h in remote.search(QUERIES[0], k=3, mode="dense", ef_search=1)] == dense
    assert [h.page_id for h in local.search(QUERIES[0], k=3, mode="dense", nprobe=1)] == dense
    with pytest.raises(PagesightError, match="nprobe: a Qdrant store has no IVF index"):
        remote.search(QUERIES[0], mode="dense", nprobe=1)
    only = remote.search("tides", k=5, doc_ids=["tides"], mode="lexical")
    assert {h.doc_id for h in only} == {"tides"} and len(only) == 2
    assert (
        remote.ask("What was the West region's revenue in Q3?").text == "4,870 thousand"
    )  # the table's unit
    assert remote.tile_image("owls", 1).size == local.tile_image("owls", 1).size
    local.close()
    remote.close()


def test_replace_delete_and_reopen_through_the_command_line(tmp_path: Path):
    docs = corpus(tmp_path / "docs")
    store = f"qdrant:{tmp_path / 'q'}"
    assert json.loads(cli("ingest", str(docs), "--index", store, "--no-dense", "--json").stdout)["added"] == 5
    again = json.loads(cli("ingest", str(docs), "--index", store, "--json").stdout)
    assert (again["added"], again["unchanged"]) == (0, 5)

    make_pdf(docs / "owls.pdf", [["Snowy owls nest on the tundra"]])
    replaced = json.loads(cli("ingest", str(docs / "owls.pdf"), "--index", store, "--json").stdout)
    assert (replaced["replaced"], replaced["unchanged"]) == (1, 0)
    hits = json.loads(cli("search", "owls", "--index", store, "--json").stdout)
    assert [(h["page_id"], "Snowy" in h["snippet"]) for h in hits if h["doc_id"] == "owls"] == [
        ("owls_1", True)
    ]
    assert json.loads(cli("search", "voles pellets", "--index", store, "--json").stdout) == []

    cli("delete", "tides", "--index", store)
    info = json.loads(cli("info", "--index", store, "--json").stdout)
    assert (info["documents"], info["pages"], info["generation"]) == (4, 7, 7)
    assert info["retrievers_generation"] == info["generation"]
    listed = json.loads(cli("documents", "--index", store, "--json").stdout)
    assert [d["id"] for d in listed] == ["glaciers", "owls", "quarterly-report", "volcanoes"]
    assert listed[1]["source"] == str(docs / "owls.pdf")
    missing = cli("delete", "tides", "--index", store, check=False)
    assert missing.returncode == 1 and "no document 'tides'" in missing.stderr


# A writer that kills itself with SIGKILL at one point of its third document's write: before the
# document point (the commit) is written, or just after it, before its tiles turn live.
WRITER = """
import os, signal, sys
from pagesight import Index
from pagesight.errors import PagesightError
from pagesight.settings import Settings
from pagesight.store.qdrant import catalog
stage = sys.argv[3]
seen = []
if stage == "before-commit":
    from qdrant_client import QdrantClient
    upsert = QdrantClient.upsert
    def upserting(self, collection_name, points, **options):
        if collection_name.endswith("-catalog") and points[0].payload.get("kind") == "document":
            seen.append(points[0].payload["id"])
            if len(seen) == 3:
                os.kill(os.getpid(), signal.SIGKILL)
        return upsert(self, collection_name, points, **options)
    QdrantClient.upsert = upserting
else:
    finish = catalog.QdrantCatalog._finish
    def finishing(self, doc_id, version):
        seen.append(doc_id)
        if len(seen) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return finish(self, doc_id, version)
    catalog.QdrantCatalog._finish = finishing
Index.open(sys.argv[1], settings=Settings(dense_model=None)).add(sys.argv[2], jobs=1)
"""


@pytest.mark.parametrize(("stage", "whole"), [("before-commit", 2), ("after-commit", 3)])
def test_a_writer_killed_mid_document_leaves_whole_documents(tmp_path: Path, stage: str, whole: int):
    docs = corpus(tmp_path / "docs")
    store = f"qdrant:{tmp_path / 'q'}"
    done = subprocess.run(
        [sys.executable, "-c", WRITER, store, str(docs), stage], timeout=300, capture_output=True
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()

    index = Index.open(store, create=False)
    assert index.settings == Settings(dense_model=None)
    assert len(index.documents()) == whole
    assert index.catalog.pending()  # the killed write is still noted
    hits = index.search("notes on page revenue", k=50, mode="lexical")  # repairs: no writer is at work
    assert not index.catalog.pending()
    assert {hit.doc_id for hit in hits} == set(index.documents())
    for document in index.catalog.documents():  # every page of every document can be found
        for page in range(1, document.n_pages + 1):
            assert index.catalog.page_tiles(document.id, page), (document.id, page)
    client = index.store.client
    assert client.count(index.catalog.tiles_name).count == sum(d.n_pages for d in index.catalog.documents())

    report = index.add([docs])  # the next run finishes the work
    assert report.ok and len(index.documents()) == 5
    index.close()


def test_bm25_scores_equal_the_local_stores_as_the_index_grows_and_shrinks(tmp_path: Path):
    # Documents of very different lengths, added one at a time: each is weighed with the average
    # tile length of its moment, so without weighing again the first ones score otherwise.
    settings = Settings(dense_model=None)
    local = Index.open(tmp_path / "local", settings=settings)
    remote = Index.open(f"qdrant:{tmp_path / 'q'}", settings=settings)
    words = ["owls", "voles", "tides", "moons", "glaciers", "valleys", "lava", "ash", "basalt", "moraine"]
    for n, name in enumerate(words):
        lines = [f"{name} and {words[(n + 1) % len(words)]}"] + [
            " ".join(words[: n + 1]) for _ in range(n * 3)
        ]
        pdf = make_pdf(tmp_path / f"{name}.pdf", [lines])
        for index in (local, remote):
            assert index.add([pdf]).ok

    def same_scores(local: Index):
        for query in ("owls", "tides and ash", "basalt moraine valleys", "voles"):
            ours = local.search(query, k=10, mode="lexical")
            theirs = remote.search(query, k=10, mode="lexical")
            assert [h.page_id for h in theirs] == [h.page_id for h in ours], query
            assert [h.score for h in theirs] == pytest.approx([h.score for h in ours], rel=0.01), query

    same_scores(local)
    local.close()
    assert remote.delete("owls") and remote.delete("glaciers")
    # The local store keeps deleted tiles in its BM25 statistics until it rebuilds (Lucene's way);
    # Qdrant's statistics drop them at once: compare with a local index of what is left.
    left = Index.open(tmp_path / "left", settings=settings)
    assert left.add([tmp_path / f"{name}.pdf" for name in words if name not in ("owls", "glaciers")]).ok
    same_scores(left)
    left.close()
    remote.close()


@pytest.mark.timeout(120)
def test_a_search_within_documents_filters_their_tiles_by_payload_listing_none(tmp_path: Path):
    """Qdrant keeps to some documents by a condition on the tiles' ``doc_id`` payload: the ids of
    their tiles are never listed (the local store lists them, its vector stores filter by id)."""
    from pagesight.store.base import Allowed

    for name, words in (("owls", "barn owls hunt voles"), ("tides", "owls watch spring tides")):
        make_pdf(tmp_path / f"{name}.pdf", [[words]])
    for location in (f"qdrant:{tmp_path / 'q'}", str(tmp_path / "local")):
        with Index.open(location, settings={"dense_model": None}) as index:
            assert index.add([tmp_path / "owls.pdf", tmp_path / "tides.pdf"]).ok
            listed = []

            def tile_ids(index=index, listed=listed):
                listed.append(True)
                return index.catalog.tile_ids_of(["tides"])

            run = index.store.retrievers().lexical.search("owls", 10, Allowed(["tides"], tile_ids))
            rows = index.catalog.tiles([tile_id for tile_id, _ in run], spans=False)
            assert [row.doc_id for row in rows.values()] == ["tides"]
            assert bool(listed) == (not location.startswith("qdrant:"))
            assert index.search("owls", where="id = owls")[0].doc_id == "owls"


@pytest.mark.timeout(180)
def test_a_filter_is_payload_conditions_on_documents_and_tiles_and_old_indexes_gain_them(tmp_path: Path):
    """``where`` reaches the server as conditions on the document points' fields: the exact clauses
    let through only the documents passing, ``^=`` every document holding the field (checked after).
    A search keeps to their tiles by the same conditions on the tiles' own fields, listing no
    document, when every clause is exact. An index written before documents (format 1) or tiles
    (format 2) carried their fields gains them when next opened."""
    from pagesight.store.base import Allowed
    from pagesight.store.qdrant.fields import conditions
    from pagesight.where import parse

    docs = tmp_path / "docs"
    docs.mkdir()
    for n, name in enumerate(("atlas", "basin", "cirque", "delta")):
        made = make_pdf(docs / f"{name}.pdf", [[f"{name} glacier moraine"]])
        team = "red" if n % 2 == 0 else "blue"
        made.with_name(made.name + ".meta.json").write_text(json.dumps({"team": team, "rank": n}))
    location = f"qdrant:{tmp_path / 'q'}"
    with Index.open(location, settings={"dense_model": None}) as index:
        assert index.add([docs], jobs=1).ok
        catalog = index.catalog

        def let_through(text: str) -> int:
            return catalog.client.count(catalog.catalog_name, count_filter=conditions(parse(text))).count

        assert let_through("team = red") == 2 and let_through("rank >= 2") == 2
        assert let_through("team = red and rank > 0") == 1 and let_through("team in (blue, 0)") == 2
        assert let_through("team ^= re") == 4  # the field's presence: checked by the catalog
        assert [row["id"] for row in index.document_list("team ^= re")] == ["atlas", "cirque"]

        def tile_filter(text: str) -> str:
            return repr(catalog.live_filter(Allowed(["atlas", "cirque"], list, parse(text))))

        assert "doc_id" not in tile_filter("team = red and rank < 3")  # the tiles' fields alone
        assert "atlas" in tile_filter("team ^= re")  # inexact: the documents passing, listed

        # as an index of format 1 was: no fields on its documents or tiles
        for row in catalog.documents():
            catalog.client.delete_payload(catalog.catalog_name, ["where"], [catalog._document_point(row.id)])
        catalog.client.delete_payload(catalog.tiles_name, ["where"], catalog.live_filter())
        catalog._index["format_version"] = 1
        catalog._save_index()
    with Index.open(location) as index:
        assert [hit.doc_id for hit in index.search("glacier moraine", where="team = blue and rank < 3")] == [
            "basin"
        ]
        assert index.catalog._index["format_version"] == 3


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
def test_a_server_indexes_each_where_field_once_on_tiles_and_documents(tmp_path: Path):
    """On a server each ``where`` field gets a payload index (its text, and its number where it
    has one) the first time a document holds it. Run through qdrant-client's local mode taken as a
    server (it takes the same requests, and ignores the indexes), so the requests are the real
    client's, validated by it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, fields in (("atlas", {"team": "red"}), ("basin", {"team": "blue"}), ("cirque", {"rank": 2})):
        made = make_pdf(docs / f"{name}.pdf", [[f"{name} glacier moraine"]])
        made.with_name(made.name + ".meta.json").write_text(json.dumps(fields))
    with Index.open(f"qdrant:{tmp_path / 'q'}", settings={"dense_model": None}) as index:
        index.catalog.path = None  # as a server's catalog
        assert index.add([docs / "atlas.pdf", docs / "basin.pdf"], jobs=1).ok
        indexed = index.catalog.load()["field_indexes"]
        assert {"where.f_team.s", "where.f_id.s", "where.f_year.n"} <= set(indexed)
        assert not any("rank" in field for field in indexed) and len(indexed) == len(set(indexed))
        assert index.add([docs / "cirque.pdf"], jobs=1).ok
        added = index.catalog.load()["field_indexes"][len(indexed) :]
        assert added == ["where.f_rank.s", "where.f_rank.n"]
        assert [hit.doc_id for hit in index.search("glacier moraine", where="rank >= 2")] == ["cirque"]
