"""Shared helpers of the vector tests: synthetic data, and colpali-engine's real code."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def one_faiss_thread():
    """FAISS's OpenMP threads busy-wait for each other: on a 2-core machine shared with other work a
    tiny index trains 3-5x slower with 2 threads than with 1, so these small tests use one (restored
    after each test; the library default is untouched)."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


def colpali_module(name: str) -> types.ModuleType:
    """A module of colpali-engine, imported without running ``colpali_engine/__init__.py``.

    That ``__init__`` imports every model class, and through transformers' Qwen2-VL image processor
    torchvision, which is not installed here (colpali-engine is installed with --no-deps). The modules
    used here (``utils.processing_utils``, ``compression.token_pooling``) only need torch, PIL,
    transformers and scipy, so an empty package object pointing at the real folder lets Python import
    them, unchanged, from their files.
    """
    if "colpali_engine" not in sys.modules:
        spec = importlib.util.find_spec("colpali_engine")
        if spec is None:
            pytest.skip("colpali-engine is not installed")
        package = types.ModuleType("colpali_engine")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["colpali_engine"] = package
    return importlib.import_module(name)


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def clustered(n: int, dim: int, centres: int, seed: int = 0, spread: float = 0.3) -> np.ndarray:
    """Unit vectors around ``centres`` random centres, the kind of data ANN indexes are built for."""
    rng = np.random.default_rng(seed)
    middle = unit(rng.standard_normal((centres, dim)))
    return unit(middle[rng.integers(0, centres, n)] + spread * unit(rng.standard_normal((n, dim))))


def topic_pages(
    pages: int,
    dim: int,
    topics: int = 300,
    per_page: int = 5,
    lengths: tuple[int, int] = (20, 60),
    seed: int = 0,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Multi-vector pages made of noisy copies of a few topic vectors each (redundant, like patches)."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((topics, dim)))
    out = []
    for _ in range(pages):
        chosen = rng.choice(topics, per_page, replace=False)
        n = int(rng.integers(*lengths))
        out.append(unit(centres[rng.choice(chosen, n)] + 0.5 * unit(rng.standard_normal((n, dim)))))
    return out, centres


def planted_queries(pages: list[np.ndarray], count: int, length: int = 8, seed: int = 1):
    """Queries that are noisy samples of a planted page's vectors; returns (queries, planted pages)."""
    rng = np.random.default_rng(seed)
    targets = rng.choice(len(pages), count, replace=False)
    queries = []
    for target in targets:
        rows = pages[target][rng.choice(len(pages[target]), length)]
        queries.append(unit(rows + 0.2 * unit(rng.standard_normal(rows.shape))))
    return queries, targets


def exact_top(queries: np.ndarray, data: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-(unit(queries) @ data.T), axis=1, kind="stable")[:, :k]


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    k = truth.shape[1]
    return float(np.mean([len(set(f[:k].tolist()) & set(t.tolist())) / k for f, t in zip(found, truth)]))
