"""One evaluation from start to end, as ``pagesight eval`` runs it and as a library call.

    from pagesight.eval.runner import evaluate_dataset
    evaluation = evaluate_dataset("datasets/irpapers", modes=["lexical", "hybrid"], report="out/")
    print(evaluation.best.config.name, evaluation.best.means["recall@5"])

The dataset's index is made or brought up to date (``harness.prepare_index``), every configuration
(and its reranked twin) runs every judged query (``harness.evaluate``), the report is written when
asked, and a reader answers the questions with reference answers under the best configuration.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from pagesight.errors import PagesightError
from pagesight.eval import harness, metrics
from pagesight.eval import report as reports
from pagesight.eval.dataset import Dataset
from pagesight.request import AskRequest

# (configuration, queries done, queries in all) after each query; (questions done, in all) for answers
SearchProgress = Callable[[harness.Config, int, int], None]
AnswerProgress = Callable[[int, int], None]


@dataclass
class Evaluation:
    dataset: Dataset
    results: list[harness.Result]  # one per configuration, in the order asked
    primary: str  # the metric that picks the best configuration
    n_pages: int
    failed: list[tuple[str, str]]  # dataset documents the index could not read: (path, reason)
    answers: harness.AnswerResult | None = None
    report_files: dict[str, Path] | None = None  # report.md, report.html, ... when a report was asked

    @property
    def best(self) -> harness.Result:
        return reports.best(self.results, self.primary)

    def summaries(self) -> list[dict]:
        return [result.summary(self.n_pages) for result in self.results]

    def to_dict(self) -> dict:
        """The best configuration's summary with every configuration's, and the answers' scores."""
        summaries = self.summaries()
        extra = {"answers": self.answers.summary()} if self.answers else {}
        return {
            **summaries[self.results.index(self.best)],
            "dataset": self.dataset.name,
            "best": self.best.config.name,
            "primary": self.primary,
            "configs": summaries,
            **extra,
        }


def configurations(
    modes: Iterable[str] = (),
    sweep: bool = False,
    rerank: str | None = None,
    rerank_candidates: int | None = None,
    rerank_model: str | None = None,
    within_document: bool = False,
    where: str | None = None,
) -> list[harness.Config]:
    """The configurations named (hybrid when none), the alpha sweep when asked, each one
    reranked by ``rerank`` too, and each of those searched within its questions' documents too
    when ``within_document``."""
    configs = [harness.Config.parse(text) for text in modes]
    if sweep:
        configs += [harness.Config.parse(f"rsf:{alpha}") for alpha in harness.ALPHA_SWEEP]
    configs = list(dict.fromkeys(configs)) or [harness.Config.parse("hybrid")]
    if rerank:
        configs += [config.reranked(rerank, rerank_candidates, rerank_model) for config in configs]
    if within_document:
        configs += [config.within() for config in configs if not config.within_document]
    if where is not None:  # every configuration over the documents that pass
        configs = [replace(config, request=config.request.replace(where=where)) for config in configs]
    return list(dict.fromkeys(configs))


def evaluate_dataset(
    dataset: Dataset | str | os.PathLike,
    *,
    index: str | os.PathLike | None = None,
    modes: Iterable[str] = (),
    sweep: bool = False,
    depth: int = 100,
    primary: str = "ndcg@10",
    rerank: str | None = None,
    rerank_candidates: int | None = None,
    rerank_model: str | None = None,
    within_document: bool = False,
    where: str | None = None,
    reader=None,
    answer_k: int = AskRequest.k,
    judge: Callable | None = None,
    report: str | os.PathLike | None = None,
    progress: SearchProgress | None = None,
    answer_progress: AnswerProgress | None = None,
) -> Evaluation:
    """Score search on ``dataset`` under each configuration of ``modes`` (see ``configurations``)
    in ``index`` (default: a folder cached per dataset, made on first use); with ``reader`` (a
    reader or its name), also answer the questions of answers.jsonl under the best configuration,
    judged by ``judge`` when given (``answers.LLMJudge``). ``within_document`` also runs every
    configuration with each question searched inside its own documents only (``/within``).
    ``report`` is a folder for report.md, report.html, plots, TREC runs and the answers."""
    data = dataset if isinstance(dataset, Dataset) else Dataset.load(Path(dataset))
    if primary not in harness.METRICS:
        raise PagesightError(f"primary metric must be one of {', '.join(harness.METRICS)}, got '{primary}'")
    configs = configurations(modes, sweep, rerank, rerank_candidates, rerank_model, within_document, where)
    if judge is not None and reader is None:
        raise PagesightError("a judge scores a reader's answers: give a reader too")
    if reader is not None:
        if not data.answers:
            raise PagesightError(
                f"{data.root}: no answers.jsonl, so there is nothing to score a reader against"
            )
        if isinstance(reader, str):
            from pagesight.answer import make_reader

            reader = make_reader(reader)
    path = Path(index) if index is not None else harness.default_index_dir(data)
    idx, failed = harness.prepare_index(data, path, dense=any(c.needs_dense for c in configs))
    try:
        evaluation = Evaluation(data, [], primary, idx.catalog.counts()["pages"], failed)
        total = len(data.qrels)
        evaluation.results = harness.evaluate(
            idx,
            data,
            configs,
            depth=depth,
            progress=(lambda config, done: progress(config, done, total)) if progress else None,
        )
        if report is not None:
            curves = {
                r.config.name: metrics.recall_curve(
                    {q: [d for d, _ in ranked] for q, ranked in r.run.items()}, data.qrels
                )
                for r in evaluation.results
            }
            evaluation.report_files = reports.write(
                Path(report), data.name, evaluation.results, curves, evaluation.n_pages, primary=primary
            )
        if reader is not None:
            asked = len(data.answers)
            evaluation.answers = harness.evaluate_answers(
                idx,
                data,
                reader,
                evaluation.best.config,
                k=answer_k,
                judge=judge,
                progress=(lambda done: answer_progress(done, asked)) if answer_progress else None,
            )
            if report is not None:
                with (Path(report) / "answers.jsonl").open("w") as rows:
                    rows.writelines(
                        json.dumps(row, ensure_ascii=False) + "\n" for row in evaluation.answers.rows
                    )
    finally:
        idx.close()
    return evaluation
