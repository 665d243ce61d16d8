"""What every reader shares: the context it reads, what it returns, the registry, box parsing.

A reader answers a question from a list of ``ContextItem`` (retrieved tiles: the image, possibly
downscaled by a compression factor, and the tile's text with boxes) and returns a ``Reading``: the
answer text, the boxes it cites in *page* pixels per context item, and, when it can tell, the
log-probability of its answer and the number of tokens it is over (VisRAG's weighted selection
scores an answer by its perplexity). An empty context is the no-retrieval baseline: a model reader
answers from what it knows (``CLOSED_BOOK``). A question may come with a picture it is about
(``ask --image``): a reader that reads images is given it after the tiles, unnumbered, as the
question's image (``read(question, context, image=...)``). A reasoning model's
``<think>...</think>`` is no part of the answer (``strip_thinking``).

Readers that are vision-language models cite regions the ViDoRe V3 way, one tag per image:
``<bboxes image="2">[[x0, y0, x1, y1], ...]</bboxes>``, images numbered in the order they were
given from ``number_from`` (1, or 0 as ViDoRe V3's prompt), coordinates on the model's scale
(``"norm1000"``: 0..1000 on each side of the image, as Qwen2-VL and Qwen3-VL emit them;
``"pixels"``: pixels of the image the model saw, as Qwen2.5-VL emits them; ``"norm1"``: 0..1).
``parse_bboxes`` strips the tags from the answer and maps the boxes back to the page.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from PIL import Image

from pagesight.choices import COORDINATES, INPUTS
from pagesight.errors import PagesightError
from pagesight.records import Box, Hit, Span
from pagesight.registry import Registry, lent
from pagesight.render.tiles import scaled_size

if TYPE_CHECKING:
    from pagesight.request import AskRequest


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
    title: str = ""  # the first line of its document's first page (what the document is about)

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
    """A reader's answer: text, cited boxes in page pixels by context index, confidence, usage; or
    its refusal to answer (``answered`` False, with the ``reason``: ``abstention``)."""

    text: str
    cited: dict[int, list[Box]] = field(default_factory=dict)
    quotes: dict[int, str] = field(default_factory=dict)  # the cited text by context index, when known
    logprob: float | None = None  # sum over the answer tokens, when the reader can tell
    usage: dict = field(default_factory=dict)  # tokens in and out when the reader reports them
    tokens: int | None = None  # how many answer tokens ``logprob`` sums over
    answered: bool = True  # False: the reader declined (its evidence does not hold an answer)
    reason: str | None = None  # why it declined


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
    # False: not answered; the reader declined (the pages do not hold an answer), ``reason`` says why
    answered: bool = True
    reason: str | None = None

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
    ``read`` may take ``image``, a picture the question is about, shown beside the tiles (a
    reader that reads images and takes none is refused one: ``takes_question_image``).
    """

    name: str
    inputs: str
    max_images: int | None

    def read(self, question: str, context: Sequence[ContextItem]) -> Reading: ...


def takes_question_image(reader: Reader) -> bool:
    """Whether ``reader`` is shown a question's picture: it reads images and its ``read`` takes
    ``image``."""
    return reader.inputs != "text" and "image" in inspect.signature(reader.read).parameters


# name -> "module:factory"; modules load on first use, so heavy backends cost nothing until chosen.
READERS = Registry(
    "reader",
    "pagesight.readers",
    {
        "extractive": "pagesight.answer.extractive:ExtractiveReader",
        "openai": "pagesight.answer.openai_chat:OpenAIReader",
        "transformers": "pagesight.answer.vlm:TransformersReader",
    },
)


def register(name: str, target: str) -> None:
    """Make a reader available by name; ``target`` is ``"module:factory"``."""
    READERS.register(name, target)


def make_reader(name: str, **options) -> Reader:
    """The reader registered as ``name``, built with ``options`` (model, base URL, device, ...)."""
    return READERS.load(name)(**options)


def build_reader(request: AskRequest, trust_remote_code: bool = False, **local: Any) -> Reader:
    """The reader ``request.reader`` with the request's reader options and ``local`` ones (an
    endpoint's base URL and key, a device: what the machine serving it decides), allowed to run a
    model's own code with ``trust_remote_code`` when it is a reader that can (the ``transformers``
    one): the caller's leave, never a request's."""
    options = reader_options(request, local)
    options.update(lent(READERS.load(request.reader), trust_remote_code=trust_remote_code))
    try:
        return make_reader(request.reader, **options)
    except TypeError:
        raise PagesightError(f"reader '{request.reader}' takes none of {', '.join(options)}") from None


class Readers:
    """The readers requests are answered with, each built on its first use: ``given`` itself when it
    is a reader (a request may then choose none of the options it was built with), else the reader
    ``given`` names (None: each request's own) built with the request's options and ``local`` ones
    (an endpoint's base URL and key, a device: ``build_reader``), once for each reader and options,
    at most ``kept`` of them (the least recently used going first; None: any number), with the
    caller's leave to run a model's own code (``trust_remote_code``), never a request's."""

    def __init__(
        self,
        given: Reader | str | None = None,
        local: dict[str, Any] | None = None,
        kept: int | None = None,
        trust_remote_code: bool = False,
    ):
        self.given, self.local, self.kept = given, dict(local or {}), kept
        self.trust_remote_code = trust_remote_code
        self._built: OrderedDict[str, Reader] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, request: AskRequest) -> Reader:
        if self.given is not None and not isinstance(self.given, str):
            chosen = request.reader_options()
            if chosen:
                raise PagesightError(
                    f"the reader '{self.given.name}' was given built, with its own options: name it to "
                    f"choose {', '.join(chosen)}"
                )
            return self.given
        if self.given is not None:
            request = request.replace(reader=self.given)
        local = self.local_options(request)
        key = json.dumps([request.reader, reader_options(request, local)], sort_keys=True, default=str)
        with self._lock:
            if key in self._built:
                self._built.move_to_end(key)
                return self._built[key]
        reader = build_reader(request, trust_remote_code=self.trust_remote_code, **local)
        with self._lock:
            self._built[key] = reader
            while self.kept is not None and len(self._built) > self.kept:
                self._built.popitem(last=False)
        return reader

    def local_options(self, request: AskRequest) -> dict[str, Any]:
        """The local options ``request``'s reader is built with."""
        return self.local

    def __len__(self) -> int:
        return len(self._built)


def reader_options(request: AskRequest, local: dict[str, Any]) -> dict[str, Any]:
    """The options ``build_reader`` builds ``request``'s reader with."""
    options = {
        **request.reader_options(),
        **{key: value for key, value in local.items() if value is not None},
    }
    if request.reader == "openai" and request.strategy == "weighted":
        options["logprobs"] = True  # weighted selection weighs each answer by its probability
    return options


_INSTRUCTIONS = (
    "You answer questions from the document pages you are given. Answer concisely, using only what "
    "the given pages say or show. If the answer is not in them, say that it cannot be found in the "
    "given pages."
)
_CITE_BOXES = (
    'After the answer, cite the regions you used: for each image you used, write <bboxes image="N">'
    "[[x0, y0, x1, y1], ...]</bboxes>, with the images numbered from {first} in the order given and "
    "{scale}."
)
_SCALES = {
    "norm1000": "the coordinates running from 0 to 1000 across the image's width and height, (0, 0) "
    "being its top left corner",
    "pixels": "the coordinates in pixels of the image, (0, 0) being its top left corner",
    "norm1": "the coordinates running from 0 to 1 (decimal fractions) across the image's width and "
    "height, (0, 0) being its top left corner",
}
_CITE_LINES = (
    'After the answer, cite the lines you used: for each passage you used, write <lines passage="N">'
    "[k, ...]</lines>, with the passages numbered from {first} in the order given and k the numbers of "
    "its lines."
)


CLOSED_BOOK = (
    "You answer questions concisely from what you know; no document pages are given. If you do not "
    "know the answer, say so."
)
QUESTION_IMAGE = "The question's image"  # the label of a picture the question is about
_ABOUT_IMAGE = (
    "The question comes with an image of its own, labelled {label}: it shows what the question is about."
)
_NOT_A_PAGE = " It is not one of the numbered pages: cite only those."
_THINKING = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_THINKING_END = re.compile(r"</think>", re.IGNORECASE)


def thinking_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds a reasoning model's thinking: each ``<think>...</think>`` block (one left
    open runs to the end), and everything up to a closing tag whose opening one the chat template
    wrote into the prompt."""
    spans = [match.span() for match in _THINKING.finditer(text)]
    first = _THINKING_END.search(text)
    if first and not any(start <= first.start() < end for start, end in spans):
        spans.insert(0, (0, first.end()))
    return spans


def strip_thinking(text: str) -> str:
    """``text`` without its thinking (``thinking_spans``): what a metric, a judge or a score reads."""
    for start, end in reversed(thinking_spans(text)):
        text = text[:start] + " " + text[end:]
    return text.strip()


def instructions(
    inputs: str,
    coordinates: str,
    sizes_labelled: bool = False,
    pages: bool = True,
    number_from: int = 1,
    question_image: bool = False,
) -> str:
    """The system prompt of the model readers: answer from the pages, then cite the regions
    (``<bboxes>``, for image inputs) or the numbered lines (``<lines>``, for text inputs) used,
    the images or passages numbered from ``number_from``.

    ``sizes_labelled``: the label of each image gives its size, which pixel coordinates refer to.
    ``pages`` False: no pages are given (the no-retrieval baseline), ``CLOSED_BOOK``.
    ``question_image``: the question comes with a picture, labelled ``QUESTION_IMAGE``.
    """
    about = _ABOUT_IMAGE.format(label=QUESTION_IMAGE.lower()) if question_image else ""
    if not pages:
        return f"{CLOSED_BOOK}\n{about}" if about else CLOSED_BOOK
    if inputs == "text":
        return f"{_INSTRUCTIONS}\n{_CITE_LINES.format(first=number_from)}"
    scale = _SCALES[coordinates]
    if coordinates == "pixels" and sizes_labelled:
        scale += " (each image's size is given in its label)"
    cite = _CITE_BOXES.format(first=number_from, scale=scale)
    return f"{_INSTRUCTIONS}\n{cite}" + (f"\n{about}{_NOT_A_PAGE}" if about else "")


def model_scale(coordinates: str, seen: tuple[int, int]) -> tuple[float, float]:
    """Pixels of an image as the model saw it (``seen``: its width and height) per unit of
    ``coordinates`` across its width and its height."""
    width, height = seen
    if coordinates == "norm1000":
        return width / 1000, height / 1000
    if coordinates == "norm1":
        return float(width), float(height)
    return 1.0, 1.0


_TAGS = re.compile(r"<(bboxes|lines)\b[^>]*>.*?</\1>", re.DOTALL | re.IGNORECASE)
_BBOXES = re.compile(r"<bboxes\s+image\s*=\s*[\"']?(\d+)[\"']?\s*>(.*?)</bboxes>", re.DOTALL | re.IGNORECASE)
_LINES = re.compile(r"<lines\s+passage\s*=\s*[\"']?(\d+)[\"']?\s*>(.*?)</lines>", re.DOTALL | re.IGNORECASE)


def parse_bboxes(
    text: str,
    context: Sequence[ContextItem],
    coordinates: str = "norm1000",
    seen_sizes: Sequence[tuple[int, int]] | None = None,
    number_from: int = 1,
) -> tuple[str, dict[int, list[Box]], list[str]]:
    """Strip ``<bboxes image="N">`` tags from ``text`` and map their boxes to page pixels.

    Returns the answer without the tags, the boxes per context index (0-based; image
    ``number_from`` is the first), and one problem line per tag or box that was dropped (unknown
    image, malformed list, empty or inverted box). Boxes are clipped to their image.
    ``seen_sizes``: the (width, height) each image had when the model saw it, when its processor
    resized it (boxes refer to those; None: the images' own sizes).
    """
    if coordinates not in COORDINATES:
        raise PagesightError(f"coordinates must be one of {', '.join(COORDINATES)}, got '{coordinates}'")
    cited: dict[int, list[Box]] = {}
    problems: list[str] = []
    for i, number, boxes in _tagged(_BBOXES, text, len(context), "image", problems, number_from):
        if boxes and isinstance(boxes[0], (int, float)):
            boxes = [boxes]  # a single box written without the outer list
        item = context[i]
        width, height = seen_sizes[i] if seen_sizes else item.image_size()
        sx, sy = model_scale(coordinates, (width, height))
        for box in boxes:
            if not (
                isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box)
            ):
                problems.append(f"image {number}: not a box [x0, y0, x1, y1]: {box!r}")
                continue
            x0, y0, x1, y1 = (float(v) for v in box)
            x0, y0, x1, y1 = x0 * sx, y0 * sy, x1 * sx, y1 * sy
            x0, x1 = max(0.0, min(x0, width)), max(0.0, min(x1, width))
            y0, y1 = max(0.0, min(y0, height)), max(0.0, min(y1, height))
            if x1 <= x0 or y1 <= y0:
                problems.append(f"image {number}: empty or inverted box {box!r}")
                continue
            if seen_sizes:  # back from the resized image to the image itself
                image_width, image_height = item.image_size()
                rx, ry = image_width / width, image_height / height
                x0, y0, x1, y1 = x0 * rx, y0 * ry, x1 * rx, y1 * ry
            cited.setdefault(i, []).append(item.to_page((x0, y0, x1, y1)))
    answer = " ".join(_BBOXES.sub(" ", text).split())
    return answer, cited, problems


def _tagged(pattern: re.Pattern, text: str, count: int, what: str, problems: list[str], first: int):
    """``(index, number, value)`` for each tag of ``pattern`` in ``text`` whose number is one of
    the ``count`` from ``first`` (index: its place from 0) and whose body is JSON; one line in
    ``problems`` for each other tag."""
    for match in pattern.finditer(text):
        number, body = int(match.group(1)), match.group(2)
        if not first <= number < first + count:
            given = f"{what}s {first} to {first + count - 1}" if count else f"no {what}s"
            problems.append(f"a tag for {what} {number}, but {given} were given")
            continue
        try:
            yield number - first, number, json.loads(body)
        except json.JSONDecodeError:
            problems.append(f"{what} {number}: not a JSON list: {body.strip()[:80]!r}")


def check_options(inputs: str, coordinates: str | None, max_images: int | None, number_from: int = 1) -> None:
    """The options every model reader takes, checked alike (``coordinates`` None: the model
    family's, told once the model is known)."""
    if inputs not in INPUTS:
        raise PagesightError(f"inputs must be one of {', '.join(INPUTS)}, got '{inputs}'")
    if coordinates is not None and coordinates not in COORDINATES:
        raise PagesightError(f"coordinates must be one of {', '.join(COORDINATES)}, got '{coordinates}'")
    if max_images is not None and max_images < 1:
        raise PagesightError(f"max_images must be 1 or more (or None for any number), got {max_images}")
    if number_from not in (0, 1):
        raise PagesightError(f"number_from must be 0 or 1, got {number_from!r}")


def label(item: ContextItem) -> str:
    """How a prompt names a tile: ``doc page P tile T``."""
    hit = item.hit
    return f"{hit.doc_id} page {hit.page} tile {hit.tile}"


def passages_prompt(question: str, context: Sequence[ContextItem], number_from: int = 1) -> str:
    """A text-only prompt: each tile's numbered lines as a labelled passage (the first numbered
    ``number_from``), then the question."""
    passages = [
        f"Passage {n}: {label(item)}\n{numbered_lines(item)}" for n, item in enumerate(context, number_from)
    ]
    return "\n\n".join([*passages, f"Question: {question}"])


def numbered_lines(item: ContextItem) -> str:
    """The item's text lines as ``[k] text``, k from 1, the numbers ``<lines>`` citations use."""
    if not item.spans:
        return "(no text)"
    return "\n".join(f"[{k}] {span.text}" for k, span in enumerate(item.spans, 1))


def parse_lines(
    text: str, context: Sequence[ContextItem], number_from: int = 1
) -> tuple[str, dict[int, list[Box]], dict[int, str], list[str]]:
    """Strip ``<lines passage="N">[k, ...]</lines>`` tags from ``text``; the cited lines' boxes.

    Returns the answer without the tags, the boxes of the cited lines per context index (0-based;
    passage ``number_from`` is the first; span boxes are already page pixels), their text per
    context index, and one problem line per tag or line number that was dropped.
    """
    cited: dict[int, list[Box]] = {}
    quoted: dict[int, list[str]] = {}
    problems: list[str] = []
    for i, number, lines in _tagged(_LINES, text, len(context), "passage", problems, number_from):
        spans = context[i].spans
        for k in lines if isinstance(lines, list) else [lines]:
            if not (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= len(spans)):
                problems.append(f"passage {number}: no line {k!r} (it has {len(spans)})")
                continue
            span = spans[k - 1]
            cited.setdefault(i, []).append(tuple(span.box))
            quoted.setdefault(i, []).append(span.text)
    answer = " ".join(_LINES.sub(" ", text).split())
    return answer, cited, {i: "\n".join(texts) for i, texts in quoted.items()}, problems


def answer_logprob(tokens: Sequence[tuple[str, float]], text: str) -> tuple[float, int]:
    """Sum of the log-probabilities of ``tokens`` (text, logprob) that are not inside citation tags
    or thinking (a token counts where its first non-space character is), and how many they are.

    When the tokens do not spell ``text`` (byte-level tokens some servers report), every token counts.
    """
    if "".join(token for token, _ in tokens) != text:
        return sum(logprob for _, logprob in tokens), len(tokens)
    skipped = [match.span() for match in _TAGS.finditer(text)] + thinking_spans(text)
    total, counted, offset = 0.0, 0, 0
    for token, logprob in tokens:
        begins = offset + len(token) - len(token.lstrip())  # " <bboxes" belongs to the tag
        if not any(start <= begins < end for start, end in skipped):
            total += logprob
            counted += 1
        offset += len(token)
    return total, counted
