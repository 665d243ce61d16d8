"""Deleting from the local store moves the retriever pointer and rewrites no file; the next
ingestion adds a segment of its own and keeps the deleted tiles in its bitsets, never counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.settings import Settings
from pagesight.store.local.layout import DELETES
from tests.conftest import make_pdf
from tests.store.pointers import deleted, pointer

pytestmark = pytest.mark.timeout(120)


def _files(root: Path) -> dict[str, int]:
    """The segments' files (their delete bitsets aside) by path, with their times."""
    folder = root / "retrievers"
    return {
        str(p.relative_to(folder)): p.stat().st_mtime_ns
        for p in folder.rglob("*")
        if p.is_file() and p.parent != folder and not p.name.startswith(DELETES)
    }


@pytest.fixture
def owls(tmp_path: Path) -> Index:
    index = Index.open(tmp_path / "index", settings=Settings(dense_model=None))
    for name, pages in {
        "barn": [["barn owls hunt voles at night"], ["barn owls nest in old barns"]],
        "tawny": [["tawny owls call at dusk"]],
        "snowy": [["snowy owls hunt lemmings on the tundra"]],
    }.items():
        make_pdf(tmp_path / f"{name}.pdf", pages)
    assert index.add([tmp_path / f"{n}.pdf" for n in ("barn", "tawny", "snowy")]).ok
    yield index
    index.close()


def test_a_delete_lists_the_removed_tiles_and_searches_never_return_them(owls: Index):
    root = owls.root
    before = _files(root)
    barn_tiles = owls.catalog.tile_ids_of(["barn"])
    assert [h.doc_id for h in owls.search("owls hunt", k=5)][:1] in (["barn"], ["snowy"])

    assert owls.delete("barn")
    assert pointer(root)["generation"] == owls.catalog.generation()
    assert deleted(root) == sorted(barn_tiles.tolist())
    assert _files(root) == before  # no segment's file written or removed: a delete bitset added
    assert {entry["count"] for entry in pointer(root)["deletes"].values()} == {len(barn_tiles)}

    for index in (owls, Index.open(root, create=False)):  # this process, and a fresh reader
        hits = index.search("barn owls hunt nest", k=10)
        assert hits and "barn" not in {h.doc_id for h in hits}
        assert [h.doc_id for h in index.search("lemmings", k=3)] == ["snowy"]
        assert index.search("barns", k=3) == []  # the only tile with this term is gone
    assert owls.delete("tawny")  # a second delete: both documents' tiles
    assert len(deleted(root)) == len(barn_tiles) + 1


def test_the_next_ingestion_adds_a_segment_and_keeps_the_deletes(owls: Index, tmp_path: Path):
    barn_tiles = owls.catalog.tile_ids_of(["barn"])
    assert owls.delete("barn")
    before = _files(owls.root)
    make_pdf(tmp_path / "eagle.pdf", [["golden eagles hunt hares"]])
    assert owls.add([tmp_path / "eagle.pdf"]).ok
    assert deleted(owls.root) == sorted(barn_tiles.tolist())
    after = _files(owls.root)
    assert {path: after[path] for path in before} == before  # the first segment is not written again
    (new,) = [name for name in pointer(owls.root)["segments"] if not any(p.startswith(name) for p in before)]
    assert (
        np.load(owls.root / "retrievers" / new / "tile_ids.npy").tolist()
        == owls.catalog.tile_ids_of(["eagle"]).tolist()
    )
    assert [h.doc_id for h in owls.search("eagles hares", k=1)] == ["eagle"]
    assert "barn" not in {h.doc_id for h in owls.search("barn owls hunt", k=10)}


def test_a_delete_imports_neither_bm25s_nor_faiss(owls: Index):
    probe = (
        "import sys\n"
        "from pagesight import Index\n"
        f"index = Index.open({str(owls.root)!r}, create=False)\n"
        "assert index.delete('tawny')\n"
        "print(sorted(m for m in ('bm25s', 'faiss', 'scipy', 'torch') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert "tawny" not in {h.doc_id for h in owls.search("tawny owls call", k=5)}


def test_a_delete_writes_the_bitsets_of_the_segments_it_reaches_alone(owls: Index, tmp_path: Path):
    """tantivy's per-segment deletes: a commit's delete writes what it deletes, not every tile ever
    deleted; a segment it does not reach keeps its bitset file."""
    root = owls.root
    make_pdf(tmp_path / "eagle.pdf", [["golden eagles hunt hares"]])
    assert owls.add([tmp_path / "eagle.pdf"]).ok
    first, second = pointer(root)["segments"]
    assert owls.delete("barn")
    (entry,) = pointer(root)["deletes"].values()
    assert pointer(root)["deletes"] == {first: entry}
    barn_bits = root / "retrievers" / first / entry["file"]
    written = barn_bits.stat().st_mtime_ns
    assert owls.delete("eagle")
    assert pointer(root)["deletes"][first] == entry and barn_bits.stat().st_mtime_ns == written
    assert pointer(root)["deletes"][second]["count"] == 1  # the eagle's one tile
    assert [p.name for p in (root / "retrievers" / first).glob(f"{DELETES}*")] == [entry["file"]]


def test_a_pointer_listing_its_deleted_tiles_opens_and_the_next_commit_writes_bitsets(
    owls: Index, tmp_path: Path
):
    """An index written before the bitsets (pointer format 3: the deleted tiles one list, rewritten
    by every commit) searches the same, and its next commit writes each segment's bitset instead."""
    root = owls.root
    barn_tiles = owls.catalog.tile_ids_of(["barn"])
    assert owls.delete("barn")
    expected = [(h.doc_id, h.score) for h in owls.search("owls hunt nest", k=10)]
    old = pointer(root)
    for name, entry in old.pop("deletes").items():
        (root / "retrievers" / name / entry["file"]).unlink()
    old.update(format=3, removed=barn_tiles.tolist())
    (root / "retrievers" / "current.json").write_text(json.dumps(old))
    probe = (  # another process: this one shares the retrievers it loaded before
        "import json\nfrom pagesight import Index\n"
        f"hits = Index.open({str(root)!r}, create=False).search('owls hunt nest', k=10)\n"
        "print(json.dumps([(h.doc_id, h.score) for h in hits]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    assert [tuple(hit) for hit in json.loads(done.stdout)] == expected
    make_pdf(tmp_path / "eagle.pdf", [["golden eagles hunt hares"]])
    assert owls.add([tmp_path / "eagle.pdf"]).ok
    assert pointer(root)["format"] == 4 and "removed" not in pointer(root)
    assert deleted(root) == sorted(barn_tiles.tolist())
    assert "barn" not in {
        h.doc_id for h in Index.open(root, create=False).search("barn owls hunt nest", k=10)
    }
