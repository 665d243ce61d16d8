"""What every reader shares: the context it reads, what it returns, the registry, box parsing.

A reader answers a question from a list of ``ContextItem`` (retrieved tiles: the image, possibly
downscaled by a compression factor, and the tile's text with boxes) and returns a ``Reading``: the
answer text, the boxes it cites in *page* pixels per context item, and, when it can tell, the
log-probability of its answer (VisRAG's weighted selection needs it).

Readers that are vision-language models cite regions the ViDoRe V3 way, one tag per image:
``<bboxes image="2">[[x0, y0, x1, y1], ...]</bboxes>``, images numbered from 1 in the order they
were given, coordinates on the model's scale (``"norm1000"``: 0..1000 on each side of the image, as
Qwen2-VL emits them; ``"pixels"``: pixels of the image the model saw, as Qwen2.5-VL emits them).
``parse_bboxes`` strips the tags from the answer and maps the boxes back to the page.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol, runtime_checkable

from PIL import Image

from pagesight.errors import PagesightError
from pagesight.records import Box, Hit, Span
from pagesight.render.tiles import scaled_size

COORDINATES = ("norm1000", "pixels")


@dataclass
class ContextItem:
    """One retrieved tile as a reader sees it.

    ``image`` is produced on first use (re-rendered from the source, then downscaled by
    ``compression``), so text-only readers never render. ``scale`` is the ratio of image pixels to
    page pixels; ``tile_box`` places the image on its page.
    """

    hit: Hit
    spans: list[Span]
    compression: float = 1.0
    load_image: Callable[[], Image.Image] | None = None
    _image: Image.Image | None = field(default=None, repr=False)

    @property
    def image(self) -> Image.Image:
        if self._image is None:
            if self.load_image is None:
                raise PagesightError(f"{self.hit.page_id}: no image for this context item")
            self._image = self.load_image()
        return self._image

    @property
    def text(self) -> str:
        return "\n".join(span.text for span in self.spans)

    @property
    def scale(self) -> float:
        """Image pixels per page pixel."""
        return 1.0 / math.sqrt(self.compression)

    def image_size(self) -> tuple[int, int]:
        """Size of the image a reader sees, known from the tile box without rendering it."""
        x0, y0, x1, y1 = self.hit.tile_box
        return scaled_size(round(x1 - x0), round(y1 - y0), self.compression)

    def to_page(self, box: Box) -> Box:
        """A box in pixels of this item's image mapped to pixels of its page."""
        x0, y0, _, _ = self.hit.tile_box
        s = self.scale
        return (x0 + box[0] / s, y0 + box[1] / s, x0 + box[2] / s, y0 + box[3] / s)


@dataclass
class Reading:
    """A reader's answer: text, cited boxes in page pixels by context index, confidence, usage."""

    text: str
    cited: dict[int, list[Box]] = field(default_factory=dict)
    quotes: dict[int, str] = field(default_factory=dict)  # the cited text by context index, when known
    logprob: float | None = None  # of the answer tokens, when the reader can tell
    usage: dict = field(default_factory=dict)  # tokens in and out when the reader reports them


@dataclass
class Citation:
    doc_id: str
    page: int
    tile: int
    boxes: list[Box]  # page pixels at the index DPI
    text: str = ""  # the cited text, when the reader took it from the tile's text

    @property
    def page_id(self) -> str:
        return f"{self.doc_id}_{self.page}"


@dataclass
class Answer:
    question: str
    text: str
    citations: list[Citation]
    hits: list[Hit]
    reader: str
    timings: dict[str, float]  # seconds: search, context, read, total
    usage: dict  # image tokens per the accounting, compression, tokens reported by the reader
    logprob: float | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["hits"] = [hit.to_dict() for hit in self.hits]
        for citation, cited in zip(data["citations"], self.citations):
            citation["page_id"] = cited.page_id
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


@runtime_checkable
class Reader(Protocol):
    """Answers a question from retrieved tiles.

    ``inputs`` says what the reader looks at: ``"images"``, ``"text"`` or ``"images+text"``.
    ``max_images`` is how many images one call may carry (None: any number); readers limited to
    one are run through the VisRAG strategies (page concatenation or weighted selection).
    """

    name: str
    inputs: str
    max_images: int | None

    def read(self, question: str, context: Sequence[ContextItem]) -> Reading: ...


# name -> "module:factory"; modules load on first use, so heavy backends cost nothing until chosen.
READERS: dict[str, str] = {
    "extractive": "pagesight.answer.extractive:ExtractiveReader",
    "openai": "pagesight.answer.openai_chat:OpenAIReader",
    "transformers": "pagesight.answer.vlm:TransformersReader",
}


def register(name: str, target: str) -> None:
    """Make a reader available by name; ``target`` is ``"module:factory"``."""
    READERS[name] = target


def make_reader(name: str, **options) -> Reader:
    """The reader registered as ``name``, built with ``options`` (model, base URL, device, ...)."""
    if name not in READERS:
        raise PagesightError(f"unknown reader '{name}'; choose one of {', '.join(sorted(READERS))}")
    module, _, factory = READERS[name].partition(":")
    return getattr(importlib.import_module(module), factory)(**options)


_BBOXES = re.compile(r"<bboxes\s+image\s*=\s*[\"']?(\d+)[\"']?\s*>(.*?)</bboxes>", re.DOTALL | re.IGNORECASE)


def parse_bboxes(
    text: str, context: Sequence[ContextItem], coordinates: str = "norm1000"
) -> tuple[str, dict[int, list[Box]], list[str]]:
    """Strip ``<bboxes image="N">`` tags from ``text`` and map their boxes to page pixels.

    Returns the answer without the tags, the boxes per context index (0-based), and one problem
    line per tag or box that was dropped (unknown image, malformed list, empty or inverted box).
    Boxes are clipped to their image.
    """
    if coordinates not in COORDINATES:
        raise PagesightError(f"coordinates must be one of {', '.join(COORDINATES)}, got '{coordinates}'")
    cited: dict[int, list[Box]] = {}
    problems: list[str] = []
    for match in _BBOXES.finditer(text):
        number, body = int(match.group(1)), match.group(2)
        if not 1 <= number <= len(context):
            problems.append(f"bboxes for image {number}, but {len(context)} images were given")
            continue
        try:
            boxes = json.loads(body)
        except json.JSONDecodeError:
            problems.append(f"image {number}: bboxes are not a JSON list: {body.strip()[:80]!r}")
            continue
        if boxes and isinstance(boxes[0], (int, float)):
            boxes = [boxes]  # a single box written without the outer list
        item = context[number - 1]
        width, height = item.image_size()
        for box in boxes:
            if not (
                isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box)
            ):
                problems.append(f"image {number}: not a box [x0, y0, x1, y1]: {box!r}")
                continue
            x0, y0, x1, y1 = (float(v) for v in box)
            if coordinates == "norm1000":
                x0, x1 = x0 * width / 1000, x1 * width / 1000
                y0, y1 = y0 * height / 1000, y1 * height / 1000
            x0, x1 = max(0.0, min(x0, width)), max(0.0, min(x1, width))
            y0, y1 = max(0.0, min(y0, height)), max(0.0, min(y1, height))
            if x1 <= x0 or y1 <= y0:
                problems.append(f"image {number}: empty or inverted box {box!r}")
                continue
            cited.setdefault(number - 1, []).append(item.to_page((x0, y0, x1, y1)))
    answer = " ".join(_BBOXES.sub(" ", text).split())
    return answer, cited, problems
