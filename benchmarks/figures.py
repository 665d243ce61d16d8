"""BENCHMARKS.md's "Current figures": one table made from the benchmarks' JSON, regenerated when a
figure moves.

    python -m benchmarks.figures             # rewrite the table in BENCHMARKS.md
    python -m benchmarks.figures --check     # exit 1 when the table is not the one the JSON makes

A run whose figures belong in the table is written with ``--json benchmarks/results/NAME.json``
(the harness's record: command, commit, machine, load, date). ``FIGURES`` names, for each result
file, the figures shown and where they sit in its JSON. A figure measured before the harness and
kept in the notebook below the table is in ``benchmarks/results/notebook.json`` with the section
that holds it, its date, machine and command as the notebook gives them; its row says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "BENCHMARKS.md"
START, END = "<!-- current figures: python -m benchmarks.figures -->", "<!-- end of the current figures -->"

# result file -> (figure, its path in the JSON: keys and list positions joined by "/", unit)
FIGURES: dict[str, list[tuple[str, str, str]]] = {
    "scale-100k": [
        ("100,000 tiles: add a 2-page PDF (whole process)", "add_seconds", "s"),
        ("100,000 tiles: delete it (whole process)", "delete_seconds", "s"),
        ("100,000 tiles: lexical search p50", "lexical_p50_ms", "ms"),
        ("100,000 tiles: hybrid search p50", "hybrid_p50_ms", "ms"),
        ("100,000 tiles: filtered (1 %) search p50", "filtered_p50_ms", "ms"),
        ("100,000 tiles: cold search process", "cold_search_seconds", "s"),
        ("100,000 tiles: server RSS after 100 searches", "server_rss_mb", "MB"),
        ("100,000 tiles: disk a tile", "disk_bytes_per_tile", "B"),
    ],
    "irpapers-lexical": [
        ("IRPAPERS lexical ingestion (155 PDFs, whole process)", "ingest/pages_per_s", "pages/s"),
        ("IRPAPERS lexical Recall@5 (180 questions, by page)", "configs/0/recall@5", ""),
        ("IRPAPERS lexical nDCG@10", "configs/0/ndcg@10", ""),
    ],
    "irpapers-hybrid": [
        ("IRPAPERS default index ingestion (lexical + minilm-static)", "ingest/pages_per_s", "pages/s"),
        ("IRPAPERS hybrid (default search) Recall@5", "configs/0/recall@5", ""),
        ("IRPAPERS hybrid nDCG@10", "configs/0/ndcg@10", ""),
        ("IRPAPERS hybrid search p50 (warm, in process)", "configs/0/latency_ms_p50", "ms"),
    ],
    "served-colqwen3": [
        (
            "Visual ingestion through a vLLM endpoint (the double), over in-process",
            "endpoint_over_in_process",
            "",
        ),
        (
            "serve --workers 2, visual search (tiny ColQwen3): one client p50",
            "search/in_process/one_client/p50_ms",
            "ms",
        ),
        (
            "serve --workers 2, 16 clients' visual searches at once: p50",
            "search/in_process/16_clients/p50_ms",
            "ms",
        ),
        (
            "serve --workers 2, 16 clients' visual searches at once: p99",
            "search/in_process/16_clients/p99_ms",
            "ms",
        ),
        (
            "serve --workers 2, 16 clients' floor (their searches' CPU over the cores)",
            "search/in_process/p50_floor_ms",
            "ms",
        ),
    ],
}


def value_at(result: dict, path: str):
    found = result
    for key in path.split("/"):
        found = found[int(key)] if isinstance(found, list) else found[key]
    return found


def shown(value, unit: str) -> str:
    if isinstance(value, float) and unit == "" and value <= 1:
        text = f"{value:.3f}"
    elif isinstance(value, float) and value < 1000:
        text = f"{value:.4g}"
    else:
        text = f"{value:,.0f}"
    return f"{text} {unit}".strip()


def machine(run: dict) -> str:
    """The machine's cores and its 1-minute load at the run's start and end."""
    return f"{run['machine']['cpus']} cores, load {run['load_start'][0]}-{run['load_end'][0]}"


def rows() -> list[list[str]]:
    made = []
    for name, figures in FIGURES.items():
        path = RESULTS / f"{name}.json"
        if not path.exists():
            continue
        result = json.loads(path.read_text())
        run = result["run"]
        commit = (run["commit"] or "")[:7] + (" (changed)" if run.get("changed") else "")
        for figure, where, unit in figures:
            made.append(
                [figure, shown(value_at(result, where), unit), machine(run), run["machine"]["date"], commit,
                 f"`{run['command']}`"]
            )  # fmt: skip
    notebook = RESULTS / "notebook.json"
    for entry in json.loads(notebook.read_text()) if notebook.exists() else []:
        made.append(
            [entry["figure"], entry["value"], entry["machine"], entry["date"],
             f"notebook: [{entry['section']}](#{anchor(entry['section'])})", f"`{entry['command']}`"]
        )  # fmt: skip
    return made


def anchor(title: str) -> str:
    """The id MkDocs gives the heading ``title`` (its toc extension's slug)."""
    import re
    import unicodedata

    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def table() -> str:
    lines = ["| figure | value | machine | date | commit | command |", "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows()]
    return "\n".join([START, *lines, END])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="only say whether the table is current")
    args = parser.parse_args(argv)
    page = PAGE.read_text()
    if START not in page or END not in page:
        sys.exit(f"{PAGE}: no {START} ... {END} to fill")
    before, rest = page.split(START, 1)
    _, after = rest.split(END, 1)
    made = before + table() + after
    if args.check:
        sys.exit(0 if made == page else f"{PAGE}: the current figures differ from benchmarks/results/")
    PAGE.write_text(made)


if __name__ == "__main__":
    main()
