"""Robustness on the badpdfs corpus (issue 2): one `pagesight ingest` run over all 636 files.

    python benchmarks/badpdfs.py --index DIR [--data ../shared/data/badpdfs] [--no-dense]

Seeds a fresh index with the bundled sample corpus, runs the CLI over the damaged, encrypted and odd
PDFs, and checks what the issue asks: the run ends (no crash, no hang), every failure is one
`<path>: <reason>` line on stderr, every file is either indexed or reported, and the documents
indexed before the run are all still there and searchable. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pagesight import Index
from pagesight.render.sources import SUFFIXES

ROOT = Path(__file__).resolve().parents[1]


def _ranking(hits) -> list[tuple[str, int, int]]:
    return [(hit.doc_id, hit.page, hit.tile) for hit in hits]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, type=Path, help="created afresh (removed first)")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "badpdfs")
    parser.add_argument("--no-dense", action="store_true", help="lexical-only index")
    args = parser.parse_args()
    shutil.rmtree(args.index, ignore_errors=True)
    cli = [sys.executable, "-m", "pagesight", "ingest", "--index", str(args.index), "--json"]
    if args.no_dense:
        cli.append("--no-dense")

    seed = subprocess.run([*cli, str(ROOT / "samples" / "corpus")], capture_output=True, text=True)
    if seed.returncode != 0:
        sys.exit(f"seeding the index failed:\n{seed.stderr}")
    before = Index.open(args.index, create=False)
    seeded = {row.id: row.n_pages for row in before.catalog.documents()}
    probes = {doc_id: before.search(doc_id.replace("-", " "), k=50, doc_ids=[doc_id]) for doc_id in seeded}
    before.close()

    files = sorted(path for path in args.data.rglob("*") if path.suffix.lower() in SUFFIXES)
    start = time.perf_counter()
    run = subprocess.run([*cli, str(args.data)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    children = resource.getrusage(resource.RUSAGE_CHILDREN)

    failure_line = re.compile(rf"^({re.escape(str(args.data))}/\S.*?): (\S.*)$")
    progress_line = re.compile(r"^ingest: \d+/\d+ files")  # every 10 s where stderr is no terminal
    failures: dict[str, str] = {}
    notes: dict[str, str] = {}
    stray_lines = []
    for line in run.stderr.splitlines():
        match = failure_line.match(line)
        if match and match.group(2).startswith("note: "):  # indexed, with a caveat
            notes[match.group(1)] = match.group(2).removeprefix("note: ")
        elif match:
            failures[match.group(1)] = match.group(2)
        elif line.strip() and not progress_line.match(line):
            stray_lines.append(line)

    after = Index.open(args.index, create=False)
    documents = {row.id: row.n_pages for row in after.catalog.documents()}
    indexed = {str(path) for path in files if path.stem in documents}
    unaccounted = [str(path) for path in files if str(path) not in indexed and str(path) not in failures]
    seeded_kept = all(
        doc_id in documents
        and documents[doc_id] == pages
        and _ranking(after.search(doc_id.replace("-", " "), k=50, doc_ids=[doc_id]))
        == _ranking(probes[doc_id])
        for doc_id, pages in seeded.items()
    )
    reasons = collections.Counter(re.sub(r"\(.*", "(...)", reason) for reason in failures.values())
    print(
        json.dumps(
            {
                "files": len(files),
                "exit_code": run.returncode,
                "indexed": len(indexed),
                "failed": len(failures),
                "noted": len(notes),
                "unaccounted": unaccounted,
                "stray_stderr_lines": stray_lines[:20],
                "seeded_documents_kept": seeded_kept,
                "pages_indexed": sum(documents[Path(path).stem] for path in indexed),
                "wall_s": round(wall, 1),
                "peak_rss_mb_largest_process": round(children.ru_maxrss / 1024),
                "failure_reasons": dict(reasons.most_common()),
                "note_reasons": dict(
                    collections.Counter(
                        re.sub(r"\(.*", "(...)", note) for note in notes.values()
                    ).most_common()
                ),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
