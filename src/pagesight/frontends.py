"""What every front-end does the same way, under the CLI (``cli/``), the HTTP API (``serve/app.py``)
and the MCP tools (``serve/mcp.py``): hits as one JSON payload, error messages without the server's paths (``Scrub``), boxes and query images read from what a user typed or uploaded.

The requests themselves are ``request.SearchRequest`` and ``request.AskRequest``; the verbs are
``Index.search`` and ``Index.ask``. Errors here are ``PagesightError`` naming the input; each
front-end words them its way (a line on stderr, a JSON error with its status, a tool error).
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from PIL import Image

from pagesight.answer.context import image_tokens
from pagesight.errors import PagesightError
from pagesight.records import Box, Hit
from pagesight.render.tiles import scaled_size

MAX_BOXES = 200  # boxes one request may have drawn
MAX_QUERY_PIXELS = 16_000_000  # a query image's pixels (a 4,000 x 4,000 photograph)
MAX_QUERY_BYTES = 20_000_000  # a query image sent as base64 text (JSON, MCP), once decoded
SENT_FORMATS = ("PNG", "JPEG")  # what a query image sent as base64 text may be


def hits_payload(hits: Sequence[Hit], compression: float = 1.0, token_model: str = "qwen2-vl") -> dict:
    """Hits as JSON (``Hit.to_dict``), with the image tokens they would cost a reader seeing them at
    ``compression`` under ``token_model``."""
    tokens = 0
    for hit in hits:
        x0, y0, x1, y1 = hit.tile_box
        tokens += image_tokens(*scaled_size(round(x1 - x0), round(y1 - y0), compression), token_model)
    return {
        "hits": [hit.to_dict() for hit in hits],
        "image_tokens": tokens,
        "compression": compression,
        "token_model": token_model,
    }


def parse_boxes(text: str, name: str, limit: int = MAX_BOXES) -> list[Box]:
    """``x0,y0,x1,y1;...`` as boxes; ``PagesightError`` naming ``name`` when malformed, inverted
    or more than ``limit``."""
    found = []
    for part in text.split(";"):
        try:
            x0, y0, x1, y1 = (float(value) for value in part.split(","))
        except ValueError:
            raise PagesightError(
                f"{name} must be x0,y0,x1,y1 in pixels (several joined by ;), got '{part}'"
            ) from None
        if not (x0 < x1 and y0 < y1) or min(x0, y0) < -1e6 or max(x1, y1) > 1e6:
            raise PagesightError(f"{name}: '{part}' is not a box (x0 < x1 and y0 < y1)")
        found.append((x0, y0, x1, y1))
    if len(found) > limit:
        raise PagesightError(f"at most {limit} {name}")
    return found


def parse_region(text: str | None, name: str = "region") -> Box | None:
    """One box ``x0,y0,x1,y1`` in a query image's pixels, or None when not given."""
    return parse_boxes(text, name, limit=1)[0] if text else None


def open_image(source: str | IO[bytes], name: str, formats: tuple[str, ...] | None = None) -> Image.Image:
    """A query image from a path or an open file, as RGB; ``PagesightError`` naming ``name`` when
    Pillow cannot read it, it is none of ``formats`` (Pillow's names; None: any), or it has more
    than ``MAX_QUERY_PIXELS`` pixels, or sides an encoder would blow up
    (``search.engine.query_size_refusal``), told from its header, before it is decoded."""
    from pagesight.search.engine import query_size_refusal

    try:
        with Image.open(source) as opened:
            if formats is not None and opened.format not in formats:
                raise PagesightError(f"{name}: a {opened.format} image; send {' or '.join(formats)}")
            if opened.width * opened.height > MAX_QUERY_PIXELS:
                raise PagesightError(
                    f"{name}: {opened.width}x{opened.height} is more than a query image's "
                    f"{MAX_QUERY_PIXELS:,} pixels"
                )
            refused = query_size_refusal(opened.width, opened.height)
            if refused is not None:
                raise PagesightError(f"{name}: {refused}")
            return opened.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise PagesightError(f"{name}: not an image Pillow can read ({exc})") from None


def decode_image(text: str, name: str) -> Image.Image:
    """A query image sent as base64 text (``SENT_FORMATS``, optionally as a data URL) as RGB;
    ``PagesightError`` naming ``name`` when it is not base64, decodes to more than
    ``MAX_QUERY_BYTES``, or is not an image ``open_image`` takes."""
    data = "".join(text.partition(",")[2].split() if text.startswith("data:") else text.split())
    if len(data) * 3 // 4 > MAX_QUERY_BYTES:
        raise PagesightError(f"{name}: more than a query image's {MAX_QUERY_BYTES:,} bytes")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise PagesightError(f"{name}: not base64 text (a PNG or JPEG image, base64-encoded)") from None
    return open_image(io.BytesIO(raw), name, SENT_FORMATS)


class Scrub:
    """Error messages with the server's folders named by placeholders and any other absolute
    path by its file's name: a client is never told where anything is on the server's disk."""

    def __init__(self, folders: dict[Path, str]):
        pairs = {}
        for folder, name in folders.items():  # absolute forms: a relative one could be any word
            for form in (str(Path(folder).resolve()), str(Path(folder).absolute())):
                pairs[form] = name
        self.pairs = sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True)

    def __call__(self, message: str) -> str:
        for form, name in self.pairs:
            message = message.replace(form, name)
        return _PATH.sub(r"\1", message)  # any other absolute path: its file's name alone


_PATH = re.compile(r"(?<![\w.>])/(?:[^\s'\"()<>/]+/)+([^\s'\"()<>/]+)")
