"""Deleting from the local store moves the retriever pointer and rewrites no file; the next
ingestion adds a segment of its own and keeps the deleted tiles as tombstones, never counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.settings import Settings
from tests.conftest import make_pdf

pytestmark = pytest.mark.timeout(120)


def _pointer(root: Path) -> dict:
    return json.loads((root / "retrievers" / "current.json").read_text())


def _files(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (root / "retrievers").iterdir() if p.name != "current.json"}


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
    pointer = _pointer(root)
    assert pointer["generation"] == owls.catalog.generation()
    assert sorted(pointer["removed"]) == sorted(barn_tiles.tolist())
    assert _files(root) == before  # no retriever file written or removed

    for index in (owls, Index.open(root, create=False)):  # this process, and a fresh reader
        hits = index.search("barn owls hunt nest", k=10)
        assert hits and "barn" not in {h.doc_id for h in hits}
        assert [h.doc_id for h in index.search("lemmings", k=3)] == ["snowy"]
        assert index.search("barns", k=3) == []  # the only tile with this term is gone
    assert owls.delete("tawny")  # a second delete lists both documents' tiles
    assert len(_pointer(root)["removed"]) == len(barn_tiles) + 1


def test_the_next_ingestion_adds_a_segment_and_keeps_the_tombstones(owls: Index, tmp_path: Path):
    barn_tiles = owls.catalog.tile_ids_of(["barn"])
    assert owls.delete("barn")
    before = _files(owls.root)
    make_pdf(tmp_path / "eagle.pdf", [["golden eagles hunt hares"]])
    assert owls.add([tmp_path / "eagle.pdf"]).ok
    pointer = _pointer(owls.root)
    assert sorted(pointer["removed"]) == sorted(barn_tiles.tolist())
    (old,) = [name for name in pointer["segments"] if name in before]
    assert _files(owls.root)[old] == before[old]  # the first segment is not written again
    (new,) = [name for name in pointer["segments"] if name not in before]
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
