"""How likely the answer the extractive reader chose is one its pages support: a logistic
regression over a few features of the choice (``SUPPORT``), fitted by ``pagesight fit-reader`` on
right answers against the choices made for unanswerable questions (``eval/reader.py``).

The features:

- ``figures``: the share of the question's years, numbers and references ("Figure 7") that the
  chosen answer's tile names, with its document's name and title, matched however they are worded
  (``support.Evidence``); 1 when the question has none. A figure asked for belongs on the
  answer's tile;
- ``document``: the share of all its constraints, its names and quoted phrases (``support.asked``)
  too, that its document names anywhere (every tile of it in the index, not only those in the
  context: ``ContextItem.load_document``): a name is often the document's subject, named on other
  pages ("GPT-3.5" and "UQV100" in a paper about them). The shares the tile and the pages beside it
  name, features once, told the fitted sets' right answers from their unanswerable questions no
  better and set prose answers whose names stand on other pages below them;
- ``absent``: 1 when a constraint is named nowhere in the document;
- ``unconstrained``: 1 when the question has no constraint at all;
- ``score``: the answer's score under the candidate scorer (a log-odds of being right);
- ``margin``: its lead over the next best candidate's;
- ``retrieval``: its tile's retrieval score's lead over the best other tile's, over the top score
  (negative when another tile ranked above it).

The reader declines when the probability is under its ``min_support`` (default: the model's
``threshold``, where no more than 3.5 % of any fitted set's right answers fall).
The coefficients, the features' standardisation and the threshold are the ``support`` part of
the reader's ``reader.json``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pagesight.answer.base import ContextItem
from pagesight.answer.extractive.support import Evidence, asked, is_figure

SUPPORT = ("figures", "document", "absent", "unconstrained", "score", "margin", "retrieval")


@dataclass
class Judgement:
    """The probability that the chosen line is a supported answer, with the features it was
    computed from and the constraints its document does not name (``missing``)."""

    support: float
    features: dict[str, float]
    missing: list[str] = field(default_factory=list)

    def reason(self, threshold: float) -> str:
        """Why an answer this likely is declined under ``threshold``."""
        digits = next((d for d in range(2, 12) if f"{self.support:.{d}f}" != f"{threshold:.{d}f}"), 12)
        odds = f"support {self.support:.{digits}f} < {threshold:.{digits}f}"  # never "0.77 < 0.77"
        if self.missing:
            return f"the document does not mention {listed(self.missing)} ({odds})"
        return f"no line of the pages found is likely enough to answer ({odds})"


def probability(features: dict[str, float], fitted: dict) -> float:
    """The support model ``fitted``'s probability for one set of ``features``."""
    x = (np.array([features[name] for name in fitted["features"]]) - fitted["mean"]) / np.array(
        fitted["scale"]
    )
    z = float(x @ np.array(fitted["coef"]) + fitted["intercept"])
    return 1.0 / (1.0 + math.exp(-z)) if z > -50 else 0.0


def judge(
    question: str,
    context: Sequence[ContextItem],
    item: int,
    scores: np.ndarray,
    chosen: int,
    fitted: dict,
) -> Judgement:
    """The judgement of the candidate ``chosen`` (of context item ``item``) among candidates
    scoring ``scores``, under the support model ``fitted``."""
    found, missing = features(question, context, item, scores, chosen)
    return Judgement(probability(found, fitted), found, missing)


def features(
    question: str, context: Sequence[ContextItem], item: int, scores: np.ndarray, chosen: int
) -> tuple[dict[str, float], list[str]]:
    """``SUPPORT``'s features of the candidate ``chosen`` (see ``judge``) and the constraints its
    document lacks."""
    found = constraint_features(question, context, item)
    missing = found.pop("missing")
    others = np.delete(scores, chosen)
    found["score"] = float(scores[chosen])
    found["margin"] = float(scores[chosen] - others.max()) if len(others) else float(scores[chosen])
    found["retrieval"] = retrieval_margin(context, item)
    return found, missing


def constraint_features(question: str, context: Sequence[ContextItem], item: int) -> dict:
    """The shares of the question's figures named by the tile and of its constraints named by the
    document (with its name and title), and which ones the document lacks (``missing``). The
    pages are read only when the tile lacks one, the whole document when they do."""
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
    figures = [w for w in wanted if is_figure(w)]
    return {
        "figures": 1 - sum(w in lacking for w in figures) / (len(figures) or 1),
        "document": 1 - len(document_lacking) / (len(wanted) or 1),
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
