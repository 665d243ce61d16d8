"""The stores of one index in one process share the retrievers they build in memory while a writer
is at work, and with ``max_lag`` rebuild them at most that often (a server under ingestion)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.records import Document, Page, Span, Tile
from pagesight.settings import Settings
from pagesight.store.local.lock import WriteLock
from tests.conftest import make_pdf

pytestmark = pytest.mark.timeout(120)


def _document(doc_id: str, text: str) -> Document:
    tile = Tile(
        index=0, box=(0, 0, 850, 1100), spans=[Span(text=text, box=(100, 100, 600, 120), source="pdf")]
    )
    page = Page(number=1, width=850, height=1100, text_source="pdf", tiles=[tile])
    return Document(
        id=doc_id,
        source=f"/nowhere/{doc_id}.pdf",
        sha256=doc_id,
        type="pdf",
        size=1,
        mtime_ns=1,
        pages=[page],
    )


def test_searches_share_one_build_and_lag_a_writer_by_at_most_max_lag(tmp_path: Path):
    root = tmp_path / "index"
    with Index.open(root, settings=Settings(dense_model=None)) as first:
        assert first.add([make_pdf(tmp_path / "owls.pdf", [["barn owls hunt voles"]])]).ok
    one, two, writer = (Index.open(root, create=False) for _ in range(3))
    assert one.store.retrievers() is two.store.retrievers()  # loaded once for the process

    with WriteLock(root):  # a writer at work: it commits, the files lag until it saves them
        writer.catalog.put_document(_document("tides", "spring tides follow the moon"), {})
        assert [h.doc_id for h in one.search("tides moon", k=1)] == ["tides"]  # built in memory
        assert two.store.retrievers() is one.store.retrievers()  # by one store, for both

        one.store.max_lag = two.store.max_lag = 60.0
        writer.catalog.put_document(_document("glaciers", "glaciers carve valleys"), {})
        assert one.search("glaciers valleys", k=1) == []  # within the lag: the last build
        two.store.max_lag = 0.0
        assert [h.doc_id for h in two.search("glaciers valleys", k=1)] == ["glaciers"]
    for index in (one, two, writer):
        index.close()


def test_a_server_searches_the_last_build_while_the_next_is_made_beside(tmp_path: Path):
    root = tmp_path / "index"
    with Index.open(root, settings=Settings(dense_model=None)) as first:
        assert first.add([make_pdf(tmp_path / "owls.pdf", [["barn owls hunt voles"]])]).ok
    server, writer = (Index.open(root, create=False) for _ in range(2))
    server.store.max_lag = 0.05
    assert [h.doc_id for h in server.search("owls", k=1)] == ["owls"]  # the files, loaded
    with WriteLock(root):
        writer.catalog.put_document(_document("tides", "spring tides follow the moon"), {})
        time.sleep(0.1)  # the last build is older than the lag
        assert server.search("tides moon", k=1) == []  # answered at once, from the last build
        deadline = time.monotonic() + 60
        while not server.search("tides moon", k=1) and time.monotonic() < deadline:
            time.sleep(0.05)  # the next build, made beside the searches, is taken when ready
        assert [h.doc_id for h in server.search("tides moon", k=1)] == ["tides"]
        # the next builds wait twice as long as that one took, when that is longer than the lag
        shared = server.store._shared
        assert shared.took > 0 and shared.lag(server.store.max_lag) == max(0.05, 2 * shared.took)
        shared.took = 30.0  # a build as slow as a big index's: a commit now waits a minute
        writer.catalog.put_document(_document("glaciers", "glaciers carve valleys"), {})
        time.sleep(0.1)
        assert server.search("glaciers valleys", k=1) == [] and not shared.building
    for index in (server, writer):
        index.close()


def test_the_stores_of_an_index_share_the_tile_rows_their_searches_read(tmp_path: Path):
    root = tmp_path / "index"
    with Index.open(root, settings=Settings(dense_model=None)) as first:
        assert first.add([make_pdf(tmp_path / "owls.pdf", [["barn owls hunt voles", "at night"]])]).ok
    one, two = (Index.open(root, create=False) for _ in range(2))
    (hit,) = one.search("owls voles", k=1)
    (tile_id,) = one.catalog.tile_ids_of(["owls"])
    cached = two.catalog.rows.get([tile_id])  # the other store's cache: the same one
    assert list(cached) == [tile_id] and cached[tile_id] == two.catalog._tiles([tile_id], True)[tile_id]
    assert cached[tile_id].spans[0][0] == "barn owls hunt voles" and hit.snippet.startswith("barn owls")
    assert two.search("owls voles", k=1)[0].to_dict() == hit.to_dict()
    for index in (one, two):
        index.close()


def test_a_writer_waits_out_a_brief_hold_and_is_refused_a_long_one(tmp_path: Path, monkeypatch):
    """The merger holds the write lock only for its pointer swap: a writer arriving then waits
    (``lock.WAIT``) instead of failing; a lock held past the wait is refused, naming the index."""
    from pagesight import IndexLockedError
    from pagesight.store.local import lock

    root = tmp_path / "index"
    pdf = make_pdf(tmp_path / "owls.pdf", [["barn owls hunt voles"]])
    Index.open(root, settings=Settings(dense_model=None)).close()
    held, release = threading.Event(), threading.Event()

    def swap() -> None:  # a merger's moment under the lock, on a lock file descriptor of its own
        with WriteLock(root):
            held.set()
            release.wait(timeout=60)

    monkeypatch.setattr(lock, "WAIT", 60.0)
    holder = threading.Thread(target=swap)
    holder.start()
    held.wait(timeout=60)
    threading.Timer(0.3, release.set).start()
    with Index.open(root, create=False) as index:
        assert index.add([pdf]).ok  # waited for the swap, then wrote
        assert [h.doc_id for h in index.search("owls voles", k=1)] == ["owls"]
    holder.join(timeout=60)

    monkeypatch.setattr(lock, "WAIT", 0.2)
    held.clear(), release.clear()
    holder = threading.Thread(target=swap)
    holder.start()
    held.wait(timeout=60)
    try:
        with Index.open(root, create=False) as index:
            with pytest.raises(IndexLockedError, match=str(root)):
                index.add([make_pdf(tmp_path / "tides.pdf", [["spring tides"]])])
            assert index.documents() == ["owls"]  # nothing stored is lost
    finally:
        release.set()
        holder.join(timeout=60)
