"""Every import points down: the package's modules and folders in layers (ARCHITECTURE.md, "Layers"),
each importing only from the layers below it, lazily inside a function or not, so a stage can be read
and tested without the ones above it. Imports for type annotations alone (``if TYPE_CHECKING:``)
are not imports at run time and are left out."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pagesight

ROOT = Path(pagesight.__file__).parent

LAYERS = [
    {"errors"},
    {"spec", "choices", "where", "jsonl", "records", "registry", "devices", "priority", "endpoints"},
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


def _run_time_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of the file that run, at its top or inside a function (not those for
    annotations alone)."""
    tree = ast.parse(path.read_text())
    skipped = _type_only(tree)
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skipped
    ]


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, unit) of each pagesight unit (top-level module or folder) the file imports at run time."""
    found = []
    for node in _run_time_imports(path):
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


def module_name(path: Path, root: Path) -> str:
    """``pagesight.store.local.layout`` for ``ROOT/store/local/layout.py`` (a package by its
    ``__init__``)."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path, root: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` the file imports at run time, lazily or not: ``from a.b import c``
    is module ``a.b.c`` when there is one, else ``a.b`` (a package's ``__init__``)."""
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in _run_time_imports(path):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, *([base] if base else [])])
        for alias in node.names:
            found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return found & modules - {here}


def import_cycles(root: Path) -> list[list[str]]:
    """The groups of modules under ``root`` that import one another, each sorted (Tarjan's strongly
    connected components of more than one module)."""
    paths = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    graph = {name: module_imports(path, root, set(paths)) for name, path in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                cycles.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return cycles


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


@pytest.mark.timeout(60)
def test_no_modules_import_each_other_even_lazily():
    assert import_cycles(ROOT) == []


@pytest.mark.timeout(60)
def test_a_lazy_import_cycle_is_found(tmp_path):
    """A cycle closed by an import inside a function, across a package, is found; one closed by an
    annotation's import is not (the test can fail)."""
    root = tmp_path / "pagesight"
    (root / "store").mkdir(parents=True)
    (root / "store" / "__init__.py").write_text("")
    (root / "store" / "merging.py").write_text("from pagesight.store.layout import FOLDER\n")
    (root / "store" / "layout.py").write_text("def f():\n    from pagesight.store import merging\n")
    (root / "index.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pagesight import search\n"
    )
    (root / "search.py").write_text("import pagesight.index\n")
    assert import_cycles(root) == [["pagesight.store.layout", "pagesight.store.merging"]]


def _defines(source: str, name: str) -> bool:
    """Whether Python ``source`` defines or imports ``name`` (a function, class, attribute or
    assignment)."""
    return bool(
        re.search(rf"\b(def|class) {name}\b|\b{name}\s*[:=]|\bself\.{name}\b|import .*\b{name}\b", source)
    )


def missing_names(architecture: str, root: Path, repo: Path) -> list[str]:
    """The paths and names written in backticks in ``architecture`` that the tree does not have: a
    path is a file or folder ending so (under the package or the repository), or a name the code
    spells out (``current.json``, ``uploads/``: folders an index has); ``module.name`` (its module
    found by the end of its path, ``dense.IVF_FROM`` in ``store/local/dense.py``) and
    ``path/module.name`` name something the module defines; ``Class.a/b`` methods of a class."""
    files = [path for path in root.rglob("*") if "__pycache__" not in path.parts]
    tree = {"/".join(path.relative_to(root).parts) for path in files} | {
        "/".join(path.relative_to(repo).parts)
        for folder in ("tests", "docs", "benchmarks")
        for path in (repo / folder).rglob("*")
    }
    code = {path: path.read_text() for path in files if path.suffix == ".py"}
    every = "\n".join(code.values())

    def module(dotted: str) -> list[str]:
        tail = dotted.replace(".", "/")
        return [
            text
            for path, text in code.items()
            if ("/".join(path.relative_to(root).with_suffix("").parts) + "/").endswith(
                f"/{tail}/".lstrip("/")
            )
            or "/".join(path.relative_to(root).parts).endswith((f"{tail}.py", f"{tail}/__init__.py"))
        ]

    missing = []
    for token in dict.fromkeys(re.findall(r"`([^`\n ]+)`", architecture)):
        token = token.rstrip("()")
        if re.fullmatch(r"[A-Z]\w*\.[\w/]+", token):  # Class.method/method
            found = all(_defines(every, name) for name in token.split(".", 1)[1].split("/"))
        elif re.fullmatch(r"[\w/]+\.(?!py\b|md\b|json\b|txt\b|sqlite\b|lock\b)[A-Za-z_]\w*", token):
            dotted, name = token.rsplit(".", 1)
            found = any(_defines(text, name) for text in module(dotted.replace("/", ".")))
            found = found or not module(dotted.replace("/", "."))  # not a module: a JSON key, a field
        elif ("/" in token and ":" not in token) or re.fullmatch(
            r"[\w.-]+\.(py|json|txt|lock|sqlite)", token
        ):
            path = token.strip("/").replace("*", "")
            found = any(
                entry.endswith(path) or ("*" in token and path.split("/")[0] in entry) for entry in tree
            )
            if not token.endswith(".py"):  # a name an index's folder holds, spelt out by the code
                found = found or token.strip("/").split("/")[-1] in every
        else:
            continue
        if not found:
            missing.append(token)
    return missing


@pytest.mark.timeout(60)
def test_every_path_and_name_architecture_names_is_in_the_tree():
    repo = ROOT.parents[1]
    assert missing_names((repo / "ARCHITECTURE.md").read_text(), ROOT, repo) == []


@pytest.mark.timeout(60)
def test_a_path_or_name_gone_from_the_tree_is_found():
    repo = ROOT.parents[1]
    written = "`store/local/layout.py`, `layout.merger_running`, `store/merging.py`, `layout.FOLDERS`"
    assert missing_names(written, ROOT, repo) == ["store/merging.py", "layout.FOLDERS"]
