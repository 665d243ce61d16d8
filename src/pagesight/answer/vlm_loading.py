"""The transformers reader's model and processor, loaded from a hub id or a folder (``load``):
an image-text-to-text model, or a causal language model for text inputs, on a device in a dtype,
with a LoRA adapter merged in; every failure one line naming the model."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from pagesight.devices import resolve_device, resolve_dtype
from pagesight.encode.visual.base import asks_for_trust, looks_like_path, remote_code_refused
from pagesight.errors import PagesightError

INSTALL = "install torch first, then pip install 'pagesight[vlm]'"


def load(
    name: str,
    *,
    device: str = "auto",
    dtype: str = "auto",
    inputs: str = "images",
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    adapter: str | None = None,
    trust_remote_code: bool = False,
) -> tuple[Any, Any]:
    """The model and processor of ``name`` (hub id or local folder), on ``device`` in ``dtype``.

    Image-text-to-text models load with ``AutoModelForImageTextToText``; for ``inputs="text"`` a
    causal language model loads with ``AutoModelForCausalLM``. A model or processor with code of
    its own runs it only with ``trust_remote_code``. Every failure is a one-line
    ``PagesightError`` naming the model.
    """
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise PagesightError(
            f"the transformers reader needs torch and transformers ({exc.name} is missing): {INSTALL}"
        ) from None
    if importlib.util.find_spec("accelerate") is None:
        raise PagesightError(f"the transformers reader needs accelerate to place the model: {INSTALL}")
    where = f"transformers reader: cannot load model '{name}'"
    path = Path(name).expanduser()
    if looks_like_path(name) and not path.exists():
        raise PagesightError(f"{where}: no such folder")
    source = str(path) if path.exists() else name
    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING

    trust = {"trust_remote_code": trust_remote_code}  # said either way: never transformers' prompt
    try:
        config = transformers.AutoConfig.from_pretrained(source, **trust)
        vision = type(config) in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING
        if not vision and inputs != "text":
            raise PagesightError(
                f"{where}: a '{config.model_type}' model reads no images; pass inputs='text' for a "
                "text-only model"
            )
        processor = transformers.AutoProcessor.from_pretrained(source, **trust)
        if min_pixels is not None or max_pixels is not None:
            size = processor.image_processor.size
            processor = transformers.AutoProcessor.from_pretrained(
                source,
                **trust,
                size={
                    "shortest_edge": min_pixels or size["shortest_edge"],
                    "longest_edge": max_pixels or size["longest_edge"],
                },
            )
        model_class = (
            transformers.AutoModelForImageTextToText if vision else transformers.AutoModelForCausalLM
        )
        model = model_class.from_pretrained(
            source, config=config, dtype=torch_dtype, device_map={"": device}, **trust
        )
    except PagesightError:
        raise
    except Exception as exc:  # a third-party loader: anything it raises means the model cannot be used
        if asks_for_trust(exc):
            raise remote_code_refused("transformers reader: model", name) from None
        if "torchvision" in str(exc).lower():
            raise PagesightError(
                f"{where}: its processor needs torchvision; install the torchvision build that matches "
                f"torch {torch.__version__}"
            ) from exc
        raise PagesightError(f"{where}: {one_line(exc)}") from exc
    if adapter:
        model = _apply_adapter(model, adapter, where)
    return model, processor


def _apply_adapter(model: Any, adapter: str, where: str) -> Any:
    """``model`` with the PEFT LoRA adapter at ``adapter`` merged into its weights."""
    try:
        from peft import PeftModel
    except ImportError:
        raise PagesightError(f"{where}: the adapter '{adapter}' needs peft: pip install peft") from None
    if not Path(adapter).expanduser().is_dir():
        raise PagesightError(f"{where}: no adapter folder '{adapter}'")
    try:
        return PeftModel.from_pretrained(model, str(Path(adapter).expanduser())).merge_and_unload()
    except Exception as exc:  # peft's loader: anything it raises means the adapter does not fit
        raise PagesightError(f"{where}: cannot apply adapter '{adapter}': {one_line(exc)}") from exc


def one_line(exc: Exception, limit: int = 200) -> str:
    line = " ".join(str(exc).split()) or type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."
