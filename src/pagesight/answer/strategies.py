"""How retrieved tiles reach a reader: all at once, or, for readers that take one image, the two
strategies of VisRAG.

- ``all``: every tile in one call (multi-image readers, and text readers).
- ``concat``: page concatenation; the tiles are pasted side by side into one image, read once.
  Boxes the reader cites on the long image are mapped back to the tile they fall in.
- ``weighted``: weighted selection; the reader answers from each tile alone and the answer with the
  highest confidence x softmax(retrieval scores) wins, the confidence being, as VisRAG defines it,
  the reciprocal of the answer's perplexity: exp of the mean log-probability of its tokens. Needs a
  reader that reports the log-probability of its answer and its number of tokens. (The sum of the
  log-probabilities, used before, favours short answers; it could not be measured against this
  rule without a model, so VisRAG's rule replaced it.)

A question's own picture goes with every call, an image more than the tiles it carries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from pagesight.answer.base import ContextItem, Reader, Reading, takes_on_text
from pagesight.choices import STRATEGIES
from pagesight.errors import PagesightError
from pagesight.records import Box


def choose(strategy: str, reader: Reader, n_items: int, image: bool = False) -> str:
    """The strategy ``auto`` stands for: all tiles at once when the reader can take them (and the
    question's ``image``, when it is shown one)."""
    if strategy not in STRATEGIES:
        raise PagesightError(f"strategy must be one of {', '.join(STRATEGIES)}, got '{strategy}'")
    if strategy != "auto":
        return strategy
    if reader.inputs == "text" or reader.max_images is None or reader.max_images >= n_items + image:
        return "all"
    return "concat"


def run(
    strategy: str,
    reader: Reader,
    question: str,
    context: Sequence[ContextItem],
    image: Image.Image | None = None,
    on_text: Callable[[str], None] | None = None,
) -> tuple[Reading, list]:
    """Read ``context`` with ``strategy`` (and the question's ``image`` with every call); returns
    the reading and the items the reader was shown. ``on_text`` is given the answer's text as the
    reader writes it, when it is one reading by a reader that can (``takes_on_text``): not with
    weighted selection, whose answer is known only once every tile is read."""
    given: dict = {"image": image} if image is not None else {}  # a reader may take no image
    if on_text is not None and takes_on_text(reader):
        given["on_text"] = on_text
    if strategy == "all" or len(context) <= 1:
        return reader.read(question, context, **given), list(context)
    if strategy == "concat":
        merged = Concatenated.of(context)
        reading = reader.read(question, [merged], **given)
        return _split(reading, merged), [merged]
    if strategy == "weighted":
        given.pop("on_text", None)
        return weighted_selection(reader, question, context, given), list(context)
    raise PagesightError(f"strategy must be one of {', '.join(STRATEGIES[1:])}, got '{strategy}'")


def weighted_selection(
    reader: Reader, question: str, context: Sequence[ContextItem], given: dict | None = None
) -> Reading:
    """VisRAG's weighted selection: one answer per tile, its confidence (1 / perplexity) weighted by
    the softmax of the retrieval scores (each read with ``given``: the question's image)."""
    scores = np.array([item.hit.score for item in context], dtype=float)
    prior = np.exp(scores - scores.max())
    prior /= prior.sum()
    best, best_weight = None, -1.0
    declined = None  # the likeliest refusal, returned when no tile gave an answer
    usage: dict = {}
    timings: dict[str, float] = {}
    for i, item in enumerate(context):
        reading = reader.read(question, [item], **(given or {}))
        for key, value in reading.usage.items():
            if isinstance(value, (int, float)) and key != "decode_tokens_per_s":
                usage[key] = usage.get(key, 0) + value
        for key, value in reading.timings.items():
            timings[key] = timings.get(key, 0.0) + value
        weight = prior[i] * confidence(reader, reading)
        if not reading.answered:
            if declined is None or weight > declined[1]:
                declined = (reading, weight)
            continue
        if weight > best_weight:
            best_weight = weight
            best = Reading(
                text=reading.text,
                cited={i: reading.cited[0]} if 0 in reading.cited else {},
                quotes={i: reading.quotes[0]} if 0 in reading.quotes else {},
                logprob=reading.logprob,
                tokens=reading.tokens,
            )
    if best is None and declined is not None:  # every tile declined: so does the answer
        refused, weight = declined
        best, best_weight = Reading(refused.text, answered=False, reason=refused.reason), weight
    best.usage = {**usage, "selected": next(iter(best.cited), None), "weight": float(best_weight)}
    best.timings = timings
    return best


def confidence(reader: Reader, reading: Reading) -> float:
    """The reciprocal of the answer's perplexity, exp(mean log-probability per token); 0 for an
    answer of no tokens."""
    if reading.logprob is None or reading.tokens is None:
        raise PagesightError(
            f"weighted selection needs a reader that reports log-probabilities and their number of "
            f"tokens; '{reader.name}' does not"
        )
    return math.exp(reading.logprob / reading.tokens) if reading.tokens else 0.0


@dataclass
class Concatenated(ContextItem):
    """Several tiles side by side in one image, as VisRAG's page concatenation reads them."""

    parts: list[ContextItem] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)  # left edge of each part in the long image

    @classmethod
    def of(cls, items: Sequence[ContextItem]) -> Concatenated:
        offsets, x = [], 0
        for item in items:
            offsets.append(x)
            x += item.image_size()[0]
        merged = cls(hit=items[0].hit, spans=[s for item in items for s in item.spans], parts=list(items))
        merged.offsets = offsets
        merged.load_image = merged._paste
        return merged

    def image_size(self) -> tuple[int, int]:
        sizes = [part.image_size() for part in self.parts]
        return sum(w for w, _ in sizes), max(h for _, h in sizes)

    def to_page(self, box: Box) -> Box:
        return box  # stays on the long image until ``locate`` finds its tile

    def locate(self, box: Box) -> tuple[int, Box]:
        """The part a box on the long image falls in (by its centre) and the box on that part's page."""
        centre = (box[0] + box[2]) / 2
        i = max(j for j, left in enumerate(self.offsets) if left <= centre)
        left = self.offsets[i]
        width, height = self.parts[i].image_size()
        x0, x1 = max(box[0] - left, 0.0), min(box[2] - left, float(width))
        y0, y1 = box[1], min(box[3], float(height))
        return i, self.parts[i].to_page((x0, y0, x1, y1))

    def _paste(self) -> Image.Image:
        width, height = self.image_size()
        canvas = Image.new("RGB", (width, height), "white")
        for left, part in zip(self.offsets, self.parts):
            canvas.paste(part.image.convert("RGB"), (left, 0))
        return canvas


def _split(reading: Reading, merged: Concatenated) -> Reading:
    cited: dict[int, list[Box]] = {}
    for box in reading.cited.get(0, []):
        i, page_box = merged.locate(box)
        if page_box[2] > page_box[0] and page_box[3] > page_box[1]:
            cited.setdefault(i, []).append(page_box)
    return Reading(
        reading.text,
        cited,
        {},
        reading.logprob,
        reading.usage,
        reading.tokens,
        answered=reading.answered,
        reason=reading.reason,
        support=reading.support,
        timings=reading.timings,
    )
