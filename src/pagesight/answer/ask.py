"""Question in, answer out: search the index (by the question, and the picture it is about when
there is one), build the context, read it, cite the tiles used (or, with ``agent``, let the reader
search: ``agent.py``). ``ask_stream`` gives the answer's text in pieces as the reader writes it,
then the answer."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from PIL import Image

from pagesight.answer import strategies
from pagesight.answer.agent import agent_ask
from pagesight.answer.base import Answer, Citation, Reader, Reading, Searchable, takes_question_image
from pagesight.answer.context import build_context, context_tokens, image_tokens
from pagesight.answer.inputs import image_items
from pagesight.errors import PagesightError
from pagesight.records import Hit
from pagesight.request import AskRequest, SearchRequest
from pagesight.search.engine import reads_images


def ask(
    index: Searchable,
    request: AskRequest,
    reader: Reader,
    *,
    image: Image.Image | None = None,
    region: tuple[float, float, float, float] | None = None,
    hits: list[Hit] | None = None,
    closed_book: bool = False,
    on_text: Callable[[str], None] | None = None,
) -> Answer:
    """Answer ``request.query`` from the ``request.k`` best tiles of ``index`` with ``reader``.

    ``compression`` divides each side of the tile images by its square root (PixelRAG's token-cost
    knob); ``strategy`` is how tiles reach a reader that takes one image (``strategies``). The
    answer's ``usage`` counts the image tokens the context costs under ``token_model`` (0 for text
    readers). ``image``: a picture the question is about (PixelRAG's EVQA, PixSearch's CRAG-MM),
    searched with the question (its ``region`` when given) when the search has a visual run, and
    shown to a reader that reads images after the tiles; a text reader (the extractive one) answers
    from the tiles it chose without looking at it, and the answer's ``usage["warnings"]`` says what
    was not done with it. With ``agent`` the reader searches itself (``k`` tiles a search, up to
    ``max_searches`` searches, by text or by a region of the question's ``image`` or of a tile;
    ``agent.py``). ``hits``: the tiles to answer from when the caller searched already.
    ``closed_book``: no search and no tiles; the reader answers from what it knows (and the
    question's image: the no-retrieval baseline of eval). ``on_text``: given the answer's text in
    pieces as the reader writes it (citation tags and thinking left out; a reader that cannot
    stream, or the weighted strategy, gives it whole once read); the answer's ``text`` is the one
    to keep. A reader that times its stages adds them to ``timings`` ("prefill", "decode").
    """
    start = time.perf_counter()
    question = request.query
    if request.agent:
        if request.strategy not in ("auto", "all"):
            raise PagesightError(
                f"the {request.strategy} strategy is for readers given the tiles; agents search"
            )
        if region is not None:
            raise PagesightError("an agent chooses the regions of the question image it searches by")
        return agent_ask(index, request, reader, image=image)
    if not question.strip():
        raise PagesightError("the question is empty")
    if region is not None and image is None:
        raise PagesightError("a region is a part of the question image: give the image too")
    shown_image, notes = _question_image(reader, image)
    if image is not None and not closed_book and not reads_images(index.store, request.mode):
        notes.append("the tiles were searched by the question alone: the search has no visual run")
    if closed_book:
        hits = []
    elif hits is None:
        hits = retrieve(index, request, image, region)
    searched = time.perf_counter()
    context = build_context(index, hits, request.compression)
    chosen = strategies.choose(request.strategy, reader, len(context), shown_image is not None)
    prepared = time.perf_counter()
    reading, shown = _read(chosen, reader, question, context, shown_image, closed_book, on_text)
    read = time.perf_counter()
    usage = _usage(request, reader, chosen, shown, shown_image, reading)
    warnings = usage.get("warnings", []) + notes
    if warnings:
        usage["warnings"] = warnings
    return Answer(
        question=question,
        text=reading.text if reading else "",
        citations=_citations(reading, context),
        hits=hits,
        reader=reader.name,
        timings={
            "search": searched - start,
            "context": prepared - searched,
            "read": read - prepared,
            "total": read - start,
            **(reading.timings if reading else {}),
        },
        usage=usage,
        logprob=reading.logprob if reading else None,
        answered=reading.answered if reading else False,
        reason=reading.reason if reading else "no pages were found to answer from",
        support=reading.support if reading else None,
    )


def _read(
    chosen: str,
    reader: Reader,
    question: str,
    context: list,
    image: Image.Image | None,
    closed_book: bool,
    on_text: Callable[[str], None] | None,
) -> tuple[Reading | None, list]:
    """The reading of ``context`` by the strategy ``chosen`` (None with no tiles, unless closed
    book) and the items shown; ``on_text`` given its text as it is written, or whole once read."""
    if not context and not closed_book:
        return None, []
    streamed = _Streamed(on_text)
    reading, shown = strategies.run(chosen, reader, question, context, image, streamed.piece)
    streamed.whole(reading.text)
    return reading, shown


def _citations(reading: Reading | None, context: list) -> list[Citation]:
    """The boxes ``reading`` cites, each set on the tile of ``context`` it stands on."""
    if reading is None:
        return []
    citations = []
    for i, boxes in sorted(reading.cited.items()):
        hit = context[i].hit
        citations.append(Citation(hit.doc_id, hit.page, hit.tile, boxes, reading.quotes.get(i, "")))
    return citations


def _usage(
    request: AskRequest,
    reader: Reader,
    chosen: str,
    shown: list,
    shown_image: Image.Image | None,
    reading: Reading | None,
) -> dict:
    """What the answer cost: the strategy ``chosen``, the image tokens of the tiles ``shown`` (and
    of the question's image with each call), and the reader's own counts."""
    token_model = request.token_model
    images = image_items(reader.inputs, shown)
    spent = context_tokens(images, token_model) if images else 0
    if shown_image is not None and reading is not None:  # the question's image goes with each call
        calls = len(shown) if chosen == "weighted" and len(shown) > 1 else 1
        spent += calls * image_tokens(shown_image.width, shown_image.height, token_model)
    return {
        "strategy": chosen,
        "compression": request.compression,
        "token_model": token_model,
        "image_tokens": spent,
        **({"text_tiles": len(shown) - len(images)} if reader.inputs == "auto" else {}),
        **(reading.usage if reading else {}),
    }


def _question_image(reader: Reader, image: Image.Image | None) -> tuple[Image.Image | None, list[str]]:
    """The question's image as ``reader`` is shown it (None: not shown), and what the answer notes
    of it; a reader that reads images but cannot take it beside a tile is refused."""
    if image is None:
        return None, []
    if takes_question_image(reader):
        if reader.max_images is not None and reader.max_images < 2:
            raise PagesightError(
                f"reader '{reader.name}' takes one image a call: none is left for a tile beside the "
                "question image"
            )
        return image, []
    if reader.inputs != "text":
        raise PagesightError(f"reader '{reader.name}' takes no question image (its read has no image)")
    return None, [f"reader '{reader.name}' reads text: it did not look at the question image"]


def retrieve(
    index: Searchable,
    request: SearchRequest,
    image: Image.Image | None = None,
    region: tuple[float, float, float, float] | None = None,
    **options,
) -> list[Hit]:
    """The tiles ``ask`` answers ``request`` from: its search, with the question's ``image`` (or
    the ``region`` of it) when the search has a visual run to search it by, else of the question
    alone; ``options`` go to ``Index.search`` (``evidence``)."""
    if image is None or not reads_images(index.store, request.mode):
        image = region = None
    return index.search(request.search_request(), image=image, region=region, **options)


class _Streamed:
    """``on_text`` as ``ask`` hands it on: each piece the reader writes, or the whole text once
    read when the reader wrote none."""

    def __init__(self, on_text: Callable[[str], None] | None) -> None:
        self.on_text, self.given = on_text, False
        self.piece = self._piece if on_text is not None else None

    def _piece(self, text: str) -> None:
        self.given = True
        self.on_text(text)

    def whole(self, text: str) -> None:
        if self.on_text is not None and not self.given and text:
            self.on_text(text)


class _Stopped(Exception):
    """Raised in the reader by ``ask_stream``'s hand-on when its caller stopped reading."""


def ask_stream(
    index: Searchable, request: AskRequest, reader: Reader, **options: Any
) -> Iterator[str | Answer]:
    """``ask``, as it happens: the answer's text in pieces (``str``) as the reader writes them,
    then the ``Answer``, last. ``options`` are ``ask``'s (``image``, ``region``, ``hits``, ...).

    The answer is made in a thread of its own while the caller reads the pieces; an error there is
    raised here. A caller that stops reading early (a client gone) stops the reader at its next
    piece, and the generator returns once that thread is done, so ``index`` is never used by two
    threads at once. The pieces are what the reader wrote, citation tags and thinking left out; the
    answer's ``text`` is the one to keep (spaces put in order).
    """
    pieces: queue.Queue = queue.Queue()
    stop = threading.Event()

    def on_text(text: str) -> None:
        if stop.is_set():
            raise _Stopped
        pieces.put(text)

    def work() -> None:
        try:
            pieces.put(ask(index, request, reader, on_text=on_text, **options))
        except BaseException as exc:  # handed to the caller's thread, raised there
            pieces.put(_Failure(exc))

    thread = threading.Thread(target=work, name="pagesight-ask-stream", daemon=True)
    thread.start()
    try:
        while True:
            piece = pieces.get()
            if isinstance(piece, _Failure):
                raise piece.error
            yield piece
            if isinstance(piece, Answer):
                return
    finally:
        stop.set()
        thread.join()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error
