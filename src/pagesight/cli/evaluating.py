"""``pagesight eval``, ``fit-ranker`` and ``compare``: retrieval and answers, measured."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pagesight.choices import TEXT_FROM
from pagesight.cli.common import (
    ApiKeyOption,
    BaseUrlOption,
    JsonOption,
    ReaderDeviceOption,
    TrustOption,
    choices,
    err,
    fail,
    field_options,
    out,
    progress_bar,
    request_options,
    values,
)
from pagesight.errors import PagesightError
from pagesight.eval.judges import JUDGES
from pagesight.eval.options import SWEPT, SearchGrid
from pagesight.request import AskRequest, SearchRequest, spec

app = typer.Typer()


ContextOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Answer contexts: retrieved (the best tiles), oracle (the gold pages' tiles), hard-negatives "
        "(the best tiles not on a gold page), none (no retrieval). Several: repeat, or join by commas."
    ),
]
Judges = choices("Judges", JUDGES)
TextFrom = choices("TextFrom", TEXT_FROM)
# The answer's options: each field AskRequest has of its own (the reader's, and the tiles it is
# given), those an answer grid sweeps as lists of values (eval.grid.SWEPT)
_SEARCHED = {f.name: spec(f) for f in dataclasses.fields(SearchRequest)}
ANSWERED = [f.name for f in dataclasses.fields(AskRequest) if spec(f) != _SEARCHED.get(f.name, spec(f))]
ANSWERED += [f.name for f in dataclasses.fields(AskRequest) if f.name not in _SEARCHED]
ANSWERED = [name for name in dict.fromkeys(ANSWERED) if name != "query"]

DatasetArgument = Annotated[Path, typer.Argument(help="Dataset folder: documents, queries.jsonl, qrels.tsv.")]
EvalIndex = Annotated[
    str | None,
    typer.Option("--index", "-i", help="Index directory or store (default: a folder cached per dataset)."),
]
ReportOption = Annotated[
    Path | None, typer.Option(help="Write report.md/.html, plots and TREC runs into this folder.")
]
ByOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Also break every score down by these fields of the questions (queries.jsonl's fields: "
        "ViDoRe V3's language, query_format, query_types, content_type, modality, ...; pages: the "
        "number of relevant pages, 1, 2, 3-5, 6+), after those the dataset's dataset.json names "
        "(TAT-QA's answer_type and answer_from). Repeat, or join by commas."
    ),
]
TextFromOption = Annotated[
    TextFrom,
    typer.Option(
        help="The pages' text: their text layer or OCR (documents), or the dataset's own "
        "transcriptions, texts.jsonl (dataset; in an index of its own)."
    ),
]
DepthOption = Annotated[int, typer.Option(help="Ranked corpus items kept per query.")]
PrimaryOption = Annotated[str, typer.Option(help="Metric that picks the best configuration.")]
AnswersOption = Annotated[
    bool,
    typer.Option(
        "--answers",
        help="Also answer the questions of answers.jsonl under the best configuration, once per "
        "combination of the answer settings (--reader implies it).",
    ),
]
JudgeOption = Annotated[
    Judges | None,
    typer.Option(
        help="Grade answers with --judge-model: binary (YES/NO), graded (CORRECT, PARTIALLY_CORRECT, "
        "INCORRECT) or simpleqa (CORRECT, INCORRECT, NOT_ATTEMPTED); at temperature 0."
    ),
]
JudgeModelOption = Annotated[
    str | None,
    typer.Option(help="The judge's model on an OpenAI-compatible endpoint (--judge binary by default)."),
]
JudgeUrlOption = Annotated[str | None, typer.Option(help="The judge's endpoint (default: --base-url).")]


@app.command("eval")
@request_options(SearchGrid, into="searches")
@field_options(AskRequest, ANSWERED, many=SWEPT, flags={"k": ("--answer-k",)}, into="answering")
def evaluate(
    dataset: DatasetArgument,
    index: EvalIndex = None,
    report: ReportOption = None,
    by: ByOption = None,
    text_from: TextFromOption = TextFrom.documents,
    depth: DepthOption = 100,
    primary: PrimaryOption = "ndcg@10",
    answers: AnswersOption = False,
    context: ContextOption = None,
    base_url: BaseUrlOption = None,
    api_key: ApiKeyOption = None,
    device: ReaderDeviceOption = None,
    trust_remote_code: TrustOption = False,
    judge: JudgeOption = None,
    judge_model: JudgeModelOption = None,
    judge_base_url: JudgeUrlOption = None,
    as_json: JsonOption = False,
    *,
    searches: SearchGrid,
    answering: dict,
) -> None:
    """Score search (and answers) on a dataset.

    Recall@k, nDCG@10, MRR@10 and Success@k per configuration; with --answers (or --reader), also
    exact match, F1, relaxed accuracy and containment of the answers, for every combination of
    --context, --answer-k, -c, --inputs, --strategy (and --max-searches with --agent), with the
    judge's grades, tokens, time, and which losses are retrieval's and which the reader's.
    """
    from pagesight.eval.dataset import Dataset
    from pagesight.eval.harness import default_index_dir
    from pagesight.eval.judges import openai_judge
    from pagesight.eval.runner import evaluate_dataset
    from pagesight.store.base import store_exists

    asked = answers or answering["reader"] is not None
    if (judge_model or judge) and not asked:
        fail("--judge-model needs --reader or --answers")
    if judge and not judge_model:
        fail("--judge needs --judge-model")
    local = {"base_url": base_url, "api_key": api_key, "device": device}
    with progress_bar(transient=True) as progress:
        searched, answered = _progress_reporters(progress)
        try:
            grid = answer_grid(asked, answering, context, local)
            scorer = None
            if judge_model:
                kind = judge.value if judge else "binary"
                scorer = openai_judge(kind, judge_model, judge_base_url or base_url, api_key)
            data = Dataset.load(dataset)
            path = index or default_index_dir(data, text_from.value)
            if not store_exists(path):
                err.print(f"indexing {data.documents} into {path}", highlight=False)
            evaluation = evaluate_dataset(
                data, index=path, searches=searches.check(), depth=depth, primary=primary, grid=grid,
                reader_options=local, judge=scorer, report=report, by=values(by, str, "--by") or (),
                text_from=text_from.value, progress=searched, answer_progress=answered,
                trust_remote_code=trust_remote_code,
            )  # fmt: skip
        except PagesightError as exc:
            fail(str(exc))
    _print_evaluation(evaluation, as_json)


def _progress_reporters(progress):
    """eval's progress callbacks: a task for each configuration's queries, one for the answers."""
    tasks: dict = {}

    def searched(config, done: int, total: int) -> None:
        if config not in tasks:
            tasks[config] = progress.add_task(config.name, total=total, note="queries")
        progress.update(tasks[config], completed=done)

    def answered(done: int, total: int) -> None:
        if "answers" not in tasks:
            tasks["answers"] = progress.add_task("answers", total=total, note="questions")
        progress.update(tasks["answers"], completed=done)

    return searched, answered


def answer_grid(asked: bool, answering: dict, context: list[str] | None, local: dict):
    """The answer grid when answers are asked for (``--answers`` or ``--reader``): the request of
    the answer's options given (``answering``: AskRequest's fields, a tuple of values for each one
    swept), over ``context`` and the values swept. Otherwise None, and any answer option or machine
    option (``local``) given is refused."""
    from pagesight.eval.grid import AnswerGrid

    if not asked:
        if context or any(value not in (None, False) for value in answering.values()) or any(local.values()):
            raise PagesightError("the answer settings and the reader's options need --answers (or --reader)")
        return None
    single = {name: value for name, value in answering.items() if name not in SWEPT and value is not None}
    request = AskRequest(**{**single, "reader": single.get("reader") or AskRequest.reader})
    lists = {SWEPT[name]: answering[name] for name in SWEPT if answering[name]}
    if lists.get("max_searches") and not request.agent:
        raise PagesightError("--max-searches needs --agent")
    contexts = values(context, str, "--context")
    return AnswerGrid(request, **lists, **({"contexts": contexts} if contexts else {}))


def _print_evaluation(evaluation, as_json: bool) -> None:
    """The files that failed and the report's path on stderr; the scores as JSON or tables."""
    for failed_path, reason in evaluation.failed:
        err.print(f"{failed_path}: {reason}", highlight=False, markup=False, soft_wrap=True)
    if evaluation.report_files:
        err.print(f"report: {evaluation.report_files['html']}", highlight=False)
    if as_json:
        print(json.dumps(evaluation.to_dict()))
        return
    _print_summaries(evaluation.summaries())
    if evaluation.answer_grid:
        _print_answers([result.summary() for result in evaluation.answer_grid])
    _print_breakdowns(evaluation.breakdowns(), evaluation.best.config.name)


def _print_answers(summaries: list[dict]) -> None:
    """One line for one answer configuration (as before the grid); a table for several."""
    names = (
        "tatqa_em",
        "tatqa_f1",
        "exact_match",
        "f1",
        "relaxed_accuracy",
        "contains",
        "cites_relevant",
        "grounding_f1",
        "judge",
    )
    if len(summaries) == 1:
        (summary,) = summaries
        scores = ", ".join(f"{name} {summary[name]:.4f}" for name in names if name in summary)
        out.print(
            f"answers ({summary['reader']}, {summary['config']}, {summary['n_answers']} questions): {scores}",
            highlight=False,
        )
        return
    from pagesight.eval.report import answer_table

    header, *rows = answer_table(summaries, compact=True)
    table = Table(pad_edge=False, title=f"answers ({summaries[0]['reader']}, {summaries[0]['config']})")
    for column in header:
        name = column.replace("relaxed_accuracy", "relaxed").replace("_", " ")
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*row)
    out.print(table)
    out.print(
        "g+/g-: a gold page in the context, answer right/wrong (g-: the reader's misses); m+/m-: none "
        "(m-: the retrieval's misses)",
        highlight=False,
    )


def _print_breakdowns(breakdowns: dict, config: str) -> None:
    """A table per field: the best configuration's scores over each value's questions; with
    answers, a table per field of the first answer configuration's main scores."""
    columns = ("recall@1", "recall@5", "ndcg@10")  # every metric and configuration in --json, --report
    for name, found in breakdowns.items():
        answered = [entry["answers"] for entry in found.values() if "answers" in entry]
        if answered:
            setting = next(iter(answered[0]))
            shown = [s for s in ANSWER_COLUMNS if s in answered[0][setting]]
            table = Table(pad_edge=False, title=f"answers ({setting}) by {name}")
            table.add_column("value", overflow="fold")
            table.add_column("n", justify="right")
            for column in shown:
                table.add_column(
                    column.replace("relaxed_accuracy", "relaxed").replace("_", " "), justify="right"
                )
            for value, entry in found.items():
                if "answers" in entry:
                    means = entry["answers"][setting]
                    table.add_row(value, str(entry["n_answers"]), *(f"{means[c]:.4f}" for c in shown))
            out.print(table)
        table = Table(pad_edge=False, title=f"{config} by {name}")
        table.add_column("value", overflow="fold")
        table.add_column("n", justify="right")
        for column in columns:
            table.add_column(column.replace("recall", "R").replace("ndcg", "nDCG"), justify="right")
        for value, entry in found.items():
            if "configs" in entry:
                means = entry["configs"][config]
                table.add_row(value, str(entry["n_queries"]), *(f"{means[c]:.4f}" for c in columns))
        out.print(table)


ANSWER_COLUMNS = ("tatqa_em", "tatqa_f1", "relaxed_accuracy", "contains")  # the rest in --json, --report


def _print_summaries(summaries: list[dict]) -> None:
    columns = ("recall@1", "recall@5", "recall@10", "recall@20", "ndcg@10", "mrr@10")  # all in --json
    table = Table(pad_edge=False)
    # A long configuration name folds onto a second line; the numbers are never cut.
    table.add_column("config", overflow="fold")
    for column in columns:
        name = column.replace("recall", "R").replace("ndcg", "nDCG").replace("mrr", "MRR")
        table.add_column(name, justify="right", no_wrap=True, min_width=6)
    table.add_column("p50 ms", justify="right", no_wrap=True)
    for s in summaries:
        latency = f"{s['latency_ms_p50']:.1f}" if "latency_ms_p50" in s else "-"
        table.add_row(s["config"], *(f"{s[c]:.4f}" for c in columns), latency)
    out.print(table)
    pages = f", {summaries[0]['n_pages']} pages" if "n_pages" in summaries[0] else ""
    out.print(f"{summaries[0]['n_queries']} queries{pages}", highlight=False)


# fit-ranker's and fit-reader's indexes, one a dataset
DatasetIndexes = Annotated[
    list[str] | None,
    typer.Option(
        "--index",
        "-i",
        help="Each dataset's index, in the datasets' order (default: eval's folder cached per dataset).",
    ),
]


@app.command("fit-ranker")
def fit_ranker(
    datasets: Annotated[
        list[Path], typer.Argument(help="Dataset folders with judged pages (as eval reads them).")
    ],
    index: DatasetIndexes = None,
    out_file: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write the ranker fitted on all the datasets here (search --ranker-file)."
        ),
    ] = None,
    depth: Annotated[int, typer.Option(help="Hybrid hits a question that the ranker reorders.", min=1)] = 30,
    as_json: JsonOption = False,
) -> None:
    """Fit the learned ranker on judged questions.

    Each question is searched over the whole collection and within its documents; the first hybrid
    hits (ranker off) are the candidates. With two datasets or more, each is measured by a ranker
    fitted on the others (Recall@1/5/10 and nDCG@10, unranked and ranked).
    """
    from pagesight.eval.dataset import Dataset
    from pagesight.eval.harness import default_index_dir, prepare_index
    from pagesight.eval.ranker import PROTOCOLS, REPORTED, collect, fit_rankers

    if index and len(index) != len(datasets):
        fail(f"{len(index)} --index for {len(datasets)} datasets: give one for each, or none")
    sets = {}
    try:
        with progress_bar(transient=True) as progress:
            for position, folder in enumerate(datasets):
                data = Dataset.load(folder)
                if data.name in sets:
                    raise PagesightError(f"{folder}: a second dataset named {data.name}")
                path = Path(index[position]) if index else default_index_dir(data)
                idx, _ = prepare_index(data, path, dense=True)
                task = progress.add_task(data.name, total=2 * len(data.qrels), note="searches")
                try:
                    sets[data.name] = collect(
                        data,
                        idx,
                        depth,
                        progress=lambda done, task=task: progress.update(task, completed=done),
                    )
                finally:
                    idx.close()
            fitted = fit_rankers(sets, depth)
    except PagesightError as exc:
        fail(str(exc))
    if out_file is not None:
        fitted.ranker.save(out_file)
    if as_json:
        print(json.dumps(fitted.to_dict()))
        return
    if fitted.left_out:
        table = Table(pad_edge=False, title="left out of the fit: R@1 / R@5 / R@10 / nDCG@10")
        for column in ("dataset", "protocol", "unranked", "ranked"):
            table.add_column(column, no_wrap=True)
        for name, measured in fitted.left_out.items():
            for protocol in PROTOCOLS:
                row = [
                    " / ".join(f"{measured[kind][protocol][m]:.3f}" for m in REPORTED)
                    for kind in ("unranked", "ranked")
                ]
                table.add_row(name, protocol, *row)
        out.print(table)
    if out_file is not None:
        err.print(f"wrote {out_file}", highlight=False)


@app.command("fit-reader")
def fit_reader(
    datasets: Annotated[
        list[Path], typer.Argument(help="Dataset folders with reference answers (as eval reads them).")
    ],
    index: DatasetIndexes = None,
    out_file: Annotated[
        Path | None,
        typer.Option("--out", help="Write the reader fitted on all the datasets here (a reader.json)."),
    ] = None,
    context: Annotated[
        list[str] | None,
        typer.Option(
            help="Contexts each question is read in: oracle (its gold pages), retrieved. Repeatable."
        ),
    ] = None,
    folds: Annotated[int, typer.Option(help="Folds of documents the figures are held out by.", min=2)] = 5,
    as_json: JsonOption = False,
) -> None:
    """Fit the extractive reader on questions with known answers.

    Its question, row and column models, candidate scorer and support model are fitted on every
    dataset; each dataset's figures are held out by folds of documents: right answers chosen,
    answers some candidate got right, right answers the support model keeps and unanswerable
    questions it declines.
    """
    from pagesight.eval.reader import CONTEXTS, fit_datasets

    try:
        with progress_bar(transient=True) as progress:
            task = progress.add_task("fitting", total=None, note="readings")
            fitted = fit_datasets(
                datasets,
                index,
                tuple(context or CONTEXTS),
                folds,
                progress=lambda n: progress.update(task, completed=n),
            )
    except PagesightError as exc:
        fail(str(exc))
    if out_file is not None:
        out_file.write_text(json.dumps(fitted.model, separators=(",", ":")) + "\n")
    if as_json:
        print(json.dumps({"held_out": fitted.held_out, "about": fitted.model["about"]}))
        return
    table = Table(pad_edge=False, title="held out by folds of documents")
    columns = ("questions", "right", "reachable", "kept", "unanswerable", "declined")
    for column in ("dataset / context", *columns):
        table.add_column(column, no_wrap=True)
    for name, counts in fitted.held_out.items():
        table.add_row(name, *(str(counts[c]) for c in columns))
    out.print(table)
    if out_file is not None:
        err.print(f"wrote {out_file}", highlight=False)


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="Saved runs in TREC format (from eval --report).")],
    qrels: Annotated[Path, typer.Option(help="qrels.tsv of the dataset the runs answer.")],
    at: Annotated[str, typer.Option(help="Success metric for wins and losses.")] = "success@5",
    as_json: JsonOption = False,
) -> None:
    """Compare saved evaluation runs.

    Metrics side by side, and the queries only one of them gets right.
    """
    from pagesight.eval import metrics
    from pagesight.eval.dataset import read_qrels
    from pagesight.eval.harness import Config, Result
    from pagesight.eval.report import comparisons
    from pagesight.eval.runs import read_trec

    try:
        judged = read_qrels(qrels)
        loaded = []
        for path in runs:
            run, tag = read_trec(path)
            per_query = metrics.per_query({q: [d for d, _ in ranked] for q, ranked in run.items()}, judged)
            loaded.append(Result(Config(tag or path.stem, "saved"), run, per_query, latencies=[0.0]))
    except (PagesightError, OSError) as exc:
        fail(str(exc))
    if at not in next(iter(loaded[0].per_query.values())):
        fail(f"--at must be one of success@1, success@5, success@10, got '{at}'")
    summaries = [{"config": r.config.name, **r.means, "n_queries": len(r.per_query)} for r in loaded]
    pairs = comparisons(loaded, at)
    if as_json:
        print(json.dumps({"runs": summaries, "comparisons": pairs}))
        return
    _print_summaries(summaries)
    for pair in pairs:
        out.print(
            f"{pair['a']} vs {pair['b']} at {at}: only {pair['a']} {len(pair['only_a'])}, "
            f"only {pair['b']} {len(pair['only_b'])}, both {pair['both']}, neither {pair['neither']}",
            highlight=False,
        )
