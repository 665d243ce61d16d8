"""The extractive reader: each candidate scored by named, weighted signals (``WEIGHTS``) and set
back by named factors; the best one is the answer, cited with its boxes."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from pagesight.answer.base import ContextItem, Reading
from pagesight.answer.extractive.confidence import judge, model
from pagesight.answer.extractive.figures import table_reading
from pagesight.answer.extractive.lines import (
    PRINTED_YEAR,
    AnswerCandidate,
    answer_candidates,
)
from pagesight.answer.extractive.questions import (
    ASKING,
    RATE,
    WORD,
    answer_text,
    asked_kind,
    has_kind,
    label_match,
    label_terms,
    novel_words,
    opens_with,
    other_years,
    subject_terms,
)
from pagesight.encode.lexical import terms
from pagesight.errors import PagesightError

WEIGHTS = {"coverage": 0.5, "dense": 0.35, "kind": 0.15, "rank": 0.1, "label": 0.3, "subject": 0.25}
HEADER_WEIGHT = 0.6  # a term found only in a table row's header counts this much
EXPANSION_WEIGHT = 0.5  # a word standing for a question term ("total" for "how much") counts this much
# Factors that set a candidate back:
REPEATS_QUESTION = 0.3  # it says nothing the question does not already say
QUOTED_FIGURE = 0.7  # a quotation, where a figure or a date is asked for (those are stated)
OTHER_YEAR = 0.7  # it names a year, not the one the question asks about


class ExtractiveReader:
    """Picks the answer-bearing line from the retrieved tiles' text (text layer or OCR)."""

    name = "extractive"
    inputs = "text"
    max_images = None

    def __init__(
        self,
        dense: bool | None = None,
        dense_pool: int = 3,
        dense_model: str = "minilm-l6-v2",
        abstain: bool = True,
        min_support: float | None = None,
        thesaurus: str | None = "finance",
    ):
        """``dense``: rank the best candidates with MiniLM too (None: when the extra is installed);
        ``dense_pool``: how many at most. Three answer the reader's question sets as well as eight
        did (benchmarks/reader.py 47/48, benchmarks/answers.py 90/90 and 13/13) at half the cost of
        an ask (BENCHMARKS.md, "Serving"). ``abstain``: decline, with the reason, when the
        probability that the chosen line is a supported answer (``confidence``) is under
        ``min_support`` (None: the fitted model's threshold), the answer carrying that probability
        (``Reading.support``); False: always quote the best line, unjudged. ``thesaurus``: the
        other names of the terms a table's rows go by (``search/thesauri``), for questions read
        from table cells (``figures``)."""
        self.thesaurus = thesaurus
        self.dense_pool = dense_pool
        self.abstain = abstain
        self.min_support = min_support
        self._model = None
        if dense is not False:
            from pagesight.encode.dense import dense_model as load

            try:
                self._model = load(dense_model)
            except PagesightError:
                if dense:
                    raise

    def read(self, question: str, context: Sequence[ContextItem]) -> Reading:
        # a cell, or a figure computed from cells
        from_tables = table_reading(question, context, self.thesaurus, self.abstain)
        if from_tables is not None:
            return from_tables
        candidates = answer_candidates(context)
        if not candidates or not question.strip():
            if self.abstain and question.strip():
                return Reading(
                    "", usage={"candidates": 0}, answered=False, reason="the pages found have no text"
                )
            return Reading(text="", usage={"candidates": 0})
        features = self.features(question, candidates, len(context))
        scores = total(features)
        chosen = int(np.argmax(scores))
        best = candidates[chosen]
        support = None
        if self.abstain:
            without_dense = total(features, without=("dense",))[chosen]
            judged = judge(question, context, best.item, scores, chosen, without_dense)
            support = judged.support
            threshold = model()["threshold"] if self.min_support is None else self.min_support
            if support < threshold:
                usage = {"candidates": len(candidates), "declined_answer": answer_text(best, question)}
                return Reading(
                    "", usage=usage, answered=False, reason=judged.reason(threshold), support=support
                )
        answer = answer_text(best, question)
        return Reading(
            text=answer,
            cited={best.item: best.boxes_of(answer)},  # where the answer stands, not its whole line
            quotes={best.item: best.text},
            usage={"candidates": len(candidates)},
            support=support,
        )

    def score(self, question: str, candidates: list[AnswerCandidate], n_items: int) -> np.ndarray:
        """One score per candidate; the highest is the answer."""
        return total(self.features(question, candidates, n_items))

    def features(
        self, question: str, candidates: list[AnswerCandidate], n_items: int
    ) -> dict[str, np.ndarray]:
        """Each signal per candidate (``WEIGHTS`` names them), and the factor setting some back."""
        asked = asked_kind(question)
        question_terms = set(terms(question)) - ASKING or set(terms(question))
        expansions = label_terms(question, asked) - question_terms
        own_terms = [set(terms(c.own or c.text)) for c in candidates]
        header_terms = [
            set(terms(c.text)) - own if c.header else set() for c, own in zip(candidates, own_terms)
        ]
        # rarity among the candidates, so a word in every sentence of the tiles weighs little
        df = Counter(t for own, head in zip(own_terms, header_terms) for t in own | head)
        idf = {t: math.log(1 + len(candidates) / (1 + df[t])) for t in question_terms | expansions}
        total = sum(idf[t] for t in question_terms) or 1.0

        def covered(own: set[str], head: set[str], extra: set[str]) -> float:
            found = sum(idf[t] for t in question_terms if t in own or t in extra)
            found += HEADER_WEIGHT * sum(idf[t] for t in question_terms if t in head and t not in own | extra)
            found += EXPANSION_WEIGHT * sum(idf[t] for t in expansions if t in own)
            return min(found / total, 1.0)

        f = {
            "coverage": np.array(
                [covered(o, h, c.extra) for c, o, h in zip(candidates, own_terms, header_terms)]
            )
        }
        question_words = {w.lower() for w in WORD.findall(question)}
        rate = (
            asked == "quantity"
            and bool(RATE.search(question))
            and not question.lower().startswith("how much")
        )
        f["kind"] = np.array(
            [has_kind(c.value or c.answer, asked, question_words, rate) for c in candidates], dtype=float
        )
        label = np.array(
            [label_match(c, question_terms | expansions, idf, total, asked) for c in candidates], dtype=float
        )
        f["label"] = label * np.maximum(f["kind"], asked is None)
        subject = subject_terms(question) if asked != "quantity" else []
        f["subject"] = np.array([opens_with(c.own or c.text, subject) for c in candidates], dtype=float)
        f["rank"] = np.array([1.0 - c.item / max(n_items, 1) for c in candidates])
        penalty = _penalty(question, candidates, asked, question_words)
        f["dense"] = self._dense(question, candidates, f, penalty)
        f["penalty"] = penalty
        return f

    def _dense(
        self, question: str, candidates: list[AnswerCandidate], f: dict[str, np.ndarray], penalty: np.ndarray
    ) -> np.ndarray:
        """MiniLM's similarity of the question to the candidates it may decide between: it settles
        what the other signals leave close, so it reads the best candidate and those that its full
        weight could lift above it (``dense_pool`` at most); 0 for the rest."""
        found = np.zeros(len(candidates))
        if self._model is None:
            return found
        partial = sum(WEIGHTS[name] * f[name] for name in WEIGHTS if name != "dense") * penalty
        order = np.argsort(-partial, kind="stable")
        reach = partial + WEIGHTS["dense"] * penalty >= partial[order[0]]
        pool = [i for i in order[: self.dense_pool] if reach[i]]
        if len(pool) > 1:
            vectors = self._model.encode_queries([question] + [_dense_text(candidates[i]) for i in pool])
            found[pool] = vectors[1:] @ vectors[0]
        return found


def _penalty(
    question: str, candidates: list[AnswerCandidate], asked: str | None, question_words: set[str]
) -> np.ndarray:
    """The factor setting each candidate back: it repeats the question, quotes where a figure or a
    date is asked for, or is about another year than the one asked for."""
    penalty = np.ones(len(candidates))
    novel = np.array([novel_words(c.own or c.answer, question_words) for c in candidates])
    penalty[novel == 0] *= REPEATS_QUESTION
    if asked in ("quantity", "time"):  # a figure or a date is stated, not quoted
        penalty[np.array([c.quote for c in candidates])] *= QUOTED_FIGURE
    years = set(PRINTED_YEAR.findall(question))
    if years:  # about another year than the one asked for
        penalty[np.array([other_years(c.text, years) for c in candidates])] *= OTHER_YEAR
    return penalty


def total(features: dict[str, np.ndarray], without: tuple[str, ...] = ()) -> np.ndarray:
    """Each candidate's score: the weighted signals (less those ``without``), set back by its factors."""
    score = sum(WEIGHTS[name] * features[name] for name in WEIGHTS if name not in without)
    return score * features["penalty"]


def _dense_text(c: AnswerCandidate) -> str:
    """What MiniLM reads of a candidate: a short one (a label and its value) with its page's title."""
    words = c.text.split()
    if len(words) <= 8 and c.title and c.title != c.text:
        return f"{c.title}: {c.text}"
    return " ".join(words[:48])
