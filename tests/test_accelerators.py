"""pagesight starts no accelerator backend it does not use: bm25s, which would import JAX and run it
once (starting its GPU backend, which takes three quarters of the card by default), is held to its
numpy path, and JAX, started by anything else, finds ``XLA_PYTHON_CLIENT_PREALLOCATE=false``.

JAX is not installed here, and it is not what runs: a stand-in ``jax`` package on the path of a
child process records being imported (and the environment it found), which is what these tests
look at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, make_pdf

FAKE_JAX = """
import json, os
with open(os.environ["FAKE_JAX_RECORD"], "a") as record:
    record.write(json.dumps({"pid": os.getpid(),
                             "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")}) + "\\n")
"""
FAKE_LAX = """
import numpy as np

def top_k(scores, k):
    order = np.argsort(-np.asarray(scores))[:k]
    return np.asarray(scores)[order], order
"""


def _child(tmp_path: Path, script: str) -> tuple[dict, list[dict]]:
    """Run ``script`` in a child process that finds the stand-in jax; its JSON output and what the
    stand-in recorded (one line per process that imported it)."""
    fake = tmp_path / "fake"
    (fake / "jax").mkdir(parents=True, exist_ok=True)
    (fake / "jax" / "__init__.py").write_text(FAKE_JAX)
    (fake / "jax" / "lax.py").write_text(FAKE_LAX)
    record = tmp_path / "jax-imports.jsonl"
    record.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "XLA_PYTHON_CLIENT_PREALLOCATE"}
    env["PYTHONPATH"] = os.pathsep.join([str(fake), str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    env["FAKE_JAX_RECORD"] = str(record)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imports = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return json.loads(done.stdout.strip().splitlines()[-1]), imports


@pytest.mark.timeout(60)
def test_the_stand_in_is_what_bm25s_imports_on_its_own(tmp_path: Path):
    """The control: bm25s imported without pagesight finds the stand-in and imports it, so the test
    below would see an import of JAX that pagesight let through."""
    out, imports = _child(
        tmp_path, 'import sys, json, bm25s; print(json.dumps({"jax": "jax" in sys.modules}))'
    )
    assert out == {"jax": True} and len(imports) == 1


@pytest.mark.timeout(120)
def test_ingesting_and_searching_import_no_jax(tmp_path: Path):
    make_pdf(tmp_path / "owls.pdf", [["Barn owls hunt voles at night"], ["Owl pellets hold small bones"]])
    script = """
        import json, sys
        import pagesight
        from pagesight import Index

        index = Index.open("idx", settings={"dense_model": None})
        report = index.add(["owls.pdf"], jobs=1)
        hits = index.search("pellets", k=1, mode="lexical")
        seen = {"jax": "jax" in sys.modules, "hit": hits[0].page_id, "ok": report.ok}
        import jax  # the process's own JAX still imports, and finds no preallocation asked for
        print(json.dumps(seen))
    """
    out, imports = _child(tmp_path, script)
    assert out == {"jax": False, "hit": "owls_2", "ok": True}
    assert len(imports) == 1 and imports[0]["preallocate"] == "false"  # the script's own import alone


@pytest.mark.timeout(60)
def test_a_jax_the_process_imported_first_is_left_as_it_is(tmp_path: Path):
    """Held off only when absent: a process that imported JAX itself keeps it, and bm25s uses it."""
    script = """
        import json, os, sys
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true"  # the user's own choice stays
        import jax
        import pagesight.encode.lexical
        import bm25s.selection
        print(json.dumps({"bm25s_jax": bm25s.selection.JAX_IS_AVAILABLE}))
    """
    out, imports = _child(tmp_path, script)
    assert out == {"bm25s_jax": True}
    assert [found["preallocate"] for found in imports] == ["true"]
