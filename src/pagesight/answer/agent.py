"""Agentic search in ``ask``: the reader decides whether to search, with what, and when to answer.

The model gets the question (and the question's image, when there is one) and one tool,
``search``. Each call runs on the index, with a text query or with a region of an image the model
was given (the question's image or a tile it has read, PixSearch's way), and comes back as a tool
result naming the hits, followed by the tiles not read before, labelled ``Image N`` in the order
they were read and compressed like ``ask``'s context. After ``max_searches`` calls the model is
told to answer and may call no more tools. Its answer cites the tiles it read as every reader does
(``<bboxes image="N">``, or ``<lines passage="N">`` for text inputs), so the citations are the
same records with boxes on pages, and the answer's ``usage`` reports the searches made, the tiles
read and the image tokens they cost.

A reader takes part by one method, ``turn(transcript, tools, final) -> Turn``: the OpenAI-compatible
reader sends the transcript as chat messages with OpenAI tool calling, the transformers reader
renders it through the model's chat template and parses Qwen's ``<tool_call>`` from its text. The
transcript is kept here in a neutral form (``Message``), so both render the same conversation.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from PIL import Image

from pagesight.answer.abstention import refusal
from pagesight.answer.base import Answer, Citation, ContextItem, Reader, Searchable
from pagesight.answer.context import build_context, context_tokens, image_tokens
from pagesight.answer.prompts import (
    instructions,
    label,
    model_scale,
    numbered_lines,
    parse_bboxes,
    parse_lines,
    strip_thinking,
)
from pagesight.errors import PagesightError
from pagesight.records import Box, Hit
from pagesight.request import AskRequest

MAX_AGENT_K = 10  # the most tiles one search may return to the model

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": (
            "Search the indexed document pages. Give a text query, or an image you were given and "
            "optionally a region of it to search by what it shows. Returns the best page tiles, "
            "each then shown to you as a numbered image."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in words."},
                "image": {
                    "type": "integer",
                    "description": "Instead of a query: the number of an image you were given "
                    "(0 is the question's image, N the tile labelled Image N).",
                },
                "region": {
                    "type": "array",
                    "items": {"type": "number"},
                    "minItems": 4,
                    "maxItems": 4,
                    "description": "With image: [x0, y0, x1, y1] of the part to search by, on the "
                    "same scale as your citations.",
                },
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_AGENT_K,
                    "description": "How many tiles.",
                },
                "doc_ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Only these documents.",
                },
            },
        },
    },
}

SEARCH_PARAMETERS = tuple(SEARCH_TOOL["function"]["parameters"]["properties"])

_AGENT = (
    "You have a tool, search, over a collection of document pages. Search it to find what answers the "
    "question: by a text query, or by a region of an image you were given (image 0 is the question's "
    "image, image N the tile labelled Image N). The tiles a search finds are shown to you numbered in "
    "the order you read them. You may search up to {max_searches} times, then answer from the tiles you "
    "have read, citing them by their numbers."
)
_FINAL = "You have made the {n} searches allowed. Answer now from the tiles you have read, citing them."
# Qwen's tool call tags (the last one may be cut short), which a local model writes in its text.
TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


@dataclass
class ToolCall:
    """A tool call as the model wrote it; ``problem`` says why it could not be read, when so."""

    id: str
    name: str
    arguments: str | dict  # a JSON string (OpenAI's wire format) or an object already parsed
    problem: str = ""


@dataclass
class Message:
    """One message of the conversation, neutral to the reader that renders it.

    ``parts`` are text and images in order; an assistant message keeps its ``calls``, a tool
    message the ``call_id`` it answers.
    """

    role: str  # "system", "user", "assistant" or "tool"
    parts: list[str | Image.Image]
    calls: list[ToolCall] = field(default_factory=list)
    call_id: str = ""

    @property
    def text(self) -> str:
        return "\n".join(part for part in self.parts if isinstance(part, str))


@dataclass
class Turn:
    """What the model said in one turn: its text (tool calls included, as written) and its calls."""

    text: str
    calls: list[ToolCall]
    usage: dict = field(default_factory=dict)  # prompt_tokens, completion_tokens, when known
    seen_sizes: list[tuple[int, int]] | None = None  # each image of the transcript as the model saw it
    cut: bool = False  # stopped by max_tokens


@runtime_checkable
class ToolReader(Protocol):
    """A reader that can call tools: ``turn`` answers the conversation so far, with ``tools`` offered
    (``final``: no call may follow, the model must answer)."""

    name: str
    inputs: str
    coordinates: str

    def turn(self, transcript: Sequence[Message], tools: list[dict], final: bool) -> Turn: ...


class _BadCall(Exception):
    """A tool call the model gets an error message for, instead of hits."""


def agent_ask(
    index: Searchable, request: AskRequest, reader: Reader, *, image: Image.Image | None = None
) -> Answer:
    """Answer ``request.query`` by letting ``reader`` search ``index`` (``request.k`` tiles a search
    unless it asks for another number, the request's other search fields for every search) up to
    ``request.max_searches`` times; see the module docstring."""
    if not isinstance(reader, ToolReader):
        raise PagesightError(
            f"reader '{reader.name}' cannot call tools; agentic search needs a model reader (openai or "
            "transformers)"
        )
    if reader.inputs == "auto":
        raise PagesightError(
            "inputs auto is for readers given the tiles; an agent reads them as images, text or images+text"
        )
    if image is not None and reader.inputs == "text":
        raise PagesightError(
            "a question image needs a reader that reads images (inputs images or images+text)"
        )
    return _Conversation(index, request, reader, image).run()


class _Conversation:
    """One agentic answer: the transcript, the tiles read, the searches made."""

    def __init__(self, index: Searchable, request: AskRequest, reader: Reader, image: Image.Image | None):
        self.index, self.question, self.reader = index, request.query, reader
        self.k, self.max_searches, self.compression = (
            min(request.k, MAX_AGENT_K),
            request.max_searches,
            request.compression,
        )
        self.token_model, self.image = request.token_model, image
        self.searching = request.search_request()  # each search is this one with the model's query
        self.read: list[ContextItem] = []  # tiles shown to the model, Image 1, 2, ... in this order
        self.searches: list[dict] = []
        self.calls = 0  # tool calls made, readable or not: the bound is on them
        self.seen_sizes: list[tuple[int, int]] | None = None  # from the model's last turn
        self.seconds = {"search": 0.0, "read": 0.0}

    def run(self) -> Answer:
        start = time.perf_counter()
        transcript = self._opening()
        usage: dict = {"prompt_tokens": 0, "completion_tokens": 0}
        turns = 0
        while True:
            final = self.calls >= self.max_searches
            turn = self._turn(transcript, final)
            turns += 1
            for key in ("prompt_tokens", "completion_tokens"):
                usage[key] += turn.usage.get(key) or 0
            if final or not turn.calls:
                break
            transcript.append(Message("assistant", [turn.text], calls=turn.calls))
            shown: list[ContextItem] = []
            for call in turn.calls:
                result, new = self._call(call)
                transcript.append(Message("tool", [result], call_id=call.id))
                shown += new
            if shown:
                transcript.append(Message("user", self._show(shown)))
            if self.calls >= self.max_searches:
                transcript.append(Message("user", [_FINAL.format(n=self.max_searches)]))
        warnings: list[str] = []
        if final and turn.calls:
            warnings.append("the model called a tool after its last search was spent; the call was ignored")
        if turn.cut:
            warnings.append("the answer was cut at the reader's max_tokens")
        usage["turns"] = turns
        return self._answer(turn, usage, warnings, time.perf_counter() - start)

    def _opening(self) -> list[Message]:
        """The system's instructions with the tool's, and the question (with its image)."""
        system = instructions(self.reader.inputs, self.reader.coordinates, sizes_labelled=True)
        transcript = [Message("system", [f"{system}\n{_AGENT.format(max_searches=self.max_searches)}"])]
        opening: list[str | Image.Image] = []
        if self.image is not None:
            opening += [
                f"Question image (image 0, {self.image.width}x{self.image.height} pixels):",
                self.image,
            ]
        transcript.append(Message("user", [*opening, f"Question: {self.question}"]))
        return transcript

    def _answer(self, turn: Turn, usage: dict, warnings: list[str], total: float) -> Answer:
        """The last turn's text as the answer, cited, with what the run spent and read."""
        text, citations, problems = self._cite(TOOL_CALL.sub(" ", strip_thinking(turn.text)), turn.seen_sizes)
        shown_images = [] if self.reader.inputs == "text" else self.read
        spent = context_tokens(shown_images, self.token_model)
        if self.image is not None:
            spent += image_tokens(self.image.width, self.image.height, self.token_model)
        usage.update(
            strategy="agent",
            compression=self.compression,
            token_model=self.token_model,
            image_tokens=spent,
            searches=self.searches,
            tiles_read=len(self.read),
        )
        if warnings + problems:
            usage["warnings"] = warnings + problems
        return Answer(
            question=self.question,
            text=text,
            citations=citations,
            hits=[item.hit for item in self.read],
            reader=self.reader.name,
            timings={
                "search": self.seconds["search"],
                "context": total - self.seconds["search"] - self.seconds["read"],
                "read": self.seconds["read"],
                "total": total,
            },
            usage=usage,
            answered=(reason := refusal(text)) is None,
            reason=reason,
        )

    def _turn(self, transcript: list[Message], final: bool) -> Turn:
        began = time.perf_counter()
        turn = self.reader.turn(transcript, [SEARCH_TOOL], final)
        self.seconds["read"] += time.perf_counter() - began
        self.seen_sizes = turn.seen_sizes
        return turn

    def _call(self, call: ToolCall) -> tuple[str, list[ContextItem]]:
        """The tool result for ``call`` and the tiles it shows the model for the first time."""
        self.calls += 1
        if self.calls > self.max_searches:
            return f"Not searched: the {self.max_searches} searches allowed are spent.", []
        record: dict = {}
        try:
            arguments = _arguments(call)
            record = {key: arguments[key] for key in SEARCH_PARAMETERS if key in arguments}
            began = time.perf_counter()
            hits = self._search(arguments)
            self.seconds["search"] += time.perf_counter() - began
        except (_BadCall, PagesightError) as exc:  # PagesightError: the search refused (no visual vectors)
            self.searches.append({**record, "error": str(exc)})
            return f"Error: {exc}", []
        numbers = {(item.hit.doc_id, item.hit.page, item.hit.tile): n for n, item in enumerate(self.read, 1)}
        new = [hit for hit in hits if (hit.doc_id, hit.page, hit.tile) not in numbers]
        items = build_context(self.index, new, self.compression)
        for item in items:
            self.read.append(item)
            numbers[(item.hit.doc_id, item.hit.page, item.hit.tile)] = len(self.read)
        self.searches.append({**record, "hits": [{"page_id": h.page_id, "tile": h.tile} for h in hits]})
        if not hits:
            return "No tiles found.", []
        lines = [f"{len(hits)} tiles found ({len(items)} not read before):"]
        for hit in hits:
            n = numbers[(hit.doc_id, hit.page, hit.tile)]
            name = "Passage" if self.reader.inputs == "text" else "Image"
            lines.append(f"{name} {n}: {hit.doc_id} page {hit.page} tile {hit.tile}: {hit.snippet[:200]}")
        return "\n".join(lines), items

    def _search(self, arguments: dict) -> list[Hit]:
        search = self.searching.replace(k=arguments.get("k") or self.k)
        if arguments.get("doc_ids"):  # within the documents the asker allowed, if they chose
            allowed = search.doc_ids
            chosen = [d for d in arguments["doc_ids"] if allowed is None or d in allowed]
            if not chosen:
                raise _BadCall(f"the search is restricted to the documents {', '.join(allowed)}")
            search = search.replace(doc_ids=chosen)
        if arguments.get("query"):
            return self.index.search(search.replace(query=arguments["query"]))
        number = arguments["image"]
        picture = self._image(number)
        region = arguments.get("region")
        box = self._region(number, picture, region) if region is not None else None
        if self.index.settings.visual_encoder:
            return self.index.search_image(
                picture, search.k, region=box, doc_ids=search.doc_ids, where=search.where
            )
        if number == 0:
            raise _BadCall("this index has no image vectors: search by a text query of what the image shows")
        query = self._text_in(self.read[number - 1], box)
        if not query:
            raise _BadCall(
                "this index has no image vectors, and that region of the tile has no text: search by a "
                "text query"
            )
        return self.index.search(search.replace(query=query))

    def _image(self, number: int) -> Image.Image:
        if number == 0:
            if self.image is None:
                raise _BadCall("there is no question image (image 0)")
            return self.image
        if self.reader.inputs == "text":
            raise _BadCall("the tiles were given as text: search by a text query")
        if not 1 <= number <= len(self.read):
            raise _BadCall(f"no image {number}: you have read {len(self.read)} tiles")
        return self.read[number - 1].image

    def _region(self, number: int, picture: Image.Image, region: list) -> Box:
        """A region on the model's scale (as its citations) in pixels of ``picture``."""
        width, height = picture.size
        seen = self._seen_size(number) or (width, height)
        sx, sy = model_scale(self.reader.coordinates, seen)
        sx, sy = sx * width / seen[0], sy * height / seen[1]  # pixels seen to pixels of the picture
        x0, y0, x1, y1 = region
        x0, x1 = max(0.0, min(x0 * sx, width)), max(0.0, min(x1 * sx, width))
        y0, y1 = max(0.0, min(y0 * sy, height)), max(0.0, min(y1 * sy, height))
        if x1 <= x0 or y1 <= y0:
            raise _BadCall(f"the region {region} is empty or outside image {number}")
        return x0, y0, x1, y1

    def _seen_size(self, number: int) -> tuple[int, int] | None:
        """The size image ``number`` had when the model saw it, when its processor resized it."""
        if self.seen_sizes is None:
            return None
        index = number if self.image is not None else number - 1
        return self.seen_sizes[index] if 0 <= index < len(self.seen_sizes) else None

    @staticmethod
    def _text_in(item: ContextItem, box: Box | None) -> str:
        """The tile's lines whose middle lies in ``box`` (pixels of its image; None: the whole tile)."""
        if box is None:
            return item.text
        x0, y0, x1, y1 = item.to_page(box)
        inside = [
            span.text
            for span in item.spans
            if x0 <= (span.box[0] + span.box[2]) / 2 <= x1 and y0 <= (span.box[1] + span.box[3]) / 2 <= y1
        ]
        return " ".join(inside)

    def _show(self, items: Sequence[ContextItem]) -> list[str | Image.Image]:
        """The new tiles as the model reads them: labelled images (and their text), or passages."""
        first = len(self.read) - len(items) + 1
        parts: list[str | Image.Image] = []
        for n, item in enumerate(items, first):
            if self.reader.inputs == "text":
                parts.append(f"Passage {n}: {label(item)}\n{numbered_lines(item)}\n")
                continue
            width, height = item.image_size()
            parts += [f"Image {n}: {label(item)} ({width}x{height} pixels)", item.image]
            if self.reader.inputs == "images+text" and item.text:
                parts.append(f"Text of image {n}:\n{item.text}")
        return parts

    def _cite(
        self, text: str, seen_sizes: list[tuple[int, int]] | None
    ) -> tuple[str, list[Citation], list[str]]:
        """The answer without its citation tags, the citations as records, the problems found."""
        if self.reader.inputs == "text":
            text, cited, quotes, problems = parse_lines(text, self.read)
        else:
            if seen_sizes is not None and self.image is not None:
                seen_sizes = seen_sizes[1:]  # the question image came first
            if seen_sizes is not None and len(seen_sizes) != len(self.read):
                seen_sizes = None
            text, cited, problems = parse_bboxes(text, self.read, self.reader.coordinates, seen_sizes)
            quotes = {}
        citations = []
        for i, boxes in sorted(cited.items()):
            hit = self.read[i].hit
            citations.append(Citation(hit.doc_id, hit.page, hit.tile, boxes, quotes.get(i, "")))
        return " ".join(text.split()), citations, problems


def _arguments(call: ToolCall) -> dict:
    """The call's arguments checked against the tool's schema; ``_BadCall`` says what is wrong."""
    if call.problem:
        raise _BadCall(call.problem)
    if call.name != "search":
        raise _BadCall(f"there is no tool '{call.name}'; the one tool is search")
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            raise _BadCall(f"the arguments are not JSON: {arguments[:100]!r}") from None
    if not isinstance(arguments, dict):
        raise _BadCall(f"the arguments must be a JSON object, got {arguments!r:.100}")
    unknown = set(arguments) - set(SEARCH_PARAMETERS)
    if unknown:
        raise _BadCall(f"unknown arguments: {', '.join(sorted(unknown))}")
    query, image, region = arguments.get("query"), arguments.get("image"), arguments.get("region")
    if query is not None and not isinstance(query, str):
        raise _BadCall("query must be a string")
    if (not query) == (image is None):
        raise _BadCall("give a query or an image, one of the two")
    if image is not None and not _is_int(image):
        raise _BadCall("image must be the number of an image")
    if region is not None:
        if image is None:
            raise _BadCall("a region needs an image")
        if not (
            isinstance(region, list)
            and len(region) == 4
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in region)
        ):
            raise _BadCall(f"region must be [x0, y0, x1, y1], got {region!r:.100}")
    k = arguments.get("k")
    if k is not None and not (_is_int(k) and 1 <= k <= MAX_AGENT_K):
        raise _BadCall(f"k must be a whole number from 1 to {MAX_AGENT_K}")
    doc_ids = arguments.get("doc_ids")
    if doc_ids is not None and not (isinstance(doc_ids, list) and all(isinstance(d, str) for d in doc_ids)):
        raise _BadCall("doc_ids must be a list of document ids")
    return arguments


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
