"""``Index.add`` from every way a user runs Python: the workers never run the caller's script again.

Each case runs a real interpreter on a user script that ingests real PDFs and searches them; the
script appends a line to a log each time its body runs, so a worker that executed it again shows.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from pagesight import Index, PagesightError
from pagesight.settings import Settings
from tests.conftest import ROOT, make_pdf

BODY = """\
import os
from pagesight import Index
from pagesight.settings import Settings

with open({log!r}, "a") as log:
    log.write(f"{{os.getpid()}}\\n")
index = Index.open({index!r}, settings=Settings(dense_model=None))
report = index.add([{docs!r}], jobs=2)
print("failed", report.failed)
print("top", index.search("aurora borealis magnetometer", k=1)[0].page_id)
"""


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    make_pdf(folder / "weather.pdf", [["rain gauge readings"], ["aurora borealis magnetometer logs"]])
    make_pdf(folder / "kitchen.pdf", [["sourdough starter hydration"]])
    make_pdf(folder / "garden.pdf", [["tomato blight and crop rotation"]])
    return folder


def body(tmp_path: Path, docs: Path) -> str:
    return BODY.format(log=str(tmp_path / "runs.log"), index=str(tmp_path / "ix"), docs=str(docs))


def run_python(args: list[str], cwd: Path, stdin: str | None = None, **options) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        **options,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def assert_ingested_once(tmp_path: Path, stdout: str) -> None:
    assert "failed []" in stdout, stdout
    assert "top weather_2" in stdout, stdout
    assert len((tmp_path / "runs.log").read_text().splitlines()) == 1, "the user's code ran again"


@pytest.mark.timeout(150)
def test_script_without_main_guard(tmp_path: Path, docs: Path):
    script = tmp_path / "use.py"
    script.write_text(body(tmp_path, docs))
    assert_ingested_once(tmp_path, run_python([str(script)], tmp_path))


@pytest.mark.timeout(150)
def test_script_from_stdin(tmp_path: Path, docs: Path):
    assert_ingested_once(tmp_path, run_python(["-"], tmp_path, stdin=body(tmp_path, docs)))


@pytest.mark.timeout(150)
def test_command_line_code(tmp_path: Path, docs: Path):
    assert_ingested_once(tmp_path, run_python(["-c", body(tmp_path, docs)], tmp_path))


@pytest.mark.timeout(150)
def test_module_run_with_dash_m(tmp_path: Path, docs: Path):
    (tmp_path / "usemod.py").write_text(body(tmp_path, docs))
    assert_ingested_once(tmp_path, run_python(["-m", "usemod"], tmp_path))


@pytest.mark.timeout(150)
def test_notebook_style_main_without_file(tmp_path: Path, docs: Path):
    # Jupyter runs cells in a __main__ module of its own, with no __file__ and no module spec.
    notebook = (
        "import sys, types\n"
        "main = types.ModuleType('__main__')\n"
        "sys.modules['__main__'] = main\n"
        f"exec(compile({body(tmp_path, docs)!r}, '<cell>', 'exec'), main.__dict__)\n"
    )
    script = tmp_path / "kernel.py"
    script.write_text(notebook)
    assert_ingested_once(tmp_path, run_python([str(script)], tmp_path))


@pytest.mark.timeout(150)
def test_memory_limit_above_the_inherited_hard_limit_is_clamped(tmp_path: Path, docs: Path):
    # `ulimit -v` below --max-memory: workers keep the inherited limit instead of failing to start.
    # The limit is far above what any machine's threads reserve (glibc gives each thread an arena
    # of address space, so a few GiB is too little on a machine with many cores).
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 40, 1 << 40))

    script = tmp_path / "use.py"
    script.write_text(body(tmp_path, docs).replace("jobs=2", "jobs=2, max_memory=2 << 40"))
    assert_ingested_once(tmp_path, run_python([str(script)], tmp_path, preexec_fn=cap))


@pytest.mark.timeout(120)
def test_workers_that_cannot_start_raise_one_error_and_lose_nothing(tmp_path: Path, docs: Path, monkeypatch):
    index = Index.open(tmp_path / "ix", settings=Settings(dense_model=None))
    index.add(docs / "kitchen.pdf")
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # the workers cannot start in a directory that no longer exists
    with pytest.raises(PagesightError, match="worker processes could not start.*current directory"):
        index.add(docs)
    monkeypatch.chdir(tmp_path)
    assert index.documents() == ["kitchen"]
    assert index.search("sourdough hydration")[0].doc_id == "kitchen"
    assert index.add(docs).added == ["garden", "weather"]
