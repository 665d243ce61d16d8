"""Stores are chosen by the scheme of a location; a plain path is the local store."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight import Index, IndexFormatError
from pagesight.settings import Settings
from pagesight.store import base
from pagesight.store.local import LocalStore
from tests.conftest import make_pdf


class NestedStore(LocalStore):
    """A store for locations ``nested:PATH`` keeping a local index in PATH/index."""

    def __init__(self, location, *, create, settings):
        super().__init__(self.folder(location), create=create, settings=settings)
        self.location = str(location)

    @staticmethod
    def folder(location) -> Path:
        return Path(str(location).removeprefix("nested:")) / "index"

    @staticmethod
    def exists(location) -> bool:
        return LocalStore.exists(NestedStore.folder(location))


@pytest.fixture
def nested(monkeypatch):
    monkeypatch.setitem(base.STORES, "nested", f"{__name__}:NestedStore")


def test_a_registered_scheme_opens_its_store_and_every_verb_works_on_it(tmp_path: Path, nested):
    location = f"nested:{tmp_path}"
    assert not base.store_exists(location)
    index = Index.open(location, settings=Settings(dense_model=None))
    assert isinstance(index.store, NestedStore) and index.info()["path"] == location
    pdf = make_pdf(tmp_path / "owls.pdf", [["barn owls hunt at night"], ["tawny owls call"]])
    assert index.add([pdf]).ok
    assert base.store_exists(location) and (tmp_path / "index" / "catalog.sqlite").exists()
    assert [h.page_id for h in index.search("tawny", k=1)] == ["owls_2"]
    assert index.delete("owls") and index.documents() == []
    index.close()


def test_plain_paths_and_unknown_schemes_are_local_directories(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for location in (tmp_path / "a", "b:c", "nested:d"):  # "nested" is not registered here
        index = Index.open(location, settings=Settings(dense_model=None))
        assert isinstance(index.store, LocalStore) and Path(location).is_dir()
        index.close()


@pytest.mark.parametrize("kind", ["local", "qdrant"])
def test_an_index_cannot_be_opened_with_other_settings(tmp_path: Path, kind: str):
    if kind == "qdrant":
        pytest.importorskip("qdrant_client")
    location = str(tmp_path / "ix") if kind == "local" else f"qdrant:{tmp_path / 'q'}"
    Index.open(location, settings=Settings(dense_model=None)).close()
    with pytest.raises(
        IndexFormatError, match="made with dpi=100.0; settings are chosen when an index is made"
    ):
        Index.open(location, settings=Settings(dense_model=None, dpi=150))
    with pytest.raises(IndexFormatError, match="made with dense_model=None;"):
        Index.open(location, settings={"dense_model": "minilm-l6-v2"})
    Index.open(location, settings={"dpi": 100.0}).close()  # only the fields named are compared
    with Index.open(location) as index:
        assert index.settings == Settings(dense_model=None)
