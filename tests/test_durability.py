"""Crash safety and concurrent reading: real processes, real SIGKILL."""

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pagesight import Index, IndexLockedError
from pagesight.settings import Settings
from tests.conftest import make_pdf

N_DOCS = 24


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(N_DOCS):
        make_pdf(folder / f"doc{i:02d}.pdf", [[f"document {i} page {p} about topic{i}"] for p in (1, 2)])
    return folder


# The writer: a real ingestion in its own process that waits DELAY seconds after each committed
# document (through the progress callback), so the test can act while it is mid-way.
WRITER = """
import sys, time
from pagesight import Index
index = Index.open(sys.argv[1], create=False)
report = index.add(sys.argv[2], jobs=1, progress=lambda path, outcome, pages: time.sleep(float(sys.argv[3])))
sys.exit(0 if report.ok else 1)
"""
DELAY = 0.25


def start_ingest(index: Path, corpus: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(index), str(corpus), str(DELAY)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def committed(index: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{index / 'catalog.sqlite'}?mode=ro", uri=True, timeout=30)
        try:
            return db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0


def wait_for(condition, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def assert_whole(index: Index) -> None:
    db = index.catalog.db
    for doc_id, n_pages in db.execute("SELECT id, n_pages FROM documents"):
        pages = db.execute("SELECT COUNT(*) FROM pages WHERE doc_id = ?", (doc_id,)).fetchone()[0]
        tiled = db.execute("SELECT COUNT(DISTINCT page) FROM tiles WHERE doc_id = ?", (doc_id,)).fetchone()[0]
        assert pages == tiled == n_pages > 0, doc_id


def test_sigkill_mid_ingest_leaves_whole_documents_and_rerun_completes(tmp_path: Path, corpus: Path):
    index_dir = tmp_path / "ix"
    keeper = Index.open(index_dir, settings=Settings(dense_model=None))
    keeper.add(make_pdf(tmp_path / "keeper.pdf", [["indexed before any crash"]]))
    keeper.close()

    for kill_after in (3, 8):  # two crashes at different points of the run
        process = start_ingest(index_dir, corpus)
        wait_for(lambda n=kill_after, p=process: committed(index_dir) >= n + 1 or p.poll() is not None)
        assert process.poll() is None, "ingest finished before it could be killed"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

        index = Index.open(index_dir, create=False)
        count = len(index.documents())
        assert kill_after + 1 <= count < N_DOCS + 1
        assert_whole(index)
        assert index.search("indexed before any crash")[0].doc_id == "keeper"
        assert index.search("topic2")[0].doc_id == "doc02"  # retrievers rebuilt from the catalog
        index.close()

    process = start_ingest(index_dir, corpus)
    assert process.wait(timeout=300) == 0, process.stderr.read().decode()
    index = Index.open(index_dir, create=False)
    assert len(index.documents()) == N_DOCS + 1
    assert_whole(index)
    assert index.info()["retrievers_generation"] == index.catalog.generation()
    assert not [p for p in (index_dir / "retrievers").iterdir() if p.name.startswith("current.json.")]


def test_search_while_another_process_writes(tmp_path: Path, corpus: Path):
    index_dir = tmp_path / "ix"
    first = Index.open(index_dir, settings=Settings(dense_model=None))
    first.add(make_pdf(tmp_path / "early.pdf", [["present from the start"]]))
    reader = Index.open(index_dir, create=False)
    process = start_ingest(index_dir, corpus)
    visible, refusals = [], []
    wait_for(lambda: committed(index_dir) >= 2)
    try:
        while process.poll() is None:
            hits = reader.search("document page about", k=50)
            visible.append(len({hit.doc_id for hit in hits}))
            assert reader.search("present from the start")[0].doc_id == "early"
            try:  # a second writer is refused while the first works, never interleaved
                reader.add(tmp_path / "absent.pdf")
                refusals.append(False)
            except IndexLockedError:
                refusals.append(True)
    finally:
        process.wait(timeout=300)
    assert process.returncode == 0
    assert len(visible) > 3 and refusals[0]
    # Refused until the writer let go of the lock (it may take a moment more to exit), then accepted.
    assert refusals == sorted(refusals, reverse=True)
    # Each committed document became searchable while the writer was still at work.
    assert 0 < visible[0] < N_DOCS and visible == sorted(visible)
    assert {hit.doc_id for hit in reader.search("document page about", k=100)} == {
        f"doc{i:02d}" for i in range(N_DOCS)
    }


class PowerLoss:
    """What a power loss keeps of ``root/retrievers``, by a test double at ``os.fsync`` and
    ``os.replace``: a file's bytes as of its last sync, a directory's names as of its last sync (a
    name renamed or created since is lost), everything as it was before the double was set when
    never synced since. Each recorded operation is a crash point; ``replay`` writes what survives
    a crash after the first ``k`` onto a copy."""

    def __init__(self, root: Path, monkeypatch):
        self.root, self.folder = root, root / "retrievers"
        self.dirs: dict[Path, dict] = {}  # a directory's names at start: name -> (is a dir, inode)
        self.bytes: dict[int, bytes] = {}  # a file's bytes at start, by inode
        for path in [self.folder, *sorted(self.folder.rglob("*"))]:
            if path.is_dir():
                self.dirs[path] = self._names(path)
            else:
                self.bytes[path.stat().st_ino] = path.read_bytes()
        self.events: list[tuple] = []  # ("file", inode, bytes), ("dir", path, names), ("replace", ...)
        fsync, replace = os.fsync, os.replace

        def recorded_fsync(fd: int) -> None:
            fsync(fd)
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if path.is_dir():
                self.events.append(("dir", path, self._names(path)))
            else:
                self.events.append(("file", os.fstat(fd).st_ino, path.read_bytes()))

        def recorded_replace(source, target) -> None:
            replace(source, target)
            self.events.append(("replace", Path(source).name, Path(target).name))

        monkeypatch.setattr(os, "fsync", recorded_fsync)
        monkeypatch.setattr(os, "replace", recorded_replace)

    @staticmethod
    def _names(folder: Path) -> dict:
        return {entry.name: (entry.is_dir(), entry.stat().st_ino) for entry in folder.iterdir()}

    def replay(self, k: int, copy: Path) -> None:
        """The index as a power loss after the first ``k`` operations leaves it, at ``copy``: the
        catalog as committed (SQLite syncs its own), the retrievers folder as synced."""
        shutil.copytree(
            self.root, copy, ignore=lambda folder, names: ["retrievers"] if Path(folder) == self.root else []
        )
        dirs, contents = dict(self.dirs), dict(self.bytes)
        for event in self.events[:k]:
            if event[0] == "dir":
                dirs[event[1]] = event[2]
            elif event[0] == "file":
                contents[event[1]] = event[2]

        def write(folder: Path, target: Path) -> None:
            target.mkdir()
            for name, (is_dir, inode) in dirs.get(folder, {}).items():
                if is_dir:
                    write(folder / name, target / name)
                else:  # a file never synced keeps nothing
                    (target / name).write_bytes(contents.get(inode, b""))

        write(self.folder, copy / "retrievers")


def power_loss_points(tmp_path: Path, monkeypatch, change) -> tuple[PowerLoss, int]:
    """An index of three documents in two commits (BM25 only); ``change(index)`` made under the
    double; the double and the crash points it recorded."""
    from pagesight.store.local import bm25

    monkeypatch.setattr(bm25, "MERGE_FACTOR", 3)  # the third commit merges the three segments
    index = Index.open(tmp_path / "ix", settings=Settings(dense_model=None))
    for name in ("heron", "owl"):
        assert index.add(make_pdf(tmp_path / f"{name}.pdf", [[f"the {name} hunts at the moraine"]])).ok
    loss = PowerLoss(index.root, monkeypatch)
    change(index)
    monkeypatch.undo()
    index.close()
    return loss, len(loss.events)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("change", ["commit and merge", "delete"])
def test_a_power_loss_at_any_point_leaves_an_index_that_opens_at_a_generation(
    tmp_path: Path, monkeypatch, change
):
    """After a power loss at every point of a commit (a new segment, a merge by the commit) or a
    delete (a bitset), the pointer names whole files of its generation or the one before, and the
    index searches what its catalog holds."""
    from pagesight.store.local import retrievers
    from pagesight.store.local.layout import Pointer

    def act(index: Index) -> None:
        if change == "delete":
            assert index.delete("heron")
        else:
            assert index.add(make_pdf(tmp_path / "vole.pdf", [["the vole hides at the moraine"]])).ok
            assert len(Pointer.read(index.root / "retrievers").segments) == 1  # merged by the commit

    loss, points = power_loss_points(tmp_path, monkeypatch, act)
    assert points > 4
    with Index.open(tmp_path / "ix", create=False) as final:
        generation = final.catalog.generation()
        expected = [(hit.doc_id, round(hit.score, 5)) for hit in final.search("moraine hunts", k=5)]
    generations = set()
    for k in range(points + 1):
        copy = tmp_path / f"crash-{k}"
        loss.replay(k, copy)
        opened = retrievers.load(copy)
        assert opened is not None, f"crash after {loss.events[k - 1]}: the pointer names files that are gone"
        assert opened.generation in (generation - 1, generation)
        generations.add(opened.generation)
        with Index.open(copy, create=False) as index:
            assert [
                (hit.doc_id, round(hit.score, 5)) for hit in index.search("moraine hunts", k=5)
            ] == expected
    assert generations == {generation - 1, generation}  # the new pointer survives once synced


# A reader of stale retriever files (a writer killed before it saved them), its build slowed to 3 s
# as a large index's is, saying when it starts building.
STALE_READER = """
import sys, time
from pathlib import Path
from pagesight import Index
from pagesight.store.local import retrievers

build = retrievers.build

def slow_build(*args):
    Path(sys.argv[2]).touch()
    time.sleep(3)
    return build(*args)

retrievers.build = slow_build
hits = Index.open(sys.argv[1], create=False).search("moraine", k=5)
print(sorted(hit.doc_id for hit in hits))
"""


@pytest.mark.timeout(180)
def test_a_reader_of_stale_files_never_blocks_a_writer(tmp_path: Path):
    """A reader finding the files behind the catalog searches the catalog's tiles from memory
    without the write lock: another process's ``Index.add`` meanwhile goes through, and the files
    are the writer's to save."""
    from pagesight.ingest.extract import extract
    from pagesight.ingest.options import TextOptions
    from tests.store.pointers import pointer

    index = Index.open(tmp_path / "ix", settings=Settings(dense_model=None))
    assert index.add(make_pdf(tmp_path / "heron.pdf", [["the heron at the moraine"]])).ok
    owl = make_pdf(tmp_path / "owl.pdf", [["the owl over the moraine"]])
    with index.store.writing():  # committed, the files not saved: as a writer killed between the two
        index.catalog.put_document(
            extract(str(owl), "owl", None, index.settings, TextOptions(ocr="never")), {}
        )
    stale = pointer(index.root)
    building = tmp_path / "building"
    reader = subprocess.Popen(
        [sys.executable, "-c", STALE_READER, str(index.root), str(building)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(building.exists)
        assert pointer(index.root) == stale
        assert index.add(make_pdf(tmp_path / "vole.pdf", [["the vole under the moraine"]])).ok  # not refused
    finally:
        out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    assert out.strip() in ("['heron', 'owl']", "['heron', 'owl', 'vole']")
    assert pointer(index.root)["generation"] == index.catalog.generation()  # saved by the writer
    index.close()
