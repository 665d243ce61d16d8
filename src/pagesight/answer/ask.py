"""Question in, answer out: search the index, build the context, read it, cite the tiles used (or, with
``agent``, let the reader search: ``agent.py``)."""

from __future__ import annotations

import time

from PIL import Image

from pagesight.answer import strategies
from pagesight.answer.agent import agent_ask
from pagesight.answer.base import Answer, Citation, Reader
from pagesight.answer.context import build_context, context_tokens
from pagesight.errors import PagesightError
from pagesight.records import Hit
from pagesight.request import AskRequest


def ask(
    index,
    request: AskRequest,
    reader: Reader,
    *,
    image: Image.Image | None = None,
    hits: list[Hit] | None = None,
    closed_book: bool = False,
) -> Answer:
    """Answer ``request.query`` from the ``request.k`` best tiles of ``index`` with ``reader``.

    ``compression`` divides each side of the tile images by its square root (PixelRAG's token-cost
    knob); ``strategy`` is how tiles reach a reader that takes one image (``strategies``). The
    answer's ``usage`` counts the image tokens the context costs under ``token_model`` (0 for text
    readers). With ``agent`` the reader searches itself (``k`` tiles a search, up to
    ``max_searches`` searches, by text or by a region of the question's ``image`` or of a tile;
    ``agent.py``). ``hits``: the tiles to answer from when the caller searched already.
    ``closed_book``: no search and no tiles; the reader answers from what it knows (the no-retrieval
    baseline of eval).
    """
    start = time.perf_counter()
    question, compression, token_model = request.query, request.compression, request.token_model
    if request.agent:
        if request.strategy not in ("auto", "all"):
            raise PagesightError(
                f"the {request.strategy} strategy is for readers given the tiles; agents search"
            )
        return agent_ask(index, request, reader, image=image)
    if image is not None:
        raise PagesightError("a question image is searched by an agent: pass agent=True")
    if not question.strip():
        raise PagesightError("the question is empty")
    if closed_book:
        hits = []
    elif hits is None:
        hits = index.search(request.search_request())
    searched = time.perf_counter()
    context = build_context(index, hits, compression)
    chosen = strategies.choose(request.strategy, reader, len(context))
    prepared = time.perf_counter()
    if context or closed_book:
        reading, shown = strategies.run(chosen, reader, question, context)
    else:
        reading, shown = None, []
    read = time.perf_counter()

    citations = []
    if reading is not None:
        for i, boxes in sorted(reading.cited.items()):
            hit = context[i].hit
            citations.append(Citation(hit.doc_id, hit.page, hit.tile, boxes, reading.quotes.get(i, "")))
    usage = {
        "strategy": chosen,
        "compression": compression,
        "token_model": token_model,
        "image_tokens": 0 if reader.inputs == "text" or not shown else context_tokens(shown, token_model),
        **(reading.usage if reading else {}),
    }
    return Answer(
        question=question,
        text=reading.text if reading else "",
        citations=citations,
        hits=hits,
        reader=reader.name,
        timings={
            "search": searched - start,
            "context": prepared - searched,
            "read": read - prepared,
            "total": read - start,
        },
        usage=usage,
        logprob=reading.logprob if reading else None,
    )
