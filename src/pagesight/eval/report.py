"""Side-by-side reports of evaluation results: Markdown, HTML, PNG plots and the saved runs; with
answers, a row per answer configuration (scores, grades, tokens, time, failure decomposition); with
fields to break them down by (``eval --by``), every configuration's scores over the questions of
each value (``breakdowns``)."""

from __future__ import annotations

import html
import itertools
import json
import os
import platform
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from pagesight.eval import metrics
from pagesight.eval.grid import DECOMPOSITION, AnswerResult
from pagesight.eval.harness import METRICS, SETTINGS, Result
from pagesight.eval.runs import write_trec

COLUMNS = METRICS
# a swept setting's plot: its axis and title (others: the setting's name)
SWEEP_LABELS = {
    "alpha": ("alpha (weight of the dense side; 0 = BM25 only)", "Relative score fusion: alpha sweep"),
    "visual_weight": (
        "visual_weight (weight of the image run; 0 = text only)",
        "Text and image: weight sweep",
    ),
    "ef": ("ef (MUVERA candidates re-scored by MaxSim)", "MUVERA: ef sweep"),
}


def best(results: Sequence[Result], metric: str = "ndcg@10") -> Result:
    """The best configuration over the whole collection (a within-document one only when every
    configuration is: searching inside the right document is easier, not better)."""
    whole = [result for result in results if not result.config.within_document] or results
    return max(whole, key=lambda result: result.means[metric])


def run_tag(name: str) -> str:
    """A configuration's name as a TREC run tag and file name: 'lexical/doc:1' is 'lexical_doc-1'."""
    return name.replace(":", "-").replace("/", "_")


def run_filename(name: str) -> str:
    return run_tag(name) + ".trec"


def wins_and_losses(a: Result, b: Result, metric: str) -> dict:
    """Queries that only one configuration gets right at ``metric`` (a success@k), as IRPAPERS counts."""
    only_a, only_b, both, neither = [], [], [], []
    for qid in a.per_query:
        hit_a, hit_b = a.per_query[qid][metric] > 0, b.per_query[qid][metric] > 0
        (both if hit_a and hit_b else only_a if hit_a else only_b if hit_b else neither).append(qid)
    return {
        "a": a.config.name,
        "b": b.config.name,
        "metric": metric,
        "only_a": only_a,
        "only_b": only_b,
        "both": len(both),
        "neither": len(neither),
    }


def comparisons(results: Sequence[Result], metric: str, primary: str = "ndcg@10") -> list[dict]:
    """Every pair when there are a few configurations, else the best one against each other."""
    if len(results) <= 5:
        pairs = itertools.combinations(results, 2)
    else:
        top = best(results, primary)
        pairs = ((top, other) for other in results if other is not top)
    return [wins_and_losses(a, b, metric) for a, b in pairs]


def breakdowns(
    groups: dict[str, dict[str, list[str]]], results: Sequence[Result], answers: Sequence[AnswerResult] = ()
) -> dict:
    """The scores over the questions under each value of each field (``groups``: field -> value ->
    question ids, ``Dataset.groups``): field -> value -> ``n_queries`` (of them searched) and
    ``configs`` (each configuration's mean metrics), with answers ``n_answers`` and ``answers``
    (each answer configuration's mean scores); a value none of whose questions was searched or
    answered is left out."""
    found: dict[str, dict] = {}
    for name, values in groups.items():
        found[name] = {}
        for value, qids in values.items():
            ids = set(qids)
            entry: dict = {}
            searched = ids & results[0].per_query.keys() if results else set()
            if searched:
                entry["n_queries"] = len(searched)
                entry["configs"] = {
                    r.config.name: _rounded(metrics.mean({q: r.per_query[q] for q in searched}))
                    for r in results
                }
            answered = sum(row["id"] in ids for row in answers[0].rows) if answers else 0
            if answered:
                entry["n_answers"] = answered
                entry["answers"] = {a.setting.name: _rounded(a.means(ids)) for a in answers}
            if entry:
                found[name][value] = entry
    return found


def _rounded(means: dict[str, float]) -> dict[str, float]:
    return {name: round(value, 6) for name, value in means.items()}


def breakdown_tables(found: dict) -> list[tuple[str, list[list[str]]]]:
    """``breakdowns`` as titled tables, the header first: for each field, a row per value and
    configuration, and, with answers, a row per value and answer configuration."""
    tables = []
    for name, values in found.items():
        rows = [["value", "n", "config", *COLUMNS]]
        for value, entry in values.items():
            for config, means in entry.get("configs", {}).items():
                rows.append([value, str(entry["n_queries"]), config, *(f"{means[m]:.4f}" for m in COLUMNS)])
        tables.append((f"By {name}", rows))
        answered = [entry for entry in values.values() if "answers" in entry]
        if answered:
            scores = [s for s in ANSWER_SCORES if s in next(iter(answered[0]["answers"].values()))]
            rows = [["value", "n", "answers", *scores]]
            for value, entry in values.items():
                for setting, means in entry.get("answers", {}).items():
                    cells = [f"{means[s]:.4f}" if s in means else "-" for s in scores]
                    rows.append([value, str(entry["n_answers"]), setting, *cells])
            tables.append((f"Answers by {name}", rows))
    return tables


def sweeps(results: Sequence[Result]) -> dict[str, dict[str, list[Result]]]:
    """The settings swept: for ``alpha`` the ``rsf:ALPHA`` configurations (``--sweep``), for each
    ``/NAME:VALUE`` setting (``--vary``) the configurations it was set on; each setting's results
    grouped by the configuration without it (its name), in the order of the setting's values, the
    groups of two values or more."""
    found: dict[str, dict[str, list[Result]]] = {}
    for result in results:
        named, plus, reranked = result.config.name.partition("+")  # CONFIG+RERANKER[/within]
        parts = named.split("/")
        for i, part in enumerate(parts):
            name, colon, _ = part.partition(":")
            if i == 0 and colon and name == "rsf":  # rsf:ALPHA
                name, others = "alpha", ["rsf", *parts[1:]]
            elif i > 0 and colon and name in SETTINGS:
                others = parts[:i] + parts[i + 1 :]
            else:
                continue
            found.setdefault(name, {}).setdefault("/".join(others) + plus + reranked, []).append(result)
    swept = {}
    for name, groups in found.items():
        field = SETTINGS[name][0]
        kept = {
            base: sorted(group, key=lambda r: getattr(r.config.request, field))
            for base, group in groups.items()
            if len(group) >= 2
        }
        if kept:
            swept[name] = kept
    return swept


def write(
    out: Path,
    dataset_name: str,
    results: Sequence[Result],
    curves: dict[str, list[float]],
    n_pages: int,
    compare_at: str = "success@5",
    primary: str = "ndcg@10",
    answers: Sequence[AnswerResult] = (),
    by: dict | None = None,
) -> dict[str, Path]:
    """Write report.md, report.html, summary.json, the plots and runs/*.trec into ``out``; with
    ``answers``, their table and plot too; with ``by`` (``breakdowns``), its tables."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    for result in results:
        write_trec(out / "runs" / run_filename(result.config.name), result.run, run_tag(result.config.name))
    summaries = [result.summary(n_pages) for result in results]
    pairs = comparisons(results, compare_at, primary)
    top = best(results, primary)
    context = {
        "dataset": dataset_name,
        "date": date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
        "n_queries": summaries[0]["n_queries"],
        "n_pages": n_pages,
        "best": top.config.name,
        "primary": primary,
    }
    answered = [result.summary() for result in answers]
    extra = {"answers": answered} if answered else {}
    if by:
        extra["breakdowns"] = by
    (out / "summary.json").write_text(
        json.dumps({**context, "results": summaries, "comparisons": pairs, **extra}, indent=1) + "\n"
    )
    files = {"markdown": out / "report.md", "html": out / "report.html", "json": out / "summary.json"}
    plots = _plots(out, results, curves)
    if answered:
        plots["answers"] = _answer_plot(out, answered)
    files.update(plots)
    table = answer_table(answered)
    tables = breakdown_tables(by or {})
    (out / "report.md").write_text(_markdown(context, summaries, pairs, plots, table, tables))
    (out / "report.html").write_text(_html(context, summaries, pairs, plots, table, tables))
    return files


def answer_table(answered: Sequence[dict], compact: bool = False) -> list[list[str]]:
    """The answer configurations as table rows, the header first: the settings that vary (context
    and k always), the scores, the judge's mean grade (when judged), tokens in and out (sum and
    mean), seconds, and the failure decomposition (gold page in the context or not x answer right
    or not). ``compact``: relaxed accuracy, containment and the judge only, for a terminal."""
    if not answered:
        return []
    keys = ["context", "k"] + [
        key
        for key in ("compression", "inputs", "strategy", "max_searches")
        if len({str(row.get(key)) for row in answered}) > 1 or (key == "max_searches" and key in answered[0])
    ]
    shown = COMPACT_SCORES if compact else ANSWER_SCORES
    scores = [name for name in shown if name in answered[0]]
    parts = ("g+", "g-", "m+", "m-") if compact else DECOMPOSITION
    header = [*keys, "n", *scores, "in (sum/mean)", "out (sum/mean)", "s", *parts]
    rows = [header]
    for row in answered:
        cells = [f"{row[key]:g}" if isinstance(row[key], float) else str(row[key]) for key in keys]
        cells += [str(row["n_answers"]), *(f"{row[name]:.4f}" for name in scores)]
        cells += [f"{row[key]} / {row[key + '_mean']:g}" for key in ("tokens_in", "tokens_out")]
        cells += [f"{row['seconds']:.1f}", *(str(row["decomposition"][key]) for key in DECOMPOSITION)]
        rows.append(cells)
    return rows


ANSWER_SCORES = (
    "tatqa_em",
    "tatqa_f1",
    "exact_match",
    "f1",
    "relaxed_accuracy",
    "contains",
    "cites_relevant",
    "judge",
    "f_score",
    "declined",
    "right_given_attempted",
    "declined_unanswerable",
    "grounding_f1",
    "grounding_iou",
    "grounding_page_f1",
)
COMPACT_SCORES = (
    "tatqa_em",
    "tatqa_f1",
    "relaxed_accuracy",
    "contains",
    "judge",
    "declined",
    "declined_unanswerable",
)
ANSWER_NOTE = (
    "gold_right / gold_wrong: a gold page was in the context and the answer was right / wrong (the "
    "reader's misses); missed_right / missed_wrong: none was (missed_wrong: the retrieval's misses). "
    "Right: the judge's top grade when judged, else the dataset's own metric's (tatqa_em: TAT-QA's "
    "exact match, tatqa_f1 its numeracy-aware F1), else relaxed accuracy or containment. declined: the "
    "share of questions the reader declined to answer (not attempted, as SimpleQA counts them: "
    "neither right nor wrong); right_given_attempted: the share right of those it answered; "
    "declined_unanswerable: the share of the dataset's unanswerable questions it declined."
)


def _headline(context: dict) -> str:
    return (
        f"{context['n_queries']} queries over {context['n_pages']} pages; {context['machine']};"
        f" {context['date']}. Best by {context['primary']}: {context['best']}."
    )


def _cells(summary: dict, summaries: list[dict], mark: str = "**{}**") -> list[str]:
    """The metric cells of one row, the best value of each column marked."""
    cells = []
    for name in COLUMNS:
        text = f"{summary[name]:.4f}"
        top = max(f"{other[name]:.4f}" for other in summaries)
        cells.append(mark.format(text) if len(summaries) > 1 and text == top else text)
    return cells + [f"{summary['latency_ms_p50']:.1f}"]


def _pair_line(pair: dict) -> tuple[str, ...]:
    return (
        pair["a"],
        pair["b"],
        str(len(pair["only_a"])),
        str(len(pair["only_b"])),
        str(pair["both"]),
        str(pair["neither"]),
    )


PAIR_HEADER = ("A", "B", "only A", "only B", "both", "neither")


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines: the header, its rule, a line a row."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _markdown(
    context: dict,
    summaries: list[dict],
    pairs: list[dict],
    plots: dict[str, Path],
    answers: list[list[str]],
    tables: list[tuple[str, list[list[str]]]],
) -> str:
    lines = [f"# Evaluation: {context['dataset']}", "", _headline(context), ""]
    lines += _markdown_table(
        ["config", *COLUMNS, "p50 ms"], [[s["config"], *_cells(s, summaries)] for s in summaries]
    )
    lines += ["", "The best value of each column is in bold."]
    if pairs:
        lines += ["", f"## Queries only one configuration gets right ({pairs[0]['metric']})", ""]
        lines += _markdown_table(list(PAIR_HEADER), [_pair_line(pair) for pair in pairs])
    if answers:
        lines += ["", "## Answers", "", *_markdown_table(answers[0], answers[1:]), "", ANSWER_NOTE]
    for title, (header, *rows) in tables:
        lines += ["", f"## {title}", "", *_markdown_table(header, rows)]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{name}]({path.name})" for name, path in plots.items()]
    return "\n".join(lines) + "\n"


def _html(
    context: dict,
    summaries: list[dict],
    pairs: list[dict],
    plots: dict[str, Path],
    answers: list[list[str]],
    tables: list[tuple[str, list[list[str]]]],
) -> str:
    def row(cells, tag="td"):
        return "<tr>" + "".join(f"<{tag}>{html.escape(str(c))}</{tag}>" for c in cells) + "</tr>"

    parts = [
        "<!doctype html><meta charset='utf-8'>",
        f"<title>Evaluation: {html.escape(context['dataset'])}</title>",
        "<style>body{font:14px system-ui;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child{text-align:left}"
        "img{max-width:48%;margin:1em 1em 0 0}</style>",
        f"<h1>Evaluation: {html.escape(context['dataset'])}</h1><p>{html.escape(_headline(context))}</p>",
        "<table>",
        row(["config", *COLUMNS, "p50 ms"], "th"),
        *(row([s["config"], *_cells(s, summaries, "{}")]) for s in summaries),
        "</table>",
    ]
    if pairs:
        parts += [f"<h2>Queries only one configuration gets right ({html.escape(pairs[0]['metric'])})</h2>"]
        parts += ["<table>", row(PAIR_HEADER, "th"), *(row(_pair_line(pair)) for pair in pairs), "</table>"]
        for pair in pairs:
            for side, other in (("only_a", "a"), ("only_b", "b")):
                if pair[side]:
                    parts.append(
                        f"<p>Only {html.escape(pair[other])} (vs {html.escape(pair['b' if other == 'a' else 'a'])}):"
                        f" {html.escape(', '.join(pair[side]))}</p>"
                    )
    if answers:
        parts += ["<h2>Answers</h2><table>", row(answers[0], "th"), *(row(cells) for cells in answers[1:])]
        parts += ["</table>", f"<p>{html.escape(ANSWER_NOTE)}</p>"]
    for title, (header, *rows) in tables:
        parts += [f"<h2>{html.escape(title)}</h2><table>", row(header, "th"), *(row(cells) for cells in rows)]
        parts += ["</table>"]
    parts += [
        f"<img src='{html.escape(path.name)}' alt='{html.escape(name)}'>" for name, path in plots.items()
    ]
    return "\n".join(parts) + "\n"


def _plots(out: Path, results: Sequence[Result], curves: dict[str, list[float]]) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    def save(name: str, series: dict[str, tuple[list[float], list[float]]], marker: str, **labels) -> None:
        figure, axes = plt.subplots(figsize=(6, 4), dpi=100)
        for label, (xs, ys) in series.items():
            axes.plot(xs, ys, marker=marker, label=label)
        axes.set(ylim=(0, 1), **labels)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
        figure.tight_layout()
        plots[name] = out / f"{name}.png"
        figure.savefig(plots[name])
        plt.close(figure)

    plots: dict[str, Path] = {}
    curves_xy = {name: (list(range(1, len(curve) + 1)), curve) for name, curve in curves.items()}
    save("recall_at_k", curves_xy, ".", xlabel="k", ylabel="Recall@k", title="Recall at k")
    for name, groups in sweeps(results).items():
        field = SETTINGS[name][0]
        # one configuration swept: four metrics; several: Recall@5 of each
        metrics = ("recall@1", "recall@5", "recall@20", "ndcg@10") if len(groups) == 1 else ("recall@5",)
        series = {
            metric if len(groups) == 1 else f"{base} {metric}": (
                [getattr(r.config.request, field) for r in group],
                [r.means[metric] for r in group],
            )
            for base, group in groups.items()
            for metric in metrics
        }
        labels = SWEEP_LABELS.get(name, (name, f"{name} sweep"))
        save(f"{name}_sweep", series, "o", xlabel=labels[0], ylabel="score", title=labels[1])
    return plots


def _answer_plot(out: Path, answered: Sequence[dict]) -> Path:
    """Relaxed accuracy (solid) and containment (dashed) against k, a line per configuration of
    the other settings (the no-retrieval context at k = 0)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    series: dict[str, list[dict]] = {}
    for row in answered:
        others = [row["context"], f"c={row['compression']:g}", row["inputs"], row["strategy"]]
        others += [f"searches={row['max_searches']}"] if "max_searches" in row else []
        series.setdefault(" ".join(others), []).append(row)
    figure, axes = plt.subplots(figsize=(6, 4), dpi=100)
    for label, rows in series.items():
        rows = sorted(rows, key=lambda row: row["k"])
        ks = [row["k"] for row in rows]
        line = axes.plot(ks, [row["relaxed_accuracy"] for row in rows], marker="o", label=label)[0]
        axes.plot(ks, [row["contains"] for row in rows], marker="o", linestyle="--", color=line.get_color())
    axes.set(
        ylim=(0, 1),
        xlabel="k (tiles given)",
        ylabel="score",
        title="Answers: relaxed accuracy, contains (--)",
    )
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    path = out / "answers.png"
    figure.savefig(path)
    plt.close(figure)
    return path
