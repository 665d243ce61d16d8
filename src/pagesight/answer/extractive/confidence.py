"""How likely the line the extractive reader chose is an answer its pages support: a logistic
regression over a few features of the choice, fitted by ``benchmarks/abstention.py --fit``.

The features (``FEATURES``):

- ``figures``, ``names``: the share of the question's years, numbers and references ("Figure 7"),
  and of its names and quoted phrases (``support.asked``), that the chosen line's tile names, with
  its document's name and title, matched however they are worded (``support.Evidence``); 1 when
  the question has none of them. A figure asked for belongs on the line's tile; a name is often
  the document's subject, named on other pages ("GPT-3.5" and "UQV100" in a paper about them);
- ``near``, ``document``: the share of all of them that its page or the pages beside it name
  (what the line's section may have said already), and that its document names anywhere (every
  tile of it in the index, not only those in the context: ``ContextItem.load_document``);
- ``absent``: 1 when a constraint is named nowhere in the document;
- ``unconstrained``: 1 when the question has no constraint at all;
- ``score``: the line's score on the signals other than MiniLM (``reader.total``);
- ``margin``: its lead over the next best line's score;
- ``retrieval``: its tile's retrieval score's lead over the best other tile's, over the top score
  (negative when another tile ranked above it).

The model uses those of them that ``benchmarks/abstention.py`` found to carry over to documents
it was not fitted on (its ``features``; the others are measured there).

The reader declines when the probability is under its ``min_support`` (default: the model's
``threshold``). The coefficients, the features' standardisation, the threshold and where they came
from are in ``support.json`` beside this module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from pagesight.answer.base import ContextItem
from pagesight.answer.extractive.support import Evidence, asked, is_figure

FEATURES = ("figures", "names", "near", "document", "absent", "unconstrained", "score", "margin", "retrieval")
MODEL = Path(__file__).with_name("support.json")


@dataclass
class Judgement:
    """The probability that the chosen line is a supported answer, with the features it was
    computed from and the constraints its document does not name (``missing``)."""

    support: float
    features: dict[str, float]
    missing: list[str] = field(default_factory=list)

    def reason(self, threshold: float) -> str:
        """Why an answer this likely is declined under ``threshold``."""
        odds = f"support {self.support:.2f} < {threshold:.2f}"
        if self.missing:
            return f"the document does not mention {listed(self.missing)} ({odds})"
        return f"no line of the pages found is likely enough to answer ({odds})"


@cache
def model() -> dict:
    """The fitted model: ``features``, ``mean``, ``scale``, ``coef``, ``intercept``, ``threshold``,
    ``about``."""
    return json.loads(MODEL.read_text())


def probability(features: dict[str, float], fitted: dict | None = None) -> float:
    """The logistic model's probability for one set of ``features``."""
    fitted = fitted or model()
    x = (np.array([features[name] for name in fitted["features"]]) - fitted["mean"]) / np.array(
        fitted["scale"]
    )
    z = float(x @ np.array(fitted["coef"]) + fitted["intercept"])
    return 1.0 / (1.0 + math.exp(-z)) if z > -50 else 0.0


def judge(
    question: str, context: Sequence[ContextItem], item: int, scores: np.ndarray, chosen: int, score: float
) -> Judgement:
    """The judgement of the line ``chosen`` (of context item ``item``) among candidates scoring
    ``scores``, its own score without MiniLM being ``score``."""
    found, missing = features(question, context, item, scores, chosen, score)
    return Judgement(probability(found), found, missing)


def features(
    question: str, context: Sequence[ContextItem], item: int, scores: np.ndarray, chosen: int, score: float
) -> tuple[dict[str, float], list[str]]:
    """``FEATURES`` of the line ``chosen`` (see ``judge``), and the constraints its document lacks."""
    found = constraint_features(question, context, item)
    missing = found.pop("missing")
    others = np.delete(scores, chosen)
    found["score"] = score
    found["margin"] = float(scores[chosen] - others.max()) if len(others) else float(scores[chosen])
    found["retrieval"] = retrieval_margin(context, item)
    return found, missing


def constraint_features(question: str, context: Sequence[ContextItem], item: int) -> dict:
    """The shares of the question's constraints named by the tile, the page and the document
    (with its name and title), and which ones the document lacks (``missing``). The page
    and the document are read only when the tile or the page lacks one."""
    wanted = asked(question)
    own = context[item]
    heading = _heading(context, item)
    tile = Evidence(f"{own.text}\n{heading}")
    lacking = [w for w in wanted if not tile.holds(w)]
    page_lacking, document_lacking = lacking, lacking
    if lacking:
        pages = _pages(context, item)
        near = [pages.get(own.hit.page + step, "") for step in (-1, 0, 1)]
        page = Evidence("\n".join([*near, own.text, heading]))
        page_lacking = [w for w in lacking if not page.holds(w)]
        if page_lacking:
            document = Evidence("\n".join([*pages.values(), heading]))
            document_lacking = [w for w in page_lacking if not document.holds(w)]
        else:
            document_lacking = []
    n = len(wanted) or 1
    figures = [w for w in wanted if is_figure(w)]
    names = [w for w in wanted if not is_figure(w)]
    return {
        "figures": 1 - sum(w in lacking for w in figures) / (len(figures) or 1),
        "names": 1 - sum(w in lacking for w in names) / (len(names) or 1),
        "near": 1 - len(page_lacking) / n,
        "document": 1 - len(document_lacking) / n,
        "absent": float(bool(document_lacking)),
        "unconstrained": float(not wanted),
        "missing": document_lacking,
    }


def retrieval_margin(context: Sequence[ContextItem], item: int) -> float:
    """The retrieval score of ``context[item]``'s tile less the best other tile's, over the top
    score (0 for a context of one tile)."""
    scores = [c.hit.score for c in context]
    others = scores[:item] + scores[item + 1 :]
    if not others:
        return 0.0
    return (scores[item] - max(others)) / (abs(max(scores)) or 1.0)


def _heading(context: Sequence[ContextItem], item: int) -> str:
    """What every line of ``context[item]`` is read under: its document's name and title (the
    first line of its first page), and the first line of that document's first tiles in the
    context (their pages' titles)."""
    doc_id = context[item].hit.doc_id
    titles = [c.spans[0].text for c in context if c.hit.doc_id == doc_id and c.hit.tile == 0 and c.spans]
    return "\n".join([doc_id.replace("_", " ").replace("-", " "), context[item].title, *titles])


def _pages(context: Sequence[ContextItem], item: int) -> dict[int, str]:
    """``context[item]``'s document page by page: all of it when the context can read it, else
    its tiles in the context."""
    own = context[item]
    if own.load_document is not None:
        return own.load_document()
    pages: dict[int, list[str]] = {}
    for c in context:
        if c.hit.doc_id == own.hit.doc_id:
            pages.setdefault(c.hit.page, []).append(c.text)
    return {page: "\n".join(texts) for page, texts in pages.items()}


def listed(missing: list[str]) -> str:
    """``"a"``, ``"a" or "b"``, ``"a", "b" or "c"``."""
    quoted = [f'"{m}"' for m in missing]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
