"""Learned ranking: the head of a hybrid text search reordered by a logistic model over features of
each candidate tile.

BM25 and the dense model score a tile by the words it shares with the question. Which page answers
also shows in how it shares them: an analyst's question about FY2018 capital expenditure, "relying
on the cash flow statement", is answered by a page of figures under that statement's heading with
the question's subject on one line, not by the note that mentions cash flows in every paragraph.
The fused ranking's first ``Ranker.depth`` tiles are therefore scored again from:

- the first stage's own evidence: the fused score, BM25's and the dense model's scores (each
  relative to the best candidate's) and the fused rank;
- how the tile holds the question's words, each weighing its burstiness in the collection
  (``encode.lexical.burst_weights``, the weights BM25 gives them): their share on the tile, in
  its page's heading (``text.titles.page_headings``) and on its best line, and the lines holding
  most of them;
- what kind of page it is: its length, its share of numbers (with a variant for questions naming a
  year: they ask for figures), whether it has a heading, and the share of the question's years it
  holds;
- each of the tile's own features less the mean over the candidates, so that a feature counts by
  how the tile stands among the question's candidates rather than by the collection's scale.

The model is a logistic regression fitted on judged questions (``fit``): its probability that a
tile's page is relevant orders the head, the tiles below keep their order (``rerank.reorder``).
The packaged ranker (``rankers/default.json``) was fitted on the three development sets
(IRPAPERS, financebench-dev, mmlongbench-dev); fitted on two and measured on the third it raised
every set's figures (BENCHMARKS.md, "Filings and reports: a learned ranker"). ``pagesight
fit-ranker`` (``eval.ranker``) fits one on any judged questions, such as a user's own, and
``SearchRequest.ranker_file`` uses it.

Only the hybrid text search (BM25 and dense, no visual run) is reordered: the features and the
packaged weights are those of its scores.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from pagesight.encode.lexical import BURST_FLOOR, LineWords, query_stems, stems_by_line, terms, unaccented
from pagesight.errors import PagesightError
from pagesight.search.fusion import Run
from pagesight.search.words import YEAR, TileText, heading_words, tile_text, tile_texts

DEFAULT = Path(__file__).with_name("rankers") / "default.json"
DEPTH = 30  # the fused hits the packaged ranker reorders
LINE_SHARE = 0.3  # a line holding this share of the question's weight counts as one of its lines

# Each candidate's features, in the order of the model's weights; those in CENTRED also count less
# their mean over the candidates (named with "-centred").
OWN = (
    "fused",  # the fused score, relative to the best candidate's
    "bm25",  # BM25's score, relative to the best candidate's (0: BM25 did not find it)
    "dense",  # the dense model's score, min-max scaled over the candidates
    "log_rank",  # the natural log of the fused rank, from 1
    "coverage",  # the question's weight the tile holds
    "heading",  # ... its page's heading holds
    "best_line",  # ... its best line holds
    "lines",  # log(1 + the lines holding LINE_SHARE of it or more)
    "numbers",  # the share of the tile's words that are figures
    "numbers_year",  # the same when the question names a year, else 0
    "years",  # the share of the question's years the tile holds (0 when it names none)
    "length",  # log(1 + the tile's words)
    "no_heading",  # 1 when the page has no heading
)
CENTRED = ("coverage", "heading", "best_line", "numbers", "numbers_year", "years", "length")
FEATURES = OWN + tuple(f"{name}-centred" for name in CENTRED)


@dataclass(frozen=True)
class TileProfile:
    """What the ranker knows of a candidate tile whatever the question: its text's words
    (``search.words``, kept by tile id) and its page's heading's."""

    text: TileText
    heading: LineWords
    has_heading: bool


def tile_profile(text: str, heading: str) -> TileProfile:
    """A tile's ``TileProfile`` from its text and its page's heading (``Catalog.headings``)."""
    return TileProfile(tile_text(text), heading_words(heading), bool(heading.strip()))


@dataclass(frozen=True)
class FirstStageHit:
    """A first-stage hit as the ranker scores it: its tile's profile and the first stage's scores."""

    profile: TileProfile
    fused: float
    bm25: float = 0.0  # 0: not found by that retriever
    dense: float = 0.0


@dataclass(frozen=True)
class Ranker:
    """A fitted logistic model over ``FEATURES``: standardised by ``mean`` and ``scale``, weighed
    by ``coef``; it reorders a search's first ``depth`` hits."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    depth: int = DEPTH
    about: dict = field(default_factory=dict)  # what it was fitted on, for people

    def scores(self, features: np.ndarray) -> np.ndarray:
        """The probability that each row's page is relevant."""
        z = (features - np.asarray(self.mean)) / np.asarray(self.scale)
        logit = np.clip(z @ np.asarray(self.coef) + self.intercept, -50.0, 50.0)
        return 1.0 / (1.0 + np.exp(-logit))

    def save(self, path: str | Path) -> None:
        record = {
            "features": list(FEATURES),
            "depth": self.depth,
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "about": self.about,
        }
        Path(path).write_text(json.dumps(record, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Ranker:
        try:
            record = json.loads(Path(path).read_text())
            if record["features"] != list(FEATURES):
                raise PagesightError(
                    f"ranker {path} was fitted on other features than this version's; fit it again "
                    "(pagesight fit-ranker)"
                )
            loaded = cls(
                tuple(map(float, record["mean"])),
                tuple(map(float, record["scale"])),
                tuple(map(float, record["coef"])),
                float(record["intercept"]),
                int(record["depth"]),
                dict(record.get("about", {})),
            )
            if {len(loaded.mean), len(loaded.scale), len(loaded.coef)} != {len(FEATURES)} or loaded.depth < 1:
                raise ValueError(
                    f"{len(FEATURES)} means, scales and weights and a depth of 1 or more expected"
                )
            return loaded
        except OSError as exc:
            raise PagesightError(f"ranker {path} cannot be read: {exc.strerror or exc}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise PagesightError(f"ranker {path} is not a ranker file: {exc}") from None


@cache
def _loaded(path: str, mtime_ns: int) -> Ranker:
    return Ranker.load(path)


def ranker(path: str | Path | None = None) -> Ranker:
    """The ranker in ``path``, read again only when the file changed; None: the packaged one, read
    once (every search asks)."""
    if path is None:
        return _packaged()
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        raise PagesightError(f"ranker {path} does not exist") from None
    return _loaded(os.path.abspath(path), mtime)


@cache
def _packaged() -> Ranker:
    return Ranker.load(DEFAULT)


def question_weights(
    query: str, bursts: Mapping[str, float] | None, language: str = "en"
) -> dict[str, float]:
    """The question's distinct words with the weight BM25 gives them (1 each without ``bursts``),
    accents set aside as ``encode.lexical.query_stems`` reads them."""
    weights = {}
    for word in terms(query, language):
        weights[unaccented(word)] = 1.0 if bursts is None else bursts.get(word, BURST_FLOOR)
    return weights


def features(
    weights: Mapping[str, float], query: str, candidates: Sequence[FirstStageHit], language: str = "en"
) -> np.ndarray:
    """The ``FEATURES`` of each candidate (a row each), ``candidates`` in their fused order."""
    if not candidates:
        return np.zeros((0, len(FEATURES)))
    total = sum(weights.values()) or 1.0
    years = set(YEAR.findall(query))
    best_fused = max(c.fused for c in candidates) or 1.0
    best_bm25 = max(c.bm25 for c in candidates) or 1.0
    dense = [c.dense for c in candidates]
    low, span = min(dense), (max(dense) - min(dense)) or 1.0

    stems = query_stems(query, language)
    weight = {stem: weights.get(stem, 0.0) for stem in stems}.__getitem__

    def held(words: set[str]) -> float:
        return sum(map(weight, words)) / total

    rows = []
    for rank, c in enumerate(candidates, 1):
        tile = c.profile.text
        found = stems_by_line(stems, tile.lines)
        heading = stems_by_line(stems, c.profile.heading)
        shares = [held(words) for words in found.values()]
        rows.append(
            [
                c.fused / best_fused,
                c.bm25 / best_bm25,
                (c.dense - low) / span,
                math.log(rank),
                held(set().union(*found.values())),
                held(set().union(*heading.values())),
                max(shares, default=0.0),
                math.log1p(sum(share > LINE_SHARE for share in shares)),
                tile.figures,
                tile.figures if years else 0.0,
                len(years & tile.years) / len(years) if years else 0.0,
                math.log1p(tile.words),
                0.0 if c.profile.has_heading else 1.0,
            ]
        )
    own = np.array(rows)
    centred = own[:, [OWN.index(name) for name in CENTRED]]
    return np.hstack([own, centred - centred.mean(axis=0)])


def rank(
    ranker: Ranker,
    weights: Mapping[str, float],
    query: str,
    candidates: Sequence[FirstStageHit],
    language: str = "en",
) -> np.ndarray:
    """``ranker``'s score of each candidate."""
    return ranker.scores(features(weights, query, candidates, language))


def learned_ranking(
    catalog, chosen: Ranker, query: str, ranked: Run, runs: Mapping[str, Run], bursts, language: str
) -> tuple[Run, Run]:
    """``ranked`` with its first ``chosen.depth`` tiles reordered by ``chosen``; and those tiles
    with their ranker scores (``rerank.reorder``). Tiles deleted since the retrievers were built
    are left out."""
    from pagesight.search.rerank import reorder

    head = ranked[: chosen.depth]
    found = tile_profiles(catalog, [tile_id for tile_id, _ in head])
    bm25, dense = dict(runs.get("bm25", ())), dict(runs.get("dense", ()))
    kept = [(tile_id, score) for tile_id, score in head if tile_id in found]
    candidates = [
        FirstStageHit(found[tile_id], score, bm25.get(tile_id, 0.0), dense.get(tile_id, 0.0))
        for tile_id, score in kept
    ]
    scores = rank(chosen, question_weights(query, bursts, language), query, candidates, language)
    return reorder(kept + ranked[chosen.depth :], scores)


def tile_profiles(catalog, tile_ids: list[int]) -> dict[int, TileProfile]:
    """The profiles of the tiles of ``tile_ids`` that the catalog holds: their text's words kept by
    tile id (``words.tile_texts``), their headings kept by the catalog (``Catalog.headings``)."""
    texts = tile_texts(catalog, tile_ids)
    headings = catalog.headings(list(texts))
    return {
        tile_id: TileProfile(text, heading_words(heading := headings.get(tile_id, "")), bool(heading.strip()))
        for tile_id, text in texts.items()
    }


def fit(
    groups: Sequence[tuple[np.ndarray, np.ndarray]],
    depth: int = DEPTH,
    C: float = 1.0,
    about: dict | None = None,
) -> Ranker:
    """A ranker fitted on judged questions: for each, its candidates' ``features`` (in fused
    order) and whether each one's page is relevant. Each question's first ``depth`` candidates
    count. scikit-learn's logistic regression, on features standardised over all candidates."""
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise PagesightError("fitting a ranker needs scikit-learn: pip install scikit-learn") from None
    X = np.vstack([x[:depth] for x, _ in groups if len(x)])
    y = np.concatenate([np.asarray(r[:depth], dtype=bool) for x, r in groups if len(x)])
    if y.all() or not y.any():
        raise PagesightError("fitting a ranker needs relevant and other candidates among the questions' hits")
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=C, max_iter=2000).fit((X - mean) / scale, y)
    return Ranker(
        tuple(mean.round(6).tolist()),
        tuple(scale.round(6).tolist()),
        tuple(model.coef_[0].round(6).tolist()),
        round(float(model.intercept_[0]), 6),
        depth,
        about or {},
    )
