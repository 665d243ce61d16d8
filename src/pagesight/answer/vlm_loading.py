"""The transformers reader's model and processor, loaded from a hub id or a folder (``load``):
an image-text-to-text model, or a causal language model for text inputs, on a device in a dtype,
with its attention implementation and its images' pixel budget set, a LoRA adapter merged in;
every failure one line naming the model."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from pagesight.devices import resolve_device, resolve_dtype
from pagesight.encode.models import asks_for_trust, looks_like_path, remote_code_refused
from pagesight.encode.visual.processors import set_pixel_budget
from pagesight.errors import PagesightError

INSTALL = "install torch first, then pip install 'pagesight[vlm]'"
# The most image tokens a Qwen-VL processor gives one image unless told otherwise: Qwen2-VL's own
# default, the budget ``answer.context``'s ``qwen2-vl`` accounting counts with (the hub's processor
# configs allow 16,384, which a tile at a high DPI would spend).
MAX_IMAGE_TOKENS = 1280
MAX_PIXELS = 28 * 28 * MAX_IMAGE_TOKENS  # for Qwen2-VL and Qwen2.5-VL (14-pixel patches merged 2 x 2)
ATTENTION = ("auto", "sdpa", "flash_attention_2", "eager")


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
    attention: str = "auto",
    static_cache: bool = False,
) -> tuple[Any, Any]:
    """The model and processor of ``name`` (hub id or local folder), on ``device`` in ``dtype``.

    Image-text-to-text models load with ``AutoModelForImageTextToText``; for ``inputs="text"`` a
    causal language model loads with ``AutoModelForCausalLM``. A model or processor with code of
    its own runs it only with ``trust_remote_code``. ``attention``: the attention implementation,
    ``"auto"`` for FlashAttention 2 on a CUDA device in 16 bits where ``flash_attn`` is installed
    (not with ``static_cache``, which it does not take), else transformers' default (SDPA, or eager
    attention for a model without it). A Qwen-VL image processor resizes each image to
    ``min_pixels`` .. ``max_pixels`` (default: ``MAX_IMAGE_TOKENS`` tokens' worth), set on the loaded
    processor, whose own config would otherwise override them. Every failure is a one-line
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
    implementation = _attention(attention, device, torch_dtype, static_cache)
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
        if vision:
            pixel_budget(processor, min_pixels, max_pixels)
        model_class = (
            transformers.AutoModelForImageTextToText if vision else transformers.AutoModelForCausalLM
        )
        chosen = {"attn_implementation": implementation} if implementation else {}
        model = model_class.from_pretrained(
            source, config=config, dtype=torch_dtype, device_map={"": device}, **trust, **chosen
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


def _attention(attention: str, device: str, dtype: Any, static_cache: bool) -> str | None:
    """The attention implementation to load with (None: transformers' default, SDPA where the
    model has it)."""
    if attention not in ATTENTION:
        raise PagesightError(f"attention must be one of {', '.join(ATTENTION)}, got '{attention}'")
    if attention != "auto":
        return attention
    import torch

    sixteen = dtype in (torch.float16, torch.bfloat16)
    if device.startswith("cuda") and sixteen and not static_cache and importlib.util.find_spec("flash_attn"):
        return "flash_attention_2"
    return None


def pixel_budget(processor: Any, min_pixels: int | None, max_pixels: int | None) -> None:
    """Bound the pixels a Qwen-VL image processor resizes each image to: ``min_pixels`` and
    ``max_pixels`` when given, else at most ``MAX_IMAGE_TOKENS`` tokens (its own minimum kept);
    other processors are told only what was given, and only when their ``size`` has the same
    keys."""
    image_processor = getattr(processor, "image_processor", None)
    size = getattr(image_processor, "size", None)
    if size is None or not {"shortest_edge", "longest_edge"} <= set(dict(size)):
        return
    merge = getattr(image_processor, "merge_size", None)
    if max_pixels is None and merge:
        budget = (image_processor.patch_size * merge) ** 2 * MAX_IMAGE_TOKENS
        max_pixels = min(int(dict(size)["longest_edge"]), budget)
    set_pixel_budget(image_processor, min_pixels, max_pixels)
    for name, value in (("min_pixels", min_pixels), ("max_pixels", max_pixels)):
        if value is not None and getattr(image_processor, name, None) is not None:
            setattr(image_processor, name, value)  # transformers 4's processors read these too


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
