"""Loading the processors of visual encoders, with or without torchvision.

The Qwen-VL processors (and colpali-engine's ColQwen processors built on them) declare a video
processor, and transformers builds video processors only with torchvision. Page retrieval never
sees a video, so every processor is loaded through ``image_only``: the same class without its video
attribute, which transformers then loads from the image processor and tokenizer alone. With
torchvision installed the code path is the same (transformers merely picks its torchvision image
processor), so the path tested here is the one users run.
"""

from __future__ import annotations

import inspect
import math
from functools import cache
from typing import Any


@cache
def image_only(processor_class: type) -> type:
    """``processor_class`` without its video processor; the class itself when it has none."""
    if "video_processor" not in inspect.signature(processor_class.__init__).parameters:
        return processor_class

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        # The parent passes video_processor=None on; ProcessorMixin only keeps the attributes this
        # signature names, so the missing video processor is never looked up.
        processor_class.__init__(
            self,
            image_processor=image_processor,
            tokenizer=tokenizer,
            video_processor=None,
            chat_template=chat_template,
            **kwargs,
        )

    return type(f"ImageOnly{processor_class.__name__}", (processor_class,), {"__init__": __init__})


def set_pixel_budget(image_processor: Any, min_pixels: int | None, max_pixels: int | None) -> int:
    """Bound the pixels a Qwen-style image processor resizes each image to (its ``size`` edges are
    pixel counts there); returns the maximum in force."""
    size = dict(image_processor.size)
    if min_pixels is not None:
        size["shortest_edge"] = min_pixels
    if max_pixels is not None:
        size["longest_edge"] = max_pixels
    if size["shortest_edge"] > size["longest_edge"]:
        size["shortest_edge"] = size["longest_edge"]
    image_processor.size = size
    return int(size["longest_edge"])


def qwen_resize(
    height: int, width: int, factor: int = 28, min_pixels: int = 56 * 56, max_pixels: int = 28 * 28 * 1280
) -> tuple[int, int]:
    """The size Qwen2-VL's image processor gives an image: sides rounded to ``factor``, area bounded."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w
