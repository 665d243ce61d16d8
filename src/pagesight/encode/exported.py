"""Sentence embedders exported to ONNX once per machine, so a query is encoded without torch.

Loading torch and sentence-transformers costs seconds; a search or an answer encodes one question.
The first time the torch model is loaded on a machine, its transformer and mean pooling are
exported to ONNX (``torch.onnx``, needs the ``onnx`` package), checked against the torch model
on probe texts (largest difference at most ``TOLERANCE``) and cached under ``cache_dir()``; later
processes run the cached file with onnxruntime and the model's own ``tokenizer.json``
(tokenizers). A missing or unusable export is never an error: the caller falls back to torch.
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from pathlib import Path

import numpy as np

from pagesight.settings import cache_dir

log = logging.getLogger(__name__)

TOLERANCE = 1e-5
RECIPE = "mean-pooled-normalized-v1"  # part of the cache key: change it when the graph changes
PROBES = [
    "What was the West region's revenue in Q3?",
    "naïve café, Zürich — 東京 1.5 µm ≥ 3 %",
    "a long page " * 200,  # past the token limit: truncation must match
]


def export_path(name: str, *folders: Path) -> Path:
    """The cache file for the model made of ``folders`` (a model, then any adapter on it), keyed by
    their weights files' paths, sizes and times."""
    key = RECIPE
    for folder in folders:
        for weights in sorted(folder.glob("*.safetensors")):
            stat = weights.stat()
            key += f"\n{weights.resolve()}\n{stat.st_size}\n{stat.st_mtime_ns}"
    return cache_dir() / "onnx" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.onnx"


class OnnxSentenceEncoder:
    """Normalised mean-pooled sentence vectors from an exported transformer, run by onnxruntime."""

    def __init__(self, path: Path, model_dir: Path, max_tokens: int):
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # Threads done with their part sleep instead of spinning: beside other busy processes (a
        # server's other requests, an ingestion) spinning took 14-18 ms a query against 6-9 ms.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.intra_op_num_threads = THREADS[0]
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_tokens)
        # BERT's pad token, or RoBERTa's (XLM-R, the multilingual models)
        token = next((t for t in ("[PAD]", "<pad>") if self.tokenizer.token_to_id(t) is not None), "[PAD]")
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id(token) or 0, pad_token=token)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        out = []
        for start in range(0, len(texts), batch_size):
            batch = self.tokenizer.encode_batch(texts[start : start + batch_size])
            inputs = {
                "input_ids": np.array([e.ids for e in batch], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in batch], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in batch], dtype=np.int64),
            }
            out.append(self.session.run(None, inputs)[0])
        return np.concatenate(out).astype(np.float32, copy=False)


# Threads each encoding uses: 0 is onnxruntime's default, every core, quickest for one process
# asking alone; a server sets 1 (``use_threads``): its concurrent requests are its parallelism, and
# four asks at once on two cores then take 89 ms at p50, against 95 ms on two threads each
# (BENCHMARKS.md, "Serving").
THREADS = [0]


def use_threads(count: int) -> None:
    """Encode with ``count`` threads in sessions made from now on (0: onnxruntime's default)."""
    THREADS[0] = count


def load(path: Path, model_dir: Path, max_tokens: int) -> OnnxSentenceEncoder | None:
    """The cached export at ``path``, or None when it is absent or onnxruntime cannot run it."""
    if not path.is_file():
        return None
    try:
        return OnnxSentenceEncoder(path, model_dir, max_tokens)
    except Exception as exc:  # a damaged cache file or a missing runtime: torch does the work
        log.debug("cannot use the ONNX export %s: %s", path, exc)
        return None


def export(sentence_transformer, path: Path, model_dir: Path, max_tokens: int) -> bool:
    """Export the loaded sentence-transformers model to ``path``; True when it was written.

    The file appears only complete and only once its vectors agree with the torch model's.
    """
    try:
        import torch
    except ImportError:
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        module = _mean_pooled(sentence_transformer[0].auto_model).eval()
        sample = torch.ones((2, 8), dtype=torch.long)
        axes = {0: "batch", 1: "tokens"}
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                (sample, sample, torch.zeros_like(sample)),
                str(tmp),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["sentence_embedding"],
                dynamic_axes={
                    "input_ids": axes,
                    "attention_mask": axes,
                    "token_type_ids": axes,
                    "sentence_embedding": {0: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
        exported = OnnxSentenceEncoder(tmp, model_dir, max_tokens).encode(PROBES)
        reference = sentence_transformer.encode(
            PROBES, normalize_embeddings=True, convert_to_numpy=True, prompt=""
        )
        difference = float(np.abs(exported - reference).max())
        if difference > TOLERANCE:
            log.warning("ONNX export of %s differs from torch by %.2g; not used", model_dir, difference)
            return False
        os.replace(tmp, path)
        return True
    except Exception as exc:  # no `onnx` package, a read-only cache, an exporter change: use torch
        log.debug("cannot export %s to ONNX: %s", model_dir, exc)
        return False
    finally:
        tmp.unlink(missing_ok=True)


def _mean_pooled(auto_model):
    import torch

    class MeanPooled(torch.nn.Module):
        """The transformer's token states, averaged over the real tokens and normalised."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            states = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    return MeanPooled(auto_model)
