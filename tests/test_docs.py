"""The documentation runs: every shell and Python block of README.md and docs/ is run on the
bundled samples, as a reader would run it, or skipped by name with the reason shown.

A block is marked by the HTML comment on the line before its fence (invisible on GitHub and in the
site): ``<!-- test: run -->``, or ``<!-- test: skip REASON -->`` with a reason of ``REASONS``. A
``text`` block marked ``<!-- test: output -->`` right after a block says what it prints: each of
its lines is in what the block printed. The commands of a shell block run in this process
(``pagesight ...`` through the command line's app, ``tests.conftest.cli``; ``. .venv/bin/activate``
is the reader's shell, nothing to run), each expected to succeed; the Python blocks of a page run
one after another in one namespace. Each page runs in a folder of its own holding what the pages
name: ``my-index`` (the samples' documents ingested once for every page: ``~/papers`` and
``~/scans/receipt.png`` of a ``HOME`` made for it), ``papers/`` and ``scan.png``, and ``samples``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES, cli

REASONS = {
    "install": "installs packages or runs the whole suite (make, pip)",
    "gpu": "needs a GPU",
    "hub": "needs a model from the Hugging Face hub, which this machine cannot reach",
    "endpoint": "needs a model behind an OpenAI-compatible endpoint",
    "server": "starts a server that runs until it is stopped",
    "qdrant": "needs a Qdrant server",
    "network": "fetches pages from the network",
    "data": "needs a dataset of your own or the shared real data (../shared/data)",
}
MARK = re.compile(r"<!-- test: (run|output|skip (\w+)) -->\n```(\w*)\n(.*?)```", re.S)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass
class Block:
    page: Path
    line: int
    language: str
    code: str
    skip: str | None  # the reason's name
    output: str | None = None  # what it prints (the output block after it)

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's marked blocks, each with the output block that follows it."""
    text = page.read_text()
    found: list[Block] = []
    for match in MARK.finditer(text):
        kind, reason, language, code = match.groups()
        if kind == "output":
            assert found and found[-1].output is None, f"{page}: an output block follows no block"
            found[-1].output = code
            continue
        line = text[: match.start()].count("\n") + 2
        found.append(Block(page, line, language, code, reason if kind != "run" else None))
    return found


def unmarked(page: Path) -> list[str]:
    """The shell and Python blocks of ``page`` with no marker on the line before them."""
    lines = page.read_text().splitlines()
    return [
        f"{page.relative_to(ROOT)}:{number + 1}"
        for number, line in enumerate(lines)
        if line in ("```bash", "```python") and not (number and lines[number - 1].startswith("<!-- test: "))
    ]


ALL = [block for page in PAGES for block in blocks(page)]


def test_every_shell_and_python_block_is_marked_and_every_skip_names_a_reason():
    assert [name for page in PAGES for name in unmarked(page)] == []
    assert {block.skip for block in ALL} - {None} <= set(REASONS)


@pytest.fixture(scope="session")
def prepared(tmp_path_factory) -> Path:
    """What the pages name, made once: the samples' documents in ``~/papers`` and a scan as
    ``~/scans/receipt.png``, ingested into ``my-index``; ``papers/``, ``scan.png``, ``samples``."""
    from pagesight import Index

    root = tmp_path_factory.mktemp("docs")
    home = root / "home"
    (home / "papers").mkdir(parents=True)
    (home / "scans").mkdir()
    for path in SAMPLES.glob("*.pdf"):
        shutil.copy(path, home / "papers")
    shutil.copy(SAMPLES / "field-notes-scan.png", home / "scans" / "receipt.png")
    shutil.copytree(home / "papers", root / "papers")
    shutil.copy(SAMPLES / "field-notes-scan.png", root / "scan.png")
    (root / "samples").symlink_to(ROOT / "samples")
    with Index.open(root / "my-index") as index:
        assert index.add([home / "papers", home / "scans" / "receipt.png"], jobs=2).ok
    return root


_PAGES: dict[Path, tuple[Path, dict]] = {}  # each page's folder and Python namespace


def commands(code: str) -> list[str]:
    """A shell block's commands: continued lines joined, comments and blank lines left out."""
    joined = code.replace("\\\n", " ")
    return [
        line for line in (shlex.join(shlex.split(raw, comments=True)) for raw in joined.splitlines()) if line
    ]


def run_shell(code: str, home: Path) -> str:
    printed = []
    for command in commands(code):
        argv = [os.path.expanduser(word) if word.startswith("~") else word for word in shlex.split(command)]
        if argv[0] in (".", "source"):  # the reader's shell: nothing here to activate
            continue
        assert argv[0] == "pagesight", f"{command}: not a pagesight command; mark the block skipped"
        done = cli(*argv[1:], check=False)
        assert done.returncode == 0, f"{command} exited {done.returncode}: {done.stderr[-2000:]}"
        printed.append(done.stdout + done.stderr)
    return "\n".join(printed)


def run_python(code: str, namespace: dict) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "<docs>", "exec"), namespace)
    return printed.getvalue()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("block", ALL, ids=[block.name for block in ALL])
def test_a_documented_block_runs(block: Block, prepared: Path, monkeypatch, tmp_path_factory):
    if block.skip:
        pytest.skip(f"{block.name}: {REASONS[block.skip]}")
    if block.page not in _PAGES:
        folder = tmp_path_factory.mktemp("page")
        shutil.copytree(prepared, folder, symlinks=True, dirs_exist_ok=True)
        _PAGES[block.page] = (folder, {})
    folder, namespace = _PAGES[block.page]
    monkeypatch.chdir(folder)
    monkeypatch.setenv("HOME", str(folder / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder / "cache"))
    if block.language == "python":
        printed = run_python(block.code, namespace)
    else:
        printed = run_shell(block.code, folder / "home")
    for line in (block.output or "").splitlines():
        assert " ".join(line.split()) in " ".join(printed.split()), f"{block.name} does not print: {line}"
