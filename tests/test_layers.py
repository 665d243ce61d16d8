"""Every import points down: the package's modules and folders in layers (ARCHITECTURE.md, "Layers"),
each importing only from the layers below it, lazily inside a function or not, so a stage can be read
and tested without the ones above it. Imports for type annotations alone (``if TYPE_CHECKING:``)
are not imports at run time and are left out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pagesight

ROOT = Path(pagesight.__file__).parent

LAYERS = [
    {"errors"},
    {"spec", "choices", "where", "jsonl", "records", "registry", "devices", "priority"},
    {"settings", "request"},
    {"vectors", "text"},
    {"encode", "render"},
    {"store"},
    {"search", "ingest"},
    {"answer", "train"},
    {"index", "frontends"},
    {"bench", "eval", "testing"},
    {"serve"},
    {"cli"},
    {"__main__", "__init__"},
]
LEVEL = {unit: number for number, layer in enumerate(LAYERS) for unit in layer}


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under ``if TYPE_CHECKING:``."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            ids.update(id(inner) for child in node.body for inner in ast.walk(child))
    return ids


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, unit) of each pagesight unit (top-level module or folder) the file imports at run time."""
    tree = ast.parse(path.read_text())
    skipped = _type_only(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "pagesight"
        ):
            parts = node.module.split(".")
            units = [parts[1]] if len(parts) > 1 else [a.name for a in node.names if a.name != "__version__"]
        elif isinstance(node, ast.Import):
            units = [a.name.split(".")[1] for a in node.names if a.name.startswith("pagesight.")]
        else:
            continue
        found.extend((node.lineno, unit) for unit in units)
    return found


@pytest.mark.timeout(60)
def test_every_unit_has_a_layer():
    units = {path.stem if path.is_file() else path.name for path in ROOT.iterdir()}
    units = {u for u in units if not u.startswith((".", "_")) or u in ("__init__", "__main__")}
    code = {u for u in units if (ROOT / f"{u}.py").is_file() or any((ROOT / u).glob("*.py"))}
    assert code - set(LEVEL) == set(), "a new module or folder: give it a layer here and in ARCHITECTURE.md"
    assert set(LEVEL) - code == set(), "a layer names a module or folder that is gone"


@pytest.mark.timeout(60)
def test_every_import_points_down():
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        unit = path.relative_to(ROOT).with_suffix("").parts[0]
        for line, target in imports(path):
            if target != unit and target in LEVEL and LEVEL[target] >= LEVEL[unit]:
                upward.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert upward == []


@pytest.mark.timeout(60)
def test_an_upward_import_is_found(tmp_path):
    """The check reads lazy imports and skips annotations' (the test can fail)."""
    source = tmp_path / "store.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pagesight.index import Index\n"
        "def f():\n    from pagesight.search.engine import search_text\n"
    )
    assert imports(source) == [(5, "search")]
