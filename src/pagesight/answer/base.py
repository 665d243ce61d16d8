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
``answer.prompts`` says so to them and reads their replies: ``parse_bboxes`` strips the tags from the
answer and maps the boxes back to the page.
"""

from __future__ import annotations

import inspect
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from PIL import Image

from pagesight.errors import PagesightError
from pagesight.records import Box, Hit, Region, Span
from pagesight.registry import Registry, lent
from pagesight.render.tiles import scaled_size

if TYPE_CHECKING:
    from pagesight.request import AskRequest, SearchRequest
    from pagesight.settings import Settings
    from pagesight.store.base import Catalog, Store


@dataclass
class ContextItem:
    """One retrieved tile as a reader sees it.

    ``image`` is produced on first use (re-rendered from the source, then downscaled by
    ``compression``), so text-only readers never render. ``scale`` is the ratio of image pixels to
    page pixels; ``tile_box`` places the image on its page. ``regions``: the layout regions that
    lie on the tile (page pixels), ``layout`` whether its index looked for them (``ingest
    --layout``); ``inputs="auto"`` reads them (``answer.inputs``).
    """

    hit: Hit
    spans: list[Span]
    compression: float = 1.0
    load_image: Callable[[], Image.Image] | None = None
    _image: Image.Image | None = field(default=None, repr=False)
    title: str = ""  # the first line of its document's first page (what the document is about)
    regions: list[Region] = field(default_factory=list)
    layout: bool = False
    _as_text: bool | None = field(default=None, repr=False)  # inputs auto's choice, once made
    # its document's text page by page (page -> text), read when first called: what the extractive
    # reader looks for a question's names in beyond the tile (None: the context's tiles alone)
    load_document: Callable[[], dict[int, str]] | None = field(default=None, repr=False)

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
    _: KW_ONLY  # the rest by name, so a field added among them cannot take another's value
    answered: bool = True  # False: the reader declined (its evidence does not hold an answer)
    reason: str | None = None  # why it declined
    # how likely the answer is supported by the pages (0..1), when the reader can tell (extractive)
    support: float | None = None
    # seconds of the reading's own stages, when the reader times them: "prefill" (the prompt read,
    # images encoded, the first token chosen) and "decode" (the other tokens); ``Answer.timings``
    timings: dict[str, float] = field(default_factory=dict)


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
    # seconds: search, context, read, total; a reader that times its stages adds prefill and decode
    timings: dict[str, float]
    usage: dict  # image tokens per the accounting, compression, tokens reported by the reader
    logprob: float | None = None
    # False: not answered; the reader declined (the pages do not hold an answer), ``reason`` says why
    answered: bool = True
    reason: str | None = None
    # how likely the answer is supported by the pages (0..1), when the reader can tell (extractive)
    support: float | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["hits"] = [hit.to_dict() for hit in self.hits]
        for citation, cited in zip(data["citations"], self.citations):
            citation["page_id"] = cited.page_id
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


class Searchable(Protocol):
    """What answering (``ask``, ``retrieve``, the agent, ``build_context``) needs of an index, which
    ``Index`` is: its store, catalog and settings, its search by text and by a picture, and its tiles'
    images rendered again."""

    store: Store

    @property
    def catalog(self) -> Catalog: ...

    @property
    def settings(self) -> Settings: ...

    def search(self, query: str | SearchRequest, k: int | None = None, **options: Any) -> list[Hit]: ...

    def search_image(self, image: Image.Image, k: int = 10, **options: Any) -> list[Hit]: ...

    def tile_image(
        self, doc_id: str, page: int, tile: int = 0, compression: float = 1.0, *, rerender: bool = False
    ) -> Image.Image: ...


@runtime_checkable
class Reader(Protocol):
    """Answers a question from retrieved tiles.

    ``inputs`` says what the reader looks at: ``"images"``, ``"text"``, ``"images+text"`` or
    ``"auto"`` (each tile's text where its text layer covers it, its image otherwise:
    ``answer.inputs``). ``max_images`` is how many images one call may carry (None: any number);
    readers limited to one are run through the VisRAG strategies (page concatenation or weighted
    selection). ``read`` may take ``image``, a picture the question is about, shown beside the
    tiles (a reader that reads images and takes none is refused one: ``takes_question_image``),
    and ``on_text``, a callable given the answer's text in pieces as the reader writes it
    (``takes_on_text``; ``answer.ask.ask_stream``).
    """

    name: str
    inputs: str
    max_images: int | None

    def read(self, question: str, context: Sequence[ContextItem]) -> Reading: ...


def takes_question_image(reader: Reader) -> bool:
    """Whether ``reader`` is shown a question's picture: it reads images and its ``read`` takes
    ``image``."""
    return reader.inputs != "text" and "image" in inspect.signature(reader.read).parameters


def takes_on_text(reader: Reader) -> bool:
    """Whether ``reader`` gives its answer's text in pieces as it writes it: its ``read`` takes
    ``on_text``."""
    return "on_text" in inspect.signature(reader.read).parameters


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


def build_reader(
    request: AskRequest, trust_remote_code: bool = False, endpoint: Any = None, **local: Any
) -> Reader:
    """The reader ``request.reader`` with the request's reader options and ``local`` ones (an
    endpoint's base URL and key, a device: what the machine serving it decides), allowed to run a
    model's own code with ``trust_remote_code`` when it is a reader that can (the ``transformers``
    one): the caller's leave, never a request's; a reader that calls a model behind an endpoint
    calls it at ``endpoint`` (``answer.endpoint.Endpoint``; None: its own)."""
    options = reader_options(request, local)
    factory = READERS.load(request.reader)
    options.update(lent(factory, trust_remote_code=trust_remote_code))
    if endpoint is not None:
        options.update(lent(factory, endpoint=endpoint))
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
    if request.reader in ("openai", "transformers") and request.strategy == "weighted":
        options["logprobs"] = True  # weighted selection weighs each answer by its probability
    return options
