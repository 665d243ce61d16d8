"""Images as base64 PNG text: how chat APIs (data URLs) and MCP carry them."""

from __future__ import annotations

import base64
import io

from PIL import Image


def png_base64(image: Image.Image) -> str:
    """``image`` as a PNG (RGB or grey), base64-encoded."""
    if image.mode not in ("RGB", "L"):
        image = image.convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def image_data_url(image: Image.Image) -> str:
    """``image`` as a ``data:image/png;base64,...`` URL."""
    return "data:image/png;base64," + png_base64(image)
