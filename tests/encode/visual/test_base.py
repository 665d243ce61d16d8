"""The registry, specs and compatibility checks, pooling and normalisation, device and option errors:
what every visual encoder shares, without building a model."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from pagesight.devices import resolve_device, resolve_dtype
from pagesight.encode.models import load_pretrained
from pagesight.encode.visual import ENCODERS, check_compatible, describe_spec, make_encoder
from pagesight.encode.visual.base import normalize
from pagesight.errors import PagesightError

torch = pytest.importorskip("torch")

from pagesight.encode.visual.pooling import (  # noqa: E402
    last_token_pool,
    mean_pool,
    position_weighted_mean_pool,
)

SPEC = {
    "name": "dse",
    "model": "MrLight/dse-qwen2-2b-mrl-v1",
    "adapter": None,
    "revision": "abc",
    "dim": 1536,
}


class FakeSpec:
    """Stands in for an encoder where only ``spec()`` is read."""

    def __init__(self, **changes):
        self.value = {**SPEC, "multi_vector": False, **changes}

    def spec(self) -> dict:
        return self.value


def test_registry_resolves_every_entry():
    import importlib

    for name, target in ENCODERS.items():
        module, _, factory = target.partition(":")
        encoder_class = getattr(importlib.import_module(module), factory)
        assert encoder_class.name == name
    with pytest.raises(PagesightError, match="unknown visual encoder 'colbert'; choose one of .*dse"):
        make_encoder("colbert")


def test_check_compatible():
    recorded = {**SPEC, "multi_vector": False}
    check_compatible(recorded, FakeSpec())
    check_compatible(recorded, FakeSpec(revision=None))  # a local copy of the same model
    check_compatible(recorded, FakeSpec(max_pixels=1))  # resolution does not change the space
    with pytest.raises(
        PagesightError,
        match=r"built with visual encoder 'dse' \(model MrLight.*adapter /x.*\(adapter differ\)",
    ):
        check_compatible(recorded, FakeSpec(adapter="/x"))
    with pytest.raises(PagesightError, match="revision differ"):
        check_compatible(recorded, FakeSpec(revision="def"))
    with pytest.raises(PagesightError, match="dim, multi_vector differ"):
        check_compatible(recorded, FakeSpec(dim=128, multi_vector=True))
    assert describe_spec({**recorded, "multi_vector": True}).endswith("multi-vector, dim 1536)")


def test_pooling():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    left = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    assert torch.equal(last_token_pool(hidden, left), hidden[[0, 1], [3, 3]])
    assert torch.equal(last_token_pool(hidden, right), hidden[[0, 1], [1, 3]])
    assert torch.allclose(mean_pool(hidden, right)[0], hidden[0, :2].mean(0))
    weighted = position_weighted_mean_pool(hidden, left)
    assert torch.allclose(weighted[0], (1 * hidden[0, 1] + 2 * hidden[0, 2] + 3 * hidden[0, 3]) / 6)
    assert torch.allclose(
        position_weighted_mean_pool(hidden, right)[0], (hidden[0, 0] + 2 * hidden[0, 1]) / 3
    )


def test_normalize():
    vectors = normalize(np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float64))
    assert vectors.dtype == np.float32
    assert np.allclose(vectors, [[0.6, 0.8], [0.0, 0.0]])


def test_devices_and_dtypes():
    assert resolve_device("cpu") == "cpu"
    assert (
        resolve_dtype("auto", "cpu") == torch.float32 and resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    )
    with pytest.raises(PagesightError, match="unknown device 'gpu'"):
        resolve_device("gpu")
    with pytest.raises(PagesightError, match="unknown dtype 'int8'"):
        resolve_dtype("int8", "cpu")
    for malformed in ("cuda:x", "cpu:0", "cuda:"):
        with pytest.raises(PagesightError, match=f"unknown device '{malformed}'"):
            resolve_device(malformed)
    if not torch.cuda.is_available():
        with pytest.raises(PagesightError, match="torch sees no CUDA device"):
            resolve_device("cuda")


def test_a_gpu_number_beyond_those_torch_sees_is_refused(monkeypatch):
    """cuda:N is checked against the GPUs torch sees, before any weights move (on a machine with
    two GPUs here, simulated)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda") == "cuda" and resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(
        PagesightError,
        match=r"'cuda:2' was asked for, but torch sees 2 CUDA devices here \(cuda:0 to cuda:1\)$",
    ):
        resolve_device("cuda:2")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(
        PagesightError, match=r"'cuda:1' was asked for, but torch sees one CUDA device here \(cuda:0\)$"
    ):
        resolve_device("cuda:1")


def test_load_errors_name_the_model(tmp_path):
    with pytest.raises(
        PagesightError, match=f"cannot load the model from '{tmp_path / 'a' / 'b'}': no such folder"
    ):
        load_pretrained("model", str(tmp_path / "a" / "b"), lambda path: path)

    def broken(path):
        raise RuntimeError("bad header\nmore detail")

    with pytest.raises(PagesightError, match=f"cannot load the model from '{tmp_path}': bad header$"):
        load_pretrained("model", str(tmp_path), broken)


@pytest.mark.timeout(60)
def test_loading_an_encoders_class_imports_no_torch():
    """``Index.info`` reads whether an index's encoder draws similarity maps from its class: that
    must not cost a torch import (seconds) in a process that serves BM25 alone."""
    script = (
        "import sys\n"
        "from pagesight.encode.visual import ENCODERS\n"
        "for name in ENCODERS: ENCODERS.load(name)\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr
