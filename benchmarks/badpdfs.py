"""Robustness on the badpdfs corpus (issue 2): one `pagesight ingest` run over all 636 files.

    python -m benchmarks.badpdfs --index DIR [--data ../shared/data/badpdfs] [--no-dense]
    python -m benchmarks.badpdfs --tiny      # a toy index and a few files damaged here, lexical

Seeds a fresh index with the bundled sample corpus (``--tiny``: typeset tables), runs the CLI over
the damaged, encrypted and odd PDFs, and checks what the issue asks: the run ends (no crash, no
hang), every failure is one `<path>: <reason>` line on stderr, every file is either indexed or
reported, and the documents indexed before the run are all still there and searchable.
"""

from __future__ import annotations

import collections
import re
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import harness
from pagesight import Index
from pagesight.render.sources import SUFFIXES


def _ranking(hits) -> list[tuple[str, int, int]]:
    return [(hit.doc_id, hit.page, hit.tile) for hit in hits]


def damaged(folder: Path, good: Path) -> Path:
    """A few broken files made from ``good`` (a PDF) in ``folder``: cut short, emptied, not a PDF
    at all, and the good one."""
    folder.mkdir(parents=True)
    whole = good.read_bytes()
    (folder / "cut-short.pdf").write_bytes(whole[: len(whole) // 2])
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "not-a-pdf.pdf").write_bytes(b"<html><body>a web page saved as .pdf</body></html>")
    shutil.copy(good, folder / "whole.pdf")
    return folder


def measure(index: Path, data: Path, seed: Path, dense: bool) -> dict:
    shutil.rmtree(index, ignore_errors=True)
    cli = [*harness.PYTHON_M, "pagesight", "ingest", "--index", str(index), "--json"]
    if not dense:
        cli.append("--no-dense")

    seeding = subprocess.run([*cli, str(seed)], capture_output=True, text=True)
    if seeding.returncode != 0:
        raise SystemExit(f"seeding the index failed:\n{seeding.stderr}")
    before = Index.open(index, create=False)
    seeded = {row.id: row.n_pages for row in before.catalog.documents()}
    probes = {doc_id: before.search(doc_id.replace("-", " "), k=50, doc_ids=[doc_id]) for doc_id in seeded}
    before.close()

    files = sorted(path for path in data.rglob("*") if path.suffix.lower() in SUFFIXES)
    start = time.perf_counter()
    run = subprocess.run([*cli, str(data)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    children = resource.getrusage(resource.RUSAGE_CHILDREN)

    failure_line = re.compile(rf"^({re.escape(str(data))}/\S.*?): (\S.*)$")
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

    after = Index.open(index, create=False)
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
    after.close()
    reasons = collections.Counter(re.sub(r"\(.*", "(...)", reason) for reason in failures.values())
    return {
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
            collections.Counter(re.sub(r"\(.*", "(...)", note) for note in notes.values()).most_common()
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--index", type=Path, help="created afresh (removed first)")
    parser.add_argument("--data", type=Path, default=harness.SHARED / "badpdfs")
    parser.add_argument("--no-dense", action="store_true", help="lexical-only index")
    args = harness.start(parser, argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            seed = harness.toy_dataset(Path(tmp) / "seed", tables=2).documents
            data = damaged(Path(tmp) / "damaged", next(seed.glob("*.pdf")))
            result = measure(Path(tmp) / "index", data, seed, dense=False)
        elif args.index:
            result = measure(args.index, args.data, harness.ROOT / "samples" / "corpus", not args.no_dense)
        else:
            parser.error("--index is needed (or --tiny)")
    harness.finish(args, __spec__.name, result)


if __name__ == "__main__":
    main()
