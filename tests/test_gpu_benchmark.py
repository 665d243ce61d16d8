"""``benchmarks/gpu.py --tiny``: the GPU benchmark's own code at toy size on the CPU, so it keeps
running between the runs on a GPU: every step measured without error, each figure in its place."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
if importlib.util.find_spec("colpali_engine") is None:  # imported by pagesight without torchvision
    pytest.skip("colpali-engine is not installed", allow_module_level=True)


def _errors(found, where: str = "") -> list[str]:
    if not isinstance(found, dict):
        return []
    own = [f"{where}: {found['error']}"] if "error" in found else []
    return own + [error for key, value in found.items() for error in _errors(value, f"{where}.{key}")]


@pytest.mark.timeout(420)
def test_the_gpu_benchmark_runs_every_step_at_toy_size(tmp_path):
    out = tmp_path / "gpu.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--tiny", "--clients", "2", "--json", str(out)],
        env=env, capture_output=True, text=True, cwd=tmp_path, timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(out.read_text())
    assert json.loads(done.stdout) == found
    assert not _errors(found), _errors(found)
    assert found["tiny"] and found["environment"]["device"] == "cpu" and found["pages"]["tiles"] > 0
    for name in ("colqwen2.5", "colpali", "dse"):
        ingest = found[name]["ingest"]
        assert ingest["tiles"] == found["pages"]["tiles"] and ingest["failed"] == 0
        assert ingest["calls"] >= 1 and 0 <= ingest["idle_fraction"] <= 1 and ingest["batch"] >= 1
        assert found[name]["encoder_api"]["best_tiles_per_s"] > 0
        assert found[name]["search"]["visual"]["p50_ms"] > 0 and found[name]["search"]["hybrid"]["p50_ms"] > 0
    for name in ("colqwen2.5", "colpali"):
        assert set(found[name]["by_hand"]["tiles_per_s"]) == {"2", "4"} and found[name]["ratio"] > 0
    served = found["colqwen2.5"]["serve"]
    assert served["visual"]["clients"] == 2 and served["visual"]["errors"] == served["hybrid"]["errors"] == 0
    assert found["reader"]["prefill_s_p50"] > 0 and len(found["reader"]["completion_tokens"]) == 2
    assert found["models"]["reader"]["parameters"] > 0 and "host_peak_gib" in found["reader"]
