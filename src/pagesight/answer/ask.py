"""Question in, answer out: search the index, build the context, read it, cite the tiles used (or, with
``agent``, let the reader search: ``agent.py``)."""

from __future__ import annotations

import time

from PIL import Image

from pagesight.answer import strategies
from pagesight.answer.agent import agent_ask
from pagesight.answer.base import Answer, Citation, Reader, make_reader
from pagesight.answer.context import build_context, context_tokens
from pagesight.errors import PagesightError


def ask(
    index,
    question: str,
    reader: str | Reader = "extractive",
    *,
    k: int = 5,
    compression: float = 1.0,
    strategy: str = "auto",
    token_model: str = "qwen2-vl",
    agent: bool = False,
    max_searches: int = 3,
    image: Image.Image | None = None,
    **search_options,
) -> Answer:
    """Answer ``question`` from the ``k`` best tiles of ``index``.

    ``reader`` is a reader or the name of one (see ``pagesight.answer.READERS``); ``compression``
    divides each side of the tile images by its square root (PixelRAG's token-cost knob);
    ``strategy`` is how tiles reach a reader that takes one image (``strategies``). The answer's
    ``usage`` counts the image tokens the context costs under ``token_model`` (0 for text readers).
    With ``agent`` the reader searches itself (``k`` tiles a search, up to ``max_searches``
    searches, by text or by a region of the question's ``image`` or of a tile; ``agent.py``).
    Other keyword arguments go to ``index.search`` (mode, fusion, alpha, doc_ids, ...).
    """
    start = time.perf_counter()
    reader = make_reader(reader) if isinstance(reader, str) else reader
    if agent:
        if strategy not in ("auto", "all"):
            raise PagesightError(f"the {strategy} strategy is for readers given the tiles; agents search")
        return agent_ask(
            index,
            question,
            reader,
            k=k,
            max_searches=max_searches,
            compression=compression,
            token_model=token_model,
            image=image,
            **search_options,
        )
    if image is not None:
        raise PagesightError("a question image is searched by an agent: pass agent=True")
    hits = index.search(question, k=k, **search_options)
    searched = time.perf_counter()
    context = build_context(index, hits, compression)
    chosen = strategies.choose(strategy, reader, len(context))
    prepared = time.perf_counter()
    if context:
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
