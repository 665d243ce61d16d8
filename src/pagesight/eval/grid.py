"""The answers of ``pagesight eval``: a grid of answer configurations, each scored on every question
that has a reference answer.

A configuration is a context and an ``AskRequest`` (tiles ``k``, compression, reader inputs,
strategy; with ``agent``, the searches allowed). The contexts are the papers' baselines:

- ``retrieved``: the best tiles of the search configuration (what ``ask`` gives a reader);
- ``oracle``: the tiles of the question's gold pages (its relevant documents, when the qrels judge
  documents), those the search ranks first, then the rest of each gold page in order;
- ``hard-negatives``: the best-ranked tiles that are not on a gold page;
- ``none``: no tiles at all; the reader answers from what it knows (no retrieval).

Each question is searched once (at the depth the largest ``k`` needs, and some more for hard
negatives) and every configuration takes its context from that search; a question about a picture
(queries.jsonl's ``image``) is searched with it and the reader is shown it, as ``ask`` does. With ``agent`` the reader
searches itself and the context is the tiles it read. A row per question records the scores
(``answers.scores``), the judge's grade, the tokens in and out, the time, and whether a gold page
was in the context: with whether the answer was right, that splits the losses into retrieval misses
and reader misses (``decomposition``).

A reader may decline to answer (``Answer.answered`` False: ``answer.abstention``). Declined answers
are scored as SimpleQA scores them: not attempted, neither right nor wrong; a judge grades them
without being asked (NOT_ATTEMPTED, or its wrong grade when it has no such grade), and the summary
gives the share declined and how often the answers attempted were right. The dataset's
unanswerable questions (``unanswerable.jsonl``) are asked too, in the retrieved and no-retrieval
contexts (within their documents when the search is), apart from the rest: what counts there is
how often the reader declines them (``declined_unanswerable``).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from pagesight.answer.ask import ask, retrieve
from pagesight.answer.base import Reader
from pagesight.answer.prompts import strip_thinking
from pagesight.errors import PagesightError
from pagesight.eval.answers import DATASET_METRICS, choice_question, chosen_letter, scores
from pagesight.eval.dataset import Dataset
from pagesight.eval.grounding import PDF_DPI, to_gold
from pagesight.eval.grounding import score as grounding_score
from pagesight.eval.harness import Config, corpus_unit
from pagesight.eval.judges import OUTCOMES, Grade, Judge
from pagesight.records import Hit
from pagesight.request import AskRequest

CONTEXTS = ("retrieved", "oracle", "none", "hard-negatives")
HARD_NEGATIVE_DEPTH = 30  # tiles searched beyond the largest k, so that k of them are not gold
DECOMPOSITION = ("gold_right", "gold_wrong", "missed_right", "missed_wrong")


@dataclass(frozen=True)
class AnswerConfig:
    """One row of the grid: what the reader is given (``context``) and how it is asked."""

    context: str
    request: AskRequest

    @property
    def k(self) -> int:
        return 0 if self.context == "none" else self.request.k

    def columns(self) -> dict:
        r = self.request
        found = {
            "context": "agent" if r.agent else self.context,
            "k": self.k,
            "compression": r.compression,
            "inputs": r.inputs or "default",
            "strategy": r.strategy,
        }
        return {**found, "max_searches": r.max_searches} if r.agent else found

    @property
    def name(self) -> str:
        columns = self.columns()
        parts = [columns["context"], f"k={self.k}" if self.k else ""]
        parts += [f"c={self.request.compression:g}" if self.request.compression != 1 else ""]
        parts += [self.request.inputs or "", self.request.strategy if self.request.strategy != "auto" else ""]
        parts += [f"searches={columns['max_searches']}" if self.request.agent else ""]
        return " ".join(part for part in parts if part)


@dataclass(frozen=True)
class AnswerGrid:
    """What ``eval --answers`` sweeps: every combination of the lists (``options.SWEPT``, and the contexts),
    asked with ``request``'s reader fields (reader, model, max_tokens, agent, token_model)."""

    request: AskRequest = field(default_factory=AskRequest)
    contexts: tuple[str, ...] = ("retrieved",)
    ks: tuple[int, ...] = (AskRequest.k,)
    compressions: tuple[float, ...] = (1.0,)
    inputs: tuple[str | None, ...] = (None,)
    strategies: tuple[str, ...] = ("auto",)
    max_searches: tuple[int, ...] = (AskRequest.max_searches,)

    def configs(self, search: Config) -> list[AnswerConfig]:
        """The grid's configurations over ``search``'s request, each checked (a value out of range
        is an error naming its field); the no-retrieval context once per reader input."""
        unknown = [context for context in self.contexts if context not in CONTEXTS]
        if unknown:
            raise PagesightError(f"context must be among {', '.join(CONTEXTS)}, got '{unknown[0]}'")
        if self.request.agent and set(self.contexts) != {"retrieved"}:
            raise PagesightError("an agent searches itself: its only context is what it retrieves")
        base = AskRequest(**{**self.request.to_dict(), **search.request.to_dict(), "k": self.request.k})
        configs = []
        grid = (self.contexts, self.ks, self.compressions, self.inputs, self.strategies, self.max_searches)
        for context, k, compression, inputs, strategy, searches in itertools.product(*grid):
            if context == "none":  # no tiles: k, compression and strategy change nothing
                k, compression, strategy = 1, 1.0, "auto"
            changes = {"k": k, "compression": compression, "inputs": inputs, "strategy": strategy}
            if self.request.agent:
                changes["max_searches"] = searches
            configs.append(AnswerConfig(context, base.replace(**changes)))
        return list(dict.fromkeys(configs))


@dataclass
class AnswerResult:
    """A reader's answers to the dataset's questions that have reference answers, with scores."""

    reader: str
    config: Config  # the search configuration
    rows: list[dict]  # per question: id, question, references, prediction, scores, grade, tokens, ...
    setting: AnswerConfig | None = None
    judge: Judge | None = None
    unanswerable: list[dict] = field(default_factory=list)  # the rows of the questions no page answers

    def means(self, ids: Collection[str] | None = None) -> dict[str, float]:
        """Each score's mean over the questions answered (of ``ids`` only, when given)."""
        rows = [row for row in self.rows if ids is None or row["id"] in ids]
        names = list(rows[0]["scores"]) if rows else []
        return {name: statistics.fmean(row["scores"][name] for row in rows) for name in names}

    def summary(self) -> dict:
        rows, n = self.rows, len(self.rows) or 1
        latencies = sorted(row["seconds"] for row in rows)
        summary = {
            "reader": self.reader,
            "config": self.config.name,
            **(self.setting.columns() if self.setting else {}),
            "n_answers": len(rows),
            **{name: round(value, 6) for name, value in self.means().items()},
            "ask_ms_p50": round(1000 * statistics.median(latencies), 2) if latencies else None,
            "seconds": round(sum(latencies), 3),
        }
        for key in ("tokens_in", "tokens_out", "image_tokens"):
            total = sum(row[key] for row in rows)
            summary.update({key: total, f"{key}_mean": round(total / n, 2)})
        if self.judge is not None:
            summary["grades"] = judged = {label: 0 for label in self.judge.labels}
            judged.update(Counter(row["grade"] for row in rows))
            if self.judge.kind == "simpleqa":
                summary.update(simpleqa_rates(judged, len(rows)))
        grounded = [row["grounding"] for row in rows if row.get("grounding")]
        if grounded:  # the questions with gold boxes (eval.grounding)
            summary["n_grounded"] = len(grounded)
            summary.update(
                {name: round(statistics.fmean(g[name] for g in grounded), 6) for name in grounded[0]}
            )
        summary.update(attempts(rows, self.unanswerable))
        summary["decomposition"] = decomposition(rows)
        return summary


def attempts(rows: Sequence[dict], unanswerable: Sequence[dict] = ()) -> dict:
    """How often the reader declined (``declined``: the share of questions it did not answer) and
    how often what it did answer was right (``right_given_attempted``, SimpleQA's accuracy given
    attempted, with right as ``decomposition`` reads it); with unanswerable questions, how many
    and the share of them it declined."""
    attempted = [row for row in rows if row.get("answered", True)]
    found = {
        "n_declined": len(rows) - len(attempted),
        "declined": round((len(rows) - len(attempted)) / len(rows), 6) if rows else 0.0,
        "right_given_attempted": round(sum(row["right"] for row in attempted) / len(attempted), 6)
        if attempted
        else 0.0,
    }
    if unanswerable:
        declined = sum(not row["answered"] for row in unanswerable)
        found.update(
            n_unanswerable=len(unanswerable), declined_unanswerable=round(declined / len(unanswerable), 6)
        )
    return found


def simpleqa_rates(grades: dict[str, int], n: int) -> dict[str, float]:
    """SimpleQA's aggregates: accuracy over the answers attempted, and the F-score of that and the
    overall accuracy (their harmonic mean)."""
    attempted = grades["CORRECT"] + grades["INCORRECT"]
    overall = grades["CORRECT"] / n if n else 0.0
    given = grades["CORRECT"] / attempted if attempted else 0.0
    f_score = 2 * overall * given / (overall + given) if overall + given else 0.0
    return {"accuracy_given_attempted": round(given, 6), "f_score": round(f_score, 6)}


def decomposition(rows: Sequence[dict]) -> dict[str, int]:
    """Questions by whether a gold page was in the context and whether the answer was right:
    ``gold_wrong`` are the reader's misses, ``missed_wrong`` the retrieval's (questions without
    judged pages are left out)."""
    counts = dict.fromkeys(DECOMPOSITION, 0)
    for row in rows:
        if row["gold_in_context"] is not None:
            found = "gold" if row["gold_in_context"] else "missed"
            counts[f"{found}_{'right' if row['right'] else 'wrong'}"] += 1
    return counts


def evaluate_grid(
    index,
    dataset: Dataset,
    search: Config,
    configs: Sequence[AnswerConfig],
    readers: Callable[[AskRequest], Reader],
    judge: Judge | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[AnswerResult]:
    """Every configuration's answers to every question with a reference answer, the tiles of each
    question searched once under ``search``; ``readers`` builds (or reuses) a request's reader."""
    unit = corpus_unit(index, dataset.qrels)
    held = {row.id for row in index.catalog.documents()}
    built = [readers(config.request) for config in configs]
    results = [AnswerResult(r.name, search, [], config, judge) for r, config in zip(built, configs)]
    tiled = [c for c in configs if c.context in ("retrieved", "hard-negatives") and not c.request.agent]
    depth = max((c.k for c in tiled), default=0)
    if any(c.context == "hard-negatives" for c in tiled):
        depth = min(max(depth, 100), depth + HARD_NEGATIVE_DEPTH)  # within the retrievers' pool
    wanted = {c.context for c in configs if not c.request.agent}
    asked = [qid for qid in dataset.answers if qid in dataset.queries]
    for done, qid in enumerate(asked, 1):
        gold = _gold(dataset, qid)
        request = search.request.replace(query=dataset.queries[qid])
        if search.within_document:
            request = request.replace(doc_ids=dataset.documents_of(qid, unit))
        image = dataset.image(qid)
        pools = _contexts(index, request, wanted, depth, gold, unit, held, image)
        for config, reader, result in zip(configs, built, results):
            result.rows.append(
                _answer(index, dataset, qid, config, reader, pools, request, gold, unit, judge, image)
            )
        if progress:
            progress(done)
    for done, qid in enumerate(dataset.unanswerable, len(asked) + 1):
        _unanswerable(index, dataset, qid, search, configs, built, results, depth)
        if progress:
            progress(done)
    return results


def _unanswerable(index, dataset, qid, search, configs, built, results, depth) -> None:
    """An unanswerable question asked under each configuration that retrieves or reads nothing
    (no gold pages: no oracle, and every retrieved tile a hard negative): the rows of whether the
    reader declined it."""
    asked = dataset.unanswerable[qid]
    request = search.request.replace(query=asked["text"])
    if search.within_document and asked["doc_ids"]:
        request = request.replace(doc_ids=asked["doc_ids"])
    hits: list[Hit] = []
    searched = 0.0
    if any(c.context == "retrieved" and not c.request.agent for c in configs):
        start = time.perf_counter()
        hits = retrieve(index, request.replace(k=max(depth, 1)))
        searched = time.perf_counter() - start
    for config, reader, result in zip(configs, built, results):
        if config.context not in ("retrieved", "none"):
            continue
        asking = config.request.replace(query=asked["text"])
        if config.request.agent:
            answer = ask(index, asking.replace(doc_ids=request.doc_ids), reader)
            seconds = answer.timings["total"]
        else:
            closed = config.context == "none"
            answer = ask(index, asking, reader, hits=hits[: config.k], closed_book=closed)
            seconds = searched + answer.timings["total"]
        result.unanswerable.append(
            {
                "id": qid,
                "question": asked["text"],
                "prediction": strip_thinking(answer.text),
                "answered": answer.answered,
                "reason": answer.reason,
                "citations": [c.page_id for c in answer.citations],
                "seconds": seconds,
            }
        )


def _grounding(index, citations, gold, unit: str) -> dict | None:
    """The grounding scores of an answer's cited boxes against the question's gold boxes
    (``eval.grounding``), the citations put in the gold's units: an image page's own pixels, PDF
    points for a page rendered at the index's DPI; None without gold boxes."""
    if not gold:
        return None
    cited: dict[str, list] = {}
    types: dict[str, str] = {}
    for citation in citations:
        if citation.doc_id not in types:
            row = index.catalog.document(citation.doc_id)
            types[citation.doc_id] = row.type if row else ""
        scale = 1.0 if types[citation.doc_id] == "image" else PDF_DPI / index.settings.dpi
        corpus_id = citation.page_id if unit == "page" else citation.doc_id
        cited.setdefault(corpus_id, []).extend(to_gold(box, scale) for box in citation.boxes)
    return grounding_score(cited, gold)


def _gold(dataset: Dataset, qid: str) -> set[str]:
    return {corpus_id for corpus_id, grade in dataset.qrels.get(qid, {}).items() if grade > 0}


def _unit(hit: Hit, unit: str) -> str:
    return hit.page_id if unit == "page" else hit.doc_id


def _contexts(index, request, wanted, depth, gold, unit, held, image) -> dict[str, tuple[list[Hit], float]]:
    """Each context's tiles for one question (about ``image``, when not None), best first, with the
    seconds their search took."""
    pools: dict[str, tuple[list[Hit], float]] = {"none": ([], 0.0)}
    if depth:
        start = time.perf_counter()
        hits = retrieve(index, request.replace(k=depth), image)
        seconds = time.perf_counter() - start
        pools["retrieved"] = (hits, seconds)
        pools["hard-negatives"] = ([hit for hit in hits if _unit(hit, unit) not in gold], seconds)
    if "oracle" in wanted:
        start = time.perf_counter()
        pools["oracle"] = (oracle(index, request, gold, unit, held, image), time.perf_counter() - start)
    return pools


def oracle(index, request, gold: set[str], unit: str, held: set[str], image=None) -> list[Hit]:
    """The tiles of the gold pages (or documents): those a search within their documents ranks
    first, then the other tiles of each gold page in page order."""
    documents = {corpus_id.rpartition("_")[0] if unit == "page" else corpus_id for corpus_id in gold}
    documents = sorted(documents & held)
    if not documents:
        return []
    found = retrieve(index, request.replace(doc_ids=documents, k=100, where=None), image)
    hits = [hit for hit in found if _unit(hit, unit) in gold]
    if unit == "page":
        seen = {(hit.doc_id, hit.page, hit.tile) for hit in hits}
        floor = min((hit.score for hit in hits), default=0.0)
        for page_id in sorted(gold):
            doc_id, _, page = page_id.rpartition("_")
            if doc_id in held and page.isdigit():
                rows = index.catalog.page_tiles(doc_id, int(page))
                hits += [_tile_hit(row, floor) for row in rows if (doc_id, row.page, row.idx) not in seen]
    return hits


def _tile_hit(row, score: float) -> Hit:
    """A gold tile the search did not rank, as a hit (no snippet: nothing of the question matched)."""
    return Hit(row.doc_id, row.page, row.idx, score, {}, "", [], row.page_size, row.box)


def _answer(index, dataset, qid, config, reader, pools, request, gold, unit, judge, image) -> dict:
    """One question (about ``image``, when not None) answered under ``config``: the row of its
    scores."""
    question, options = dataset.queries[qid], dataset.options.get(qid)
    references = dataset.references(qid)
    asking = config.request.replace(query=choice_question(question, options) if options else question)
    if config.request.agent:
        answer = ask(index, asking.replace(doc_ids=request.doc_ids), reader, image=image)
        seconds = answer.timings["total"]
    else:
        hits, searched = pools[config.context]
        closed = config.context == "none"
        answer = ask(index, asking, reader, image=image, hits=hits[: config.k], closed_book=closed)
        seconds = searched + answer.timings["total"]
    prediction = strip_thinking(answer.text)
    scored = scores(prediction, references, options)
    own = DATASET_METRICS.get(dataset.answer_metric or "")
    if own is not None:  # the dataset's own metric, from its answers.jsonl row
        scored.update(own[0](prediction, dataset.answers[qid], answer.answered))
    cited = {c.page_id for c in answer.citations} | {c.doc_id for c in answer.citations}
    scored["cites_relevant"] = float(bool(cited & gold)) if gold else 0.0
    grade = None
    if judge is not None and not answer.answered:  # declined: not attempted, graded without asking
        grade = Grade(OUTCOMES[judge.kind][2])
    elif judge is not None and options:
        grade = judge.choice(chosen_letter(prediction, options), references[0])
    elif judge is not None:
        grade = judge(question, references, prediction)
    if grade is not None:
        scored["judge"] = grade.score
    if grade is not None:
        right = grade.score == 1
    elif own is not None:
        right = scored[own[1]] == 1
    else:
        right = max(scored["relaxed_accuracy"], scored["contains"]) == 1
    right = right and answer.answered  # a refusal that happens to contain the reference is no answer
    usage = answer.usage
    return {
        "id": qid,
        "question": question,
        "reference": dataset.answers[qid]["answer"],
        "references": references,
        "prediction": prediction,
        "answered": answer.answered,
        "reason": answer.reason,
        "citations": [c.page_id for c in answer.citations],
        "scores": scored,
        **({"grade": grade.label} if grade else {}),
        "right": right,
        "gold_in_context": bool({_unit(hit, unit) for hit in answer.hits} & gold) if gold else None,
        "grounding": _grounding(index, answer.citations, dataset.boxes.get(qid), unit),
        "tokens_in": usage.get("prompt_tokens") or 0,
        "tokens_out": usage.get("completion_tokens") or 0,
        "image_tokens": usage.get("image_tokens") or 0,
        "seconds": seconds,
    }
