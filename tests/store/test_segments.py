"""BM25 in segments (store/bm25.py, store/retrievers.py): a commit adds a segment and rewrites
none, an index built in many commits with deletes between ranks as one built at once, segments
merge by tiers with the same rankings, a merge killed midway leaves the previous set, a search
keeps the segments it opened while a merge replaces them, and an older build's single BM25 index
is built again as segments."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.store.local import bm25
from pagesight.store.local.bm25 import LexicalRetriever, plan_merges
from pagesight.store.local.postings import analysed
from pagesight.store.local.segment import Segment
from tests.conftest import make_pdf
from tests.store.pointers import deleted, pointer

pytestmark = pytest.mark.timeout(240)

WORDS = [
    "glacier",
    "moraine",
    "basalt",
    "cliff",
    "owl",
    "heron",
    "vole",
    "tundra",
    "lemming",
    "reservoir",
    "flood",
    "delta",
    "estuary",
    "sediment",
    "erosion",
    "quarry",
    "granite",
    "limestone",
    "aquifer",
    "spring",
    "meadow",
    "hedgerow",
    "orchard",
    "vineyard",
]
QUERIES = [
    "glacier moraine",
    "owl vole tundra",
    "basalt cliff heron",
    "reservoir flood delta",
    "granite quarry",
]


def corpus(folder: Path, n: int, seed: int = 7) -> list[Path]:
    """``n`` PDFs of one or two pages whose lines mix the words above unevenly."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for number in range(n):
        favourite = WORDS[number % len(WORDS)]
        pages = [
            [
                " ".join(rng.choice(WORDS + [favourite] * 4) for _ in range(rng.randint(4, 12)))
                for _ in range(3)
            ]
            for _ in range(rng.randint(1, 2))
        ]
        files.append(make_pdf(folder / f"doc{number:02d}.pdf", pages))
    return files


def ranked(index: Index) -> dict[str, list[tuple[str, int, float]]]:
    return {
        query: [
            (hit.page_id, hit.tile, round(hit.score, 5)) for hit in index.search(query, k=10, mode="lexical")
        ]
        for query in QUERIES
    }


def test_an_index_built_in_twenty_commits_with_deletes_ranks_as_one_built_at_once(tmp_path: Path):
    files = corpus(tmp_path / "docs", 30)
    settings = {"dense_model": None}
    with Index.open(tmp_path / "many", settings=settings) as many:
        for step in range(20):
            assert many.add(files[step], jobs=1).ok
            if step % 4 == 3:
                assert many.delete(files[step - 2].stem)  # a delete between commits
        assert many.add(files[20:], jobs=1).ok
        assert len(pointer(many.root)["segments"]) > 1 and deleted(many.root)
        kept = [path for path in files if many.catalog.document(path.stem) is not None]
        in_commits = ranked(many)
    with Index.open(tmp_path / "once", settings=settings) as once:
        assert once.add(kept, jobs=1).ok
        assert len(pointer(once.root)["segments"]) == 1
        at_once = ranked(once)
    assert in_commits == at_once and all(at_once.values())


def test_a_commit_that_replaces_a_document_deletes_its_old_tiles(tmp_path: Path):
    """A commit finds its new tiles from the largest id it holds and reads every id only when some
    are gone: a document replaced in the same commit as it is added again leaves none of its old
    tiles searchable."""
    files = corpus(tmp_path / "docs", 4)
    index = Index.open(tmp_path / "ix")
    index.add(files, jobs=1)
    make_pdf(files[0], [["zeppelin hangar airship"]])  # doc00 again, other words
    assert index.add([files[0]], jobs=1).ok
    current = index.store.retrievers()
    assert current.lexical.live_tiles == index.catalog.tile_count()
    assert [hit.doc_id for hit in index.search("zeppelin", k=5, mode="lexical")] == ["doc00"]
    favourite = WORDS[0]  # doc00's old favourite word, which it no longer holds
    assert all(hit.doc_id != "doc00" for hit in index.search(favourite, k=50, mode="lexical"))
    index.close()


def test_a_commit_writes_one_segment_and_rewrites_none(tmp_path: Path):
    files = corpus(tmp_path / "docs", 3)
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        assert index.add(files[:2], jobs=1).ok
        folder = index.root / "retrievers"
        before = pointer(index.root)["segments"]
        written = {p.name: p.stat().st_mtime_ns for name in before for p in (folder / name).iterdir()}
        assert index.add(files[2:], jobs=1).ok
        after = pointer(index.root)["segments"]
        assert set(before) < set(after) and len(after) == len(before) + 1
        assert {p.name: p.stat().st_mtime_ns for name in before for p in (folder / name).iterdir()} == written
        (new,) = set(after) - set(before)
        assert (
            np.load(folder / new / "tile_ids.npy").tolist()
            == index.catalog.tile_ids_of([files[2].stem]).tolist()
        )


def test_segments_merge_by_tier_and_rank_the_same(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(bm25, "MERGE_FACTOR", 3)
    files = corpus(tmp_path / "docs", 8)
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        counts = []
        for path in files:
            assert index.add([path], jobs=1).ok
            counts.append(len(pointer(index.root)["segments"]))
            if path.stem == "doc01":
                assert index.delete("doc00")
        assert max(counts) <= 3 and counts[2] < 3  # three segments of a tier became one
        assert 0 not in [len(np.load(index.root / "retrievers" / name / "tile_ids.npy"))
                         for name in pointer(index.root)["segments"]]  # fmt: skip
        merged = ranked(index)
        deleted_tiles = deleted(index.root)
    assert not set(deleted_tiles) & set(np.concatenate(
        [np.load(tmp_path / "ix" / "retrievers" / n / "tile_ids.npy") for n in pointer(tmp_path / "ix")["segments"]]
    ).tolist()) - set(deleted_tiles)  # fmt: skip
    with Index.open(tmp_path / "once", settings={"dense_model": None}) as once:
        assert once.add(files[1:], jobs=1).ok
        assert ranked(once) == merged


def test_plan_merges_takes_full_tiers_smallest_first_and_mostly_deleted_segments_alone():
    assert plan_merges([10] * 9, [0] * 9) == []
    assert plan_merges([10] * 12, [0] * 12) == [list(range(10))]
    assert plan_merges([5000] + [10] * 10, [0] * 11) == [list(range(1, 11))]  # another tier waits
    assert plan_merges([100, 10], [60, 0]) == [[0]]  # more than half deleted: compacted alone
    big = bm25.MAX_MERGED // 5
    assert plan_merges([big] * 10, [0] * 10) == [[0, 1, 2, 3, 4]]  # as many as fit in MAX_MERGED
    assert plan_merges([bm25.MAX_MERGED - 1] * 10, [0] * 10) == []  # full-sized segments stay


def test_merging_segments_keeps_postings_and_drops_deleted_tiles():
    texts = ["owl vole owl", "heron basalt", "", "owl heron heron tundra"]
    one = LexicalRetriever.build(np.arange(4), texts, phrases=True, term_weights=True)
    split = LexicalRetriever(
        [
            Segment.of(analysed(np.arange(2), texts[:2], True, None)).deleting(np.array([1])),
            Segment.of(analysed(np.arange(2, 4), texts[2:], True, None)),
        ],
        phrases=True,
        term_weights=True,
    )
    merged = Segment.merge(list(split.segments), {})
    assert merged.tile_ids.tolist() == [0, 2, 3] and merged.postings.lengths.tolist() == [
        one.postings[0].lengths[i] for i in (0, 2, 3)
    ]
    alone = LexicalRetriever.build(np.array([0, 2, 3]), [texts[i] for i in (0, 2, 3)], True, True)
    for query in ("owl", "heron tundra", "owl vole", "basalt"):
        assert LexicalRetriever([merged], phrases=True, term_weights=True).search(query, 5) == alone.search(
            query, 5
        )
        assert split.search(query, 5) == alone.search(query, 5)
        assert split.bursts.get(query.split()[0], 0.5) == alone.bursts.get(query.split()[0], 0.5)


def test_pruned_search_keeps_the_scores_and_ties_of_scoring_every_posting(monkeypatch):
    """MaxScore (store/maxscore.py) leaves common terms unscanned once a threshold is known; the
    best tiles and their float32 scores are those of scoring every posting, filters and deleted tiles
    honoured, and the pruning happens (the threshold scan made small for a small collection)."""
    from pagesight.store.local import maxscore

    rng = np.random.default_rng(3)
    vocabulary = [f"w{i}" for i in range(400)]
    frequency = 1 / np.arange(1, 401) ** 1.1  # Zipf: a few words in most tiles, most in few
    texts = [
        " ".join(rng.choice(vocabulary, rng.integers(20, 60), p=frequency / frequency.sum()))
        for _ in range(1500)
    ]
    parts = [(0, 500), (500, 1100), (1100, 1500)]
    lexical = LexicalRetriever(
        [
            Segment.of(analysed(np.arange(a, b), texts[a:b], True, None)).deleting(np.arange(0, 1500, 7))
            for a, b in parts
        ],
        phrases=True,
        term_weights=True,
    )
    monkeypatch.setattr(maxscore, "SCAN_FIRST", 40)
    queries = [
        " ".join(rng.choice(vocabulary[:60], 3)) + " " + " ".join(rng.choice(vocabulary, 5))
        for _ in range(30)
    ]
    allowed = np.arange(0, 1500, 3)
    looked_up = []  # the terms looked up for the tiles reached instead of scanned
    find = maxscore.MaxScore._find
    monkeypatch.setattr(
        maxscore.MaxScore, "_find", lambda self, term, at: looked_up.append(term) or find(self, term, at)
    )
    for query in queries:
        everything = lexical.search(query, 1500)
        assert lexical.search(query, 10) == everything[:10]
        passing = [hit for hit in everything if hit[0] % 3 == 0]
        assert lexical.search(query, 10, allowed=allowed) == passing[:10]
        assert all(tile % 7 for tile, _ in everything)  # deleted tiles never score
    assert len(looked_up) >= len(queries)


KILL_IN_MERGE = """
import os, signal, sys
from pathlib import Path
from pagesight import Index
from pagesight.store.local import bm25, segment

bm25.MERGE_FACTOR = 3
save = segment.Segment.save

def save_then_die(self, folder):
    saved = save(self, folder)
    if len(self) > int(sys.argv[3]):  # the merged segment: written, not yet named by the pointer
        os.kill(os.getpid(), signal.SIGKILL)
    return saved

segment.Segment.save = save_then_die
index = Index.open(sys.argv[1], create=False)
index.add([Path(sys.argv[2])], jobs=1)
"""


def test_a_merge_killed_midway_leaves_the_previous_set(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(bm25, "MERGE_FACTOR", 3)
    files = corpus(tmp_path / "docs", 3)
    root = tmp_path / "ix"
    with Index.open(root, settings={"dense_model": None}) as index:
        for path in files[:2]:
            assert index.add([path], jobs=1).ok
        largest = max(
            len(np.load(root / "retrievers" / n / "tile_ids.npy")) for n in pointer(root)["segments"]
        )
        before = pointer(root)
        expected = ranked(index)
    killed = subprocess.run(
        [sys.executable, "-c", KILL_IN_MERGE, str(root), str(files[2]), str(largest)],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert killed.returncode == -9, killed.stderr
    assert pointer(root) == before  # the pointer still names the old segments
    leftovers = {p.name for p in (root / "retrievers").iterdir()} - {
        *before["segments"],
        "current.json",
        "merging.lock",
    }
    assert leftovers  # the merged segment written before the kill, named by nothing
    with Index.open(root, create=False) as index:
        assert index.catalog.document(files[2].stem) is not None  # committed before the merge
        found = ranked(index)  # built in memory by this reader: the new tiles searched
        assert found != expected
        assert pointer(root) == before  # a reader writes nothing: the repair is the next writer's
        index.refresh()
        assert ranked(index) == found
    assert not ({p.name for p in (root / "retrievers").iterdir()} & leftovers)  # tidied by the writer
    with Index.open(tmp_path / "once", settings={"dense_model": None}) as once:
        assert once.add(files, jobs=1).ok
        assert ranked(once) == found


def test_a_search_keeps_the_segments_it_opened_while_a_merge_replaces_them(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(bm25, "MERGE_FACTOR", 3)
    files = corpus(tmp_path / "docs", 4)
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as writer:
        for path in files[:2]:
            assert writer.add([path], jobs=1).ok
        reader = Index.open(tmp_path / "ix", create=False)
        opened = reader.store.retrievers()
        before = opened.lexical.search("glacier moraine", 10)
        for path in files[2:]:
            assert writer.add([path], jobs=1).ok  # the third commit merges the reader's segments
        assert not set(s.name for s in opened.lexical.segments) & set(pointer(writer.root)["segments"])
        assert opened.lexical.search("glacier moraine", 10) == before  # its own set, in memory
        assert {hit.doc_id for hit in reader.search("glacier moraine", k=20, mode="lexical")} >= {
            hit.doc_id for hit in writer.search("glacier moraine", k=20, mode="lexical")
        }
        reader.close()


def test_a_dense_part_not_yet_read_is_read_after_a_merge_removed_its_file(tmp_path: Path, monkeypatch):
    """Dense parts are read when first searched: the file of one a search opened, but had not read
    yet, must still be there for it after a merge removed it (a 1 M-tile server answered 400)."""
    monkeypatch.setattr(bm25, "MERGE_FACTOR", 3)
    files = corpus(tmp_path / "docs", 3)
    with Index.open(tmp_path / "ix") as writer:
        for path in files[:2]:
            assert writer.add([path], jobs=1).ok
        opened = Index.open(tmp_path / "ix", create=False).store.retrievers()
        parts = [s.name for s in opened.lexical.segments]
        assert writer.add([files[2]], jobs=1).ok  # the third commit merges them, removing their files
        assert not any((writer.root / "retrievers" / name).exists() for name in parts)
        tile = int(opened.lexical.tile_ids[0])
        _, vectors = writer.catalog.vectors([tile])
        found = opened.dense.search(vectors[0], 5)  # reads the two parts now, from the files it opened
        assert found[0][0] == tile and found[0][1] > 0.99


def test_an_older_builds_single_bm25_index_is_built_again_as_segments(tmp_path: Path):
    files = corpus(tmp_path / "docs", 3)
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        assert index.add(files, jobs=1).ok
        expected = ranked(index)
    old = {
        "generation": pointer(tmp_path / "ix")["generation"],
        "lexical": "bm25-1-1",
        "dense": None,
        "visual": None,
    }
    (tmp_path / "ix" / "retrievers" / "current.json").write_text(json.dumps(old))
    with Index.open(tmp_path / "ix", create=False) as index:
        assert ranked(index) == expected  # built in memory by the reader
        index.refresh()  # the next writer writes them
        assert ranked(index) == expected
    assert "segments" in pointer(tmp_path / "ix")


def three_commits_and_a_delete(tmp_path: Path, monkeypatch) -> list[Path]:
    """Five documents, the first three committed one by one into ``ix`` (BM25 only) and the first
    deleted again, every merge left to a merging process the test runs itself."""
    from pagesight.store.local import merging

    monkeypatch.setattr(bm25, "MERGE_FACTOR", 3)
    monkeypatch.setattr(merging, "INLINE_MERGE", 0)  # every merge left to the merging process
    monkeypatch.setattr(merging, "start", lambda root: None)  # run by the test, in this process
    files = corpus(tmp_path / "docs", 5)
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as writer:
        for path in files[:3]:
            assert writer.add([path], jobs=1).ok
        assert writer.delete(files[0].stem)
    return files


def test_a_merge_beside_the_writer_swaps_its_segment_in_and_changes_no_ranking(tmp_path: Path, monkeypatch):
    from pagesight.store.local import merging
    from pagesight.store.local.lock import WriteLock

    files = three_commits_and_a_delete(tmp_path, monkeypatch)
    with Index.open(tmp_path / "ix", create=False) as writer:
        parts = pointer(writer.root)["segments"]
        assert len(parts) == 3  # no commit merged
        reader = Index.open(tmp_path / "ix", create=False)
        before = ranked(reader)
        generation = pointer(writer.root)["generation"]
        removed, rmtree = [], shutil.rmtree

        def removing(path, *args, **kwargs):  # whether a writer could take the lock meanwhile
            lock = WriteLock(writer.root)
            removed.append((Path(path).name, lock.acquire()))
            lock.release()
            return rmtree(path, *args, **kwargs)

        monkeypatch.setattr(shutil, "rmtree", removing)
        assert merging.merge_due(writer.root) >= 1
        monkeypatch.setattr(shutil, "rmtree", rmtree)
        after = pointer(writer.root)
        assert after["generation"] == generation and not set(parts) & set(after["segments"])
        assert deleted(writer.root) == []  # the deleted tiles were dropped by the merge
        assert not any((writer.root / "retrievers" / name).exists() for name in parts)
        assert set(parts) <= {name for name, _ in removed} and all(free for _, free in removed)
        assert ranked(reader) == before  # its own segments, in memory
        assert ranked(Index.open(tmp_path / "ix", create=False)) == before  # a new reader: the merged one
        for path in files[3:]:
            assert writer.add([path], jobs=1).ok  # the writer goes on from the merged segments
        assert set(after["segments"]) <= set(pointer(writer.root)["segments"])
        final = ranked(writer)
        reader.close()
    with Index.open(tmp_path / "once", settings={"dense_model": None}) as once:
        assert once.add(files[1:], jobs=1).ok
        assert ranked(once) == final


def test_the_merging_process_merges_a_full_tier(tmp_path: Path, monkeypatch):
    from pagesight.store.local import merging

    monkeypatch.setattr(merging, "INLINE_MERGE", 0)
    monkeypatch.setattr(merging, "start", lambda root: None)
    files = corpus(tmp_path / "docs", bm25.MERGE_FACTOR)
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        for path in files:
            assert index.add([path], jobs=1).ok
        assert len(pointer(index.root)["segments"]) == bm25.MERGE_FACTOR
        expected = ranked(index)
    done = subprocess.run(
        [sys.executable, "-m", "pagesight.store.local.merging", str(tmp_path / "ix")],
        capture_output=True,
        timeout=200,
    )
    assert done.returncode == 0, done.stderr
    assert len(pointer(tmp_path / "ix")["segments"]) == 1
    with Index.open(tmp_path / "ix", create=False) as index:
        assert ranked(index) == expected


@pytest.mark.timeout(300)
def test_a_servers_upload_into_a_larger_index_writes_one_segment(tmp_path: Path):
    """1,200 tiles, then an upload through `pagesight serve`'s API: searchable at once, one segment
    added, none of the others written again."""
    pytest.importorskip("fastapi")
    import time

    from fastapi.testclient import TestClient

    from pagesight.serve.app import create_app

    rng = random.Random(11)
    books = [
        make_pdf(
            tmp_path / f"book{n}.pdf",
            [[" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(4)] for _ in range(300)],
        )
        for n in range(4)
    ]
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add(books, jobs=2).ok
    assert index.catalog.counts()["tiles"] == 1200
    folder = index.root / "retrievers"
    before = pointer(index.root)["segments"]
    written = {p: p.stat().st_mtime_ns for name in before for p in (folder / name).iterdir()}
    memo = make_pdf(tmp_path / "memo.pdf", [["the zeppelin hangar inventory"], ["second page"]])
    key = {"Authorization": "Bearer operator-key-0123456789"}
    with TestClient(create_app(index, api_key="operator-key-0123456789", readers=1)) as client:
        job = client.post("/api/documents", files={"files": ("memo.pdf", memo.read_bytes())}, headers=key)
        job = job.json()["job"]["id"]
        deadline = time.monotonic() + 120
        while client.get(f"/api/jobs/{job}", headers=key).json()["state"] != "done":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        hits = client.get("/api/search", params={"q": "zeppelin hangar", "k": 1}, headers=key).json()["hits"]
    assert hits[0]["doc_id"] == "memo"
    after = pointer(index.root)["segments"]
    assert len(after) == len(before) + 1 and set(before) < set(after)
    assert {p: p.stat().st_mtime_ns for name in before for p in (folder / name).iterdir()} == written
    index.close()


def test_a_merge_made_while_a_writer_holds_the_lock_is_taken_in_by_its_next_commit(
    tmp_path: Path, monkeypatch
):
    """A writer committing batch after batch holds the write lock nearly always; the merger makes
    its merge ready instead of waiting for the lock, and the writer's next save swaps it in."""
    import threading
    import time

    from pagesight.ingest.extract import extract
    from pagesight.ingest.options import TextOptions
    from pagesight.store.local import layout, merging

    files = three_commits_and_a_delete(tmp_path, monkeypatch)
    with Index.open(tmp_path / "ix", create=False) as writer:
        parts = pointer(writer.root)["segments"]
        folder = writer.root / "retrievers"
        done: list[int] = []
        with writer.store.writing():  # held from here to the commit, as a long ingestion holds it
            merger = threading.Thread(target=lambda: done.append(merging.merge_due(writer.root)))
            merger.start()
            deadline = time.monotonic() + 120
            while not list(folder.glob(f"{layout.MERGED_PREFIX}*{layout.READY}")):
                assert time.monotonic() < deadline and merger.is_alive(), "no merge was made ready"
                time.sleep(0.05)
            (manifest,) = folder.glob(f"{layout.MERGED_PREFIX}*{layout.READY}")
            ready = json.loads(manifest.read_text())  # the mostly deleted segment, merged alone
            assert pointer(writer.root)["segments"] == parts  # not swapped in: the lock is held
            for path in files[3:]:  # a commit of the writer's own, under its lock
                made = extract(str(path), path.stem, None, writer.settings, TextOptions(ocr="never"))
                writer.catalog.put_document(made, {})
                writer.store.refresh()
            adopted = pointer(writer.root)["segments"]
            assert ready["merged"] in adopted and not set(ready["parts"]) & set(adopted)
            assert len(adopted) == 5  # the merged one, the two not merged, the two commits'
            assert deleted(writer.root) == []  # the merge left the deleted tiles out
        merger.join(timeout=120)  # its next merge (the new tier of three) once the lock is free
        after = pointer(writer.root)
        assert done and done[0] >= 2 and not list(folder.glob(f"*{layout.READY}"))
        assert not set(parts) & set(after["segments"]) and deleted(writer.root) == []
        assert not any((folder / name).exists() for name in parts)
        final = ranked(writer)
        assert ranked(Index.open(tmp_path / "ix", create=False)) == final
    with Index.open(tmp_path / "once", settings={"dense_model": None}) as once:
        assert once.add(files[1:], jobs=1).ok
        assert ranked(once) == final


@pytest.mark.parametrize("multi_vector, merged_by", [(False, "commit"), (True, "commit"), (True, "process")])
def test_visual_vectors_grow_by_parts_and_rank_as_one_index_of_them_all(
    tmp_path: Path, monkeypatch, multi_vector: bool, merged_by: str
):
    """The visual vectors are parts beside the segments, as the dense ones: a commit writes only its
    own tiles' part, deletes are bits of its bitset, and parts merged by a commit or by the merging process
    rank every query exactly as one index of the live vectors would (single vectors by inner
    product, token vectors by MaxSim)."""
    from pagesight.records import Document, Page, Span, Tile
    from pagesight.settings import Settings
    from pagesight.store.base import open_store
    from pagesight.store.local import merging
    from pagesight.vectors import maxsim

    monkeypatch.setattr(bm25, "MERGE_FACTOR", 2)  # a full tier at two segments
    if merged_by == "process":
        monkeypatch.setattr(merging, "INLINE_MERGE", 0)
        monkeypatch.setattr(merging, "start", lambda root: None)
    rng = np.random.default_rng(3)
    dim, held = 8, {}

    def vectors() -> np.ndarray:
        made = rng.normal(size=(int(rng.integers(2, 5)), dim)) if multi_vector else rng.normal(size=dim)
        return (made / np.linalg.norm(made, axis=-1, keepdims=True)).astype(np.float32)

    def document(number: int) -> Document:
        words = [Span(f"page {number} moraine", (0.0, 0.0, 90.0, 18.0), "pdf")]
        page = Page(1, 100, 40, "pdf", [Tile(0, (0.0, 0.0, 100.0, 40.0), words)])
        return Document(f"doc{number}", f"/docs/doc{number}.pdf", f"sha{number}", "pdf", 1, 1, [page])

    root = tmp_path / "ix"
    store = open_store(str(root), create=True, settings=Settings(dense_model=None))
    with store.writing():
        store.catalog.set_visual_spec({"encoder": "fake", "dim": dim, "multi_vector": multi_vector})
    for start in range(0, 12, 3):  # four commits of three documents
        before = {p: p.stat().st_mtime_ns for p in (root / "retrievers").glob("bm25-*/visual")}
        with store.writing():
            for number in range(start, start + 3):
                held[f"doc{number}"] = vectors()
                store.catalog.put_document(document(number), {}, {(1, 0): held[f"doc{number}"]})
            store.refresh()
        after = {p: p.stat().st_mtime_ns for p in (root / "retrievers").glob("bm25-*/visual")}
        assert all(after[p] == t for p, t in before.items() if p in after)  # no part written again
    with store.writing():
        store.catalog.delete_document("doc4")
        store.refresh()
    del held["doc4"]
    store.close()
    if merged_by == "process":
        assert merging.merge_due(root) >= 1
    store = open_store(str(root), create=False, settings=None)
    visual = store.retrievers().visual
    assert len(visual.segments) < 4  # merged by tier
    pages = store.catalog.tile_pages(store.catalog.tile_ids().tolist())
    names = sorted(held)
    for _ in range(5):
        query = vectors()
        found = [(pages[tile][0], score) for tile, score in visual.search(query, 20)]
        if multi_vector:
            scores = maxsim([query], [held[name] for name in names])[0]
        else:
            scores = np.array([float(query @ held[name]) for name in names])
        expected = sorted(zip(names, scores), key=lambda pair: -pair[1])
        assert [name for name, _ in found] == [name for name, _ in expected]
        assert [score for _, score in found] == pytest.approx([score for _, score in expected], abs=2e-3)
    store.close()
    # as the build before wrote it: the visual vectors one file, which this build reads no more
    (root / "retrievers" / "current.json").write_text(
        json.dumps({**pointer(root), "format": 2, "visual": "visual-1-1"})
    )
    store = open_store(str(root), create=False, settings=None)
    with store.writing():
        store.refresh()  # a writer builds them again
    assert pointer(root)["format"] == 4 and pointer(root)["visual"]["dim"] == dim
    query = vectors()
    assert {pages[tile][0] for tile, _ in store.retrievers().visual.search(query, 20)} == set(names)
    store.close()


PROBE = """
import sys
from pathlib import Path
from pagesight.store.local.layout import merger_running
print(sum(merger_running(Path(sys.argv[1])) for _ in range(int(sys.argv[2]))))
"""


@pytest.mark.timeout(120)
def test_asking_whether_a_merger_runs_never_turns_one_away(tmp_path: Path):
    """A writer asks whether a merger runs (to keep its segment) without taking the merging lock:
    a merger starting while another process asks, again and again, always gets it; one holding it
    is seen."""
    from pagesight.store.local.layout import MERGING_LOCK, hold_merging, merger_running

    (tmp_path / MERGING_LOCK).touch()
    asking = subprocess.Popen(
        [sys.executable, "-c", PROBE, str(tmp_path), "20000"], stdout=subprocess.PIPE, text=True
    )
    tries, refused = 0, 0
    while asking.poll() is None:
        held = hold_merging(tmp_path)
        if held is None:
            refused += 1
        else:
            os.close(held)
        tries += 1
    assert asking.returncode == 0 and int(asking.stdout.read()) > 0  # it saw this process's merger
    assert tries > 100 and refused == 0
    held = hold_merging(tmp_path)
    assert merger_running(tmp_path) and hold_merging(tmp_path) is None
    os.close(held)
    assert not merger_running(tmp_path)
