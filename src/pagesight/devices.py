"""Where torch models run and in what precision, one rule for every model pagesight loads (visual
encoders, rerankers, the transformers reader): ``device`` and ``dtype`` given as names, "auto"
made concrete here; and the accelerator backends pagesight does not use left alone
(``jax_held_off``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pagesight.errors import PagesightError

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "float32", "bfloat16", "float16")


def import_torch():
    """The torch module, or a ``PagesightError`` saying how to install it."""
    try:
        import torch
    except ImportError:
        raise PagesightError(
            "this model needs torch: pip install torch==2.13.0, then the extra it needs"
        ) from None
    return torch


def resolve_device(device: str) -> str:
    """``device`` checked and made concrete: "auto" is the first of cuda, mps and cpu available; an
    error names a device torch does not see here (a ``cuda:N`` beyond the GPUs it sees too, which
    torch would otherwise report only when the first weights move there)."""
    torch = import_torch()
    kind, colon, number = device.partition(":")
    if kind not in DEVICES or (colon and (kind != "cuda" or not number.isdigit())):
        raise PagesightError(f"unknown device '{device}'; choose one of {', '.join(DEVICES)} (or cuda:N)")
    cuda, mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    if kind == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if (kind == "cuda" and not cuda) or (kind == "mps" and not mps):
        raise PagesightError(f"device '{device}' was asked for, but torch sees no {kind.upper()} device here")
    count = torch.cuda.device_count() if number else 0
    if number and int(number) >= count:
        seen = (
            f"{count} CUDA devices here (cuda:0 to cuda:{count - 1})"
            if count > 1
            else "one CUDA device here (cuda:0)"
        )
        raise PagesightError(f"device '{device}' was asked for, but torch sees {seen}")
    return device


def free_bytes(device: str) -> int | None:
    """The free memory of CUDA device ``device`` (a concrete one) as the driver reports it now;
    None off CUDA, where memory is the machine's."""
    if not device.startswith("cuda"):
        return None
    torch = import_torch()
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return int(free)


def every_gpu(device: str) -> list[str]:
    """The devices an ingestion encodes on when asked for ``device``: every CUDA device torch sees
    (``cuda:0`` ... ``cuda:N-1``, so ``CUDA_VISIBLE_DEVICES`` chooses them) for "auto" or "cuda"
    when it sees more than one; else ``device`` alone (a ``cuda:N`` named is that one)."""
    if device not in ("auto", "cuda"):
        return [device]
    torch = import_torch()
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [f"cuda:{number}" for number in range(count)] if count > 1 else [device]


def resolve_dtype(dtype: str, device: str) -> torch.dtype:
    """The torch dtype to load weights in on ``device`` (a concrete one): "auto" is bfloat16 on a
    CUDA GPU that has it, float16 on older CUDA GPUs and on mps, float32 on cpu."""
    torch = import_torch()
    if dtype not in DTYPES:
        raise PagesightError(f"unknown dtype '{dtype}'; choose one of {', '.join(DTYPES)}")
    if dtype == "auto":
        kind = device.split(":", 1)[0]
        if kind == "cuda":
            dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
        else:
            dtype = "float16" if kind == "mps" else "float32"
    return getattr(torch, dtype)


@contextmanager
def jax_held_off() -> Iterator[None]:
    """Within the block, ``import jax`` fails as if JAX were not installed, unless the process has
    imported it already (then it is the process's own, left as it is); after it, JAX imports again.

    bm25s imports JAX when it finds it, to pick its top-k, and calls it once at import, which starts
    JAX's GPU backend and, by JAX's default, takes three quarters of the card's memory (107.9 GB of
    an H200's, measured) in every process that imports bm25s. pagesight ranks BM25 itself
    (``store/local/bm25.py``) and never calls bm25s' top-k, so bm25s is imported within this block
    (``encode/lexical.py``) and keeps its numpy path."""
    if "jax" in sys.modules:
        yield
        return
    sys.modules["jax"] = None  # an import of jax (or jax.lax) now raises ModuleNotFoundError
    try:
        yield
    finally:
        if "jax" in sys.modules and sys.modules["jax"] is None:
            del sys.modules["jax"]
