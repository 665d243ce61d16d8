"""Other packages add readers, rerankers, visual encoders and stores through entry points: a
distribution on the path that declares one in a ``pagesight.*`` group is found by name, with no
call to ``register``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pagesight.errors import PagesightError
from pagesight.registry import Registry
from pagesight.testing.store import StoreContract

PLUGIN = """
from pagesight.answer.base import Reading
from pagesight.store.local import LocalStore


class EchoReader:
    name = "echo"
    inputs = "text"
    max_images = None

    def read(self, question, context):
        return Reading(text=question.upper(), usage={})


class ShoutingStore(LocalStore):
    def __init__(self, location, *, create, settings):
        super().__init__(str(location).removeprefix("shout:"), create=create, settings=settings)

    @staticmethod
    def exists(location):
        return LocalStore.exists(str(location).removeprefix("shout:"))
"""


def plugin(folder: Path) -> Path:
    """A distribution, unpacked on a path: its module and the metadata declaring its entry points."""
    folder.mkdir()
    (folder / "echo_plugin.py").write_text(PLUGIN)
    info = folder / "echo_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[pagesight.readers]\necho = echo_plugin:EchoReader\n\n[pagesight.stores]\nshout = echo_plugin:ShoutingStore\n"
    )
    return folder


@pytest.mark.timeout(120)
def test_a_reader_and_a_store_declared_as_entry_points_are_found_by_name(tmp_path: Path):
    probe = textwrap.dedent(
        f"""
        from pagesight import Index
        from pagesight.answer import READERS, make_reader
        assert "echo" in READERS and "extractive" in READERS
        assert make_reader("echo").read("which owl?", []).text == "WHICH OWL?"
        index = Index.open("shout:{tmp_path / "index"}", settings={{"dense_model": None}})
        assert type(index.store).__name__ == "ShoutingStore"
        print("found")
        """
    )
    path = os.pathsep.join([str(plugin(tmp_path / "site")), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.stdout.strip() == "found", done.stderr
    assert (tmp_path / "index" / "catalog.sqlite").exists()


PLUGIN_TESTS = """
import pytest
from pagesight.testing.store import StoreContract


class TestShoutingStore(StoreContract):
    @pytest.fixture
    def location(self, tmp_path):
        return f"shout:{tmp_path / 'index'}"
"""


@pytest.mark.timeout(300)
def test_a_plugins_store_passes_the_shipped_store_contract(tmp_path: Path):
    """``pagesight.testing`` ships the store contract: a plug-in's own tests subclass it with their
    store's location and run every check of it, as the project's stores do."""
    site = plugin(tmp_path / "site")
    (site / "test_shouting_store.py").write_text(PLUGIN_TESTS)
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(site / "test_shouting_store.py"),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.returncode == 0, done.stdout[-3000:]
    checks = [name for name in dir(StoreContract) if name.startswith("test_")]
    assert int(re.search(r"(\d+) passed", done.stdout).group(1)) >= len(checks) >= 10


def test_a_registry_names_what_it_knows_and_refuses_a_malformed_target():
    readers = Registry("reader", "pagesight.no-such-group", {"one": "json:dumps"})
    readers.register("two", "json:loads")
    assert sorted(readers) == ["one", "two"] and readers.load("two")("[1]") == [1]
    with pytest.raises(PagesightError, match="unknown reader 'three'; choose one of one, two"):
        readers.load("three")
    with pytest.raises(PagesightError, match="must be 'module:attribute'"):
        readers.register("four", "json.dumps")
