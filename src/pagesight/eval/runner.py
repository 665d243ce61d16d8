"""One evaluation from start to end, as ``pagesight eval`` runs it and as a library call.

    from pagesight.eval.runner import SearchGrid, evaluate_dataset
    searches = SearchGrid(modes=("lexical", "hybrid"))
    evaluation = evaluate_dataset("datasets/irpapers", searches=searches, report="out/")
    print(evaluation.best.config.name, evaluation.best.means["recall@5"])

The dataset's index is made or brought up to date (``harness.prepare_index``; the pages' text
from their text layer or OCR, or from the dataset's own transcriptions), every configuration
(and its reranked twin) runs every judged query (``harness.evaluate``), a reader answers the
questions with reference answers under the best configuration, once for each configuration of the
answer grid (``grid.AnswerGrid``: contexts, k, compression, inputs, strategies, agent budgets), the
scores are broken down by the questions' fields when asked (``report.breakdowns``), and the report
is written when asked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pagesight.answer.base import Reader, Readers
from pagesight.choices import TEXT_FROM
from pagesight.errors import PagesightError
from pagesight.eval import harness, metrics
from pagesight.eval import report as reports
from pagesight.eval.dataset import Dataset
from pagesight.eval.grid import AnswerGrid, AnswerResult, evaluate_grid
from pagesight.eval.judges import Judge
from pagesight.eval.options import SearchGrid
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
    answer_grid: list[AnswerResult] = field(default_factory=list)  # one per answer configuration
    report_files: dict[str, Path] | None = None  # report.md, report.html, ... when a report was asked
    groups: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # by: field -> value -> ids

    @property
    def best(self) -> harness.Result:
        return reports.best(self.results, self.primary)

    @property
    def answers(self) -> AnswerResult | None:
        """The answers of the grid's first configuration (the only one without a grid)."""
        return self.answer_grid[0] if self.answer_grid else None

    def summaries(self) -> list[dict]:
        return [result.summary(self.n_pages) for result in self.results]

    def breakdowns(self) -> dict:
        """The scores over the questions of each value of each field asked (``report.breakdowns``)."""
        return reports.breakdowns(self.groups, self.results, self.answer_grid)

    def to_dict(self) -> dict:
        """The best configuration's summary with every configuration's, and the answers' scores:
        ``answers`` the first answer configuration's, ``answer_grid`` every one's; ``breakdowns``
        by the fields asked."""
        summaries = self.summaries()
        extra = {}
        if self.answer_grid:
            extra = {
                "answers": self.answers.summary(),
                "answer_grid": [a.summary() for a in self.answer_grid],
            }
        if self.groups:
            extra["breakdowns"] = self.breakdowns()
        return {
            **summaries[self.results.index(self.best)],
            "dataset": self.dataset.name,
            "best": self.best.config.name,
            "primary": self.primary,
            "configs": summaries,
            **extra,
        }


def configs(grid: SearchGrid) -> list[harness.Config]:
    """Every configuration of ``grid``, in order, each once."""
    grid.check()
    found = [harness.Config.parse(text) for text in grid.modes]
    if grid.sweep:
        found += [harness.Config.parse(f"rsf:{alpha}") for alpha in harness.ALPHA_SWEEP]
    found = list(dict.fromkeys(found)) or [harness.Config.parse("hybrid")]
    for name, values in grid.vary.items():
        found = [config.setting(name, value) for config in found for value in values]
    if grid.rerank:
        found += [config.reranked(grid.rerank, grid.rerank_candidates, grid.rerank_model) for config in found]
    if grid.within_document:
        found += [config.within() for config in found if not config.within_document]
    if grid.where is not None:  # every configuration over the documents that pass
        found = [replace(config, request=config.request.replace(where=grid.where)) for config in found]
    return list(dict.fromkeys(found))


def evaluate_dataset(
    dataset: Dataset | str | os.PathLike,
    *,
    index: str | os.PathLike | None = None,
    searches: SearchGrid | None = None,
    depth: int = 100,
    primary: str = "ndcg@10",
    reader: Reader | str | None = None,
    answer_k: int = AskRequest.k,
    grid: AnswerGrid | None = None,
    reader_options: dict | None = None,
    judge: Judge | None = None,
    report: str | os.PathLike | None = None,
    by: Iterable[str] = (),
    text_from: str = TEXT_FROM[0],
    progress: SearchProgress | None = None,
    answer_progress: AnswerProgress | None = None,
    trust_remote_code: bool = False,
) -> Evaluation:
    """Score search on ``dataset`` under each configuration of ``searches`` (a ``SearchGrid``;
    default: hybrid) in ``index`` (default: a folder cached per dataset, made on first use). With ``reader`` (a
    reader or its name) or a ``grid``, also answer the questions of answers.jsonl under the best
    configuration, once per configuration of ``grid`` (default: the retrieved ``answer_k`` tiles;
    a named reader is built for each configuration's request with ``reader_options``: base URL, API
    key, device), graded by ``judge`` when given (``judges.Judge``). The search grid's
    ``within_document`` also runs every configuration with each question searched inside its own
    documents only (``/within``); its ``vary`` sweeps settings of the search, as IRPAPERS sweeps
    the weight of the image run or MUVERA's ``ef``.
    ``report`` is a folder for report.md, report.html, plots, TREC runs and the answers. ``by``:
    fields of the questions (``Dataset.field_names``: queries.jsonl's ``fields`` and ``pages``) to
    break every score down by, after those the dataset declares (``Dataset.report_by``).
    ``text_from``: 'documents' (the pages' text layer or OCR) or 'dataset' (its texts.jsonl, in an
    index of its own by default). ``trust_remote_code`` lets the
    index's visual encoder, the reranker and the readers built here run the code a model comes with
    (``Index.open``)."""
    data = dataset if isinstance(dataset, Dataset) else Dataset.load(Path(dataset))
    by = dict.fromkeys([*data.report_by, *by])  # the dataset's own breakdowns first
    groups = {name: data.groups(name) for name in by}  # an unknown field is refused before any work
    if primary not in harness.METRICS:
        raise PagesightError(f"primary metric must be one of {', '.join(harness.METRICS)}, got '{primary}'")
    searched = configs(searches or SearchGrid())
    if judge is not None and reader is None and grid is None:
        raise PagesightError("a judge scores a reader's answers: give a reader too")
    if (reader is not None or grid is not None) and not data.answers:
        raise PagesightError(f"{data.root}: no answers.jsonl, so there is nothing to score a reader against")
    if grid is None and reader is not None:
        grid = AnswerGrid(ks=(answer_k,))
    if grid is not None and isinstance(reader, str):
        grid = replace(grid, request=grid.request.replace(reader=reader))
    readers = Readers(reader, reader_options, trust_remote_code=trust_remote_code)
    if grid is not None:  # a bad grid value or reader option is refused before any work
        for config in grid.configs(searched[0]):
            readers.get(config.request)
    path = Path(index) if index is not None else harness.default_index_dir(data, text_from)
    dense = any(c.needs_dense for c in searched)
    idx, failed = harness.prepare_index(
        data, path, dense=dense, text_from=text_from, trust_remote_code=trust_remote_code
    )
    try:
        evaluation = Evaluation(data, [], primary, idx.catalog.counts()["pages"], failed, groups=groups)
        total = len(data.qrels)
        evaluation.results = harness.evaluate(
            idx,
            data,
            searched,
            depth=depth,
            progress=(lambda config, done: progress(config, done, total)) if progress else None,
        )
        if grid is not None:
            asked = sum(qid in data.queries for qid in data.answers) + len(data.unanswerable)
            evaluation.answer_grid = evaluate_grid(
                idx,
                data,
                evaluation.best.config,
                grid.configs(evaluation.best.config),
                readers.get,
                judge=judge,
                progress=(lambda done: answer_progress(done, asked)) if answer_progress else None,
            )
        if report is not None:
            _write_report(Path(report), evaluation)
    finally:
        idx.close()
    return evaluation


def _write_report(out: Path, evaluation: Evaluation) -> None:
    """report.md, report.html, the plots, the runs and, with answers, answers.jsonl (a row per
    question and answer configuration)."""
    data = evaluation.dataset
    curves = {
        r.config.name: metrics.recall_curve(
            {q: [d for d, _ in ranked] for q, ranked in r.run.items()}, data.qrels
        )
        for r in evaluation.results
    }
    evaluation.report_files = reports.write(
        out,
        data.name,
        evaluation.results,
        curves,
        evaluation.n_pages,
        primary=evaluation.primary,
        answers=evaluation.answer_grid,
        by=evaluation.breakdowns(),
    )
    if evaluation.answer_grid:
        with (out / "answers.jsonl").open("w") as rows:
            for result in evaluation.answer_grid:
                setting = {"answer_config": result.setting.name, **result.setting.columns()}
                rows.writelines(
                    json.dumps({**row, **setting}, ensure_ascii=False) + "\n" for row in result.rows
                )
                rows.writelines(  # the questions no page answers, marked so
                    json.dumps({**row, "unanswerable": True, **setting}, ensure_ascii=False) + "\n"
                    for row in result.unanswerable
                )
