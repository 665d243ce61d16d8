"""Load on `pagesight serve` over loopback (issue 16): many concurrent clients search and ask for a
bounded time, optionally while an upload is being ingested beside them.

    python -m benchmarks.serve --index DIR [--clients 32] [--seconds 60] [--ask-share 0.25]
                               [--mode lexical] [--no-ranker] [--ingest PATH ...] [--json out.json]
    python -m benchmarks.serve --tiny        # 2 clients for 2 s on a toy index, one upload beside

The server is a `pagesight serve` subprocess (so the clients' event loop does not share its GIL),
with an API key, over DIR; with --ingest it serves a copy of DIR (unless --in-place), and the
files under PATH are uploaded through POST /api/documents (20 a request, one ingestion job each)
once the load has started. Each client loops over the IRPAPERS questions: a search
(GET /api/search, k 5) or, with probability --ask-share, an answer (POST /api/ask, extractive).
Prints a table (on stderr) and one JSON object: requests/s, p50/p95/p99 latency and errors per
endpoint, for the whole run and for the time the ingestion was running; exits 1 when a request or
an ingestion job failed.
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks import harness
from pagesight.eval.dataset import Dataset
from pagesight.render.sources import SUFFIXES

BATCH = 20  # files per upload request (the server's limit)


@dataclass
class Sample:
    endpoint: str
    start: float
    seconds: float
    ok: bool


def start_server(index: str, key: str, readers: int, workers: int = 1) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [*harness.PYTHON_M, "pagesight", "serve", "--index", index, "--port", str(port),
               "--readers", str(readers), "--workers", str(workers), "--max-upload-mb", "2000"]  # fmt: skip
    server = subprocess.Popen(command, env={**os.environ, "PAGESIGHT_API_KEY": key})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/health").status_code == 200:
                return server, url
        except httpx.TransportError:
            pass
        if server.poll() is not None:
            raise SystemExit(f"pagesight serve exited with {server.returncode}")
        time.sleep(0.2)
    server.terminate()
    raise SystemExit("pagesight serve did not answer within 120 s")


def upload_files(paths: list[Path]) -> list[Path]:
    files = []
    for path in paths:
        found = (
            sorted(p for p in path.rglob("*") if p.suffix.lower() in SUFFIXES) if path.is_dir() else [path]
        )
        files.extend(found)
    return files


async def client_loop(client, questions, options, deadline, ask_share, rng, samples) -> None:
    while time.monotonic() < deadline:
        question = rng.choice(questions)
        if rng.random() < ask_share:
            endpoint, request = "ask", client.post("/api/ask", json={"question": question, **options})
        else:
            params = {
                "q": question,
                "k": options["k"],
                **({"mode": options["mode"]} if options["mode"] else {}),
                **({} if options["ranker"] else {"ranker": "false"}),
            }
            endpoint, request = "search", client.get("/api/search", params=params)
        start = time.monotonic()
        try:
            ok = (await request).status_code == 200
        except httpx.HTTPError:
            ok = False
        samples.append(Sample(endpoint, start, time.monotonic() - start, ok))


async def ingest(client, files: list[Path]) -> dict:
    """Upload ``files`` in batches, follow every job to its end; the window it ran and the outcome."""
    start = time.monotonic()
    jobs = []
    for first in range(0, len(files), BATCH):
        batch = [("files", (path.name, path.read_bytes())) for path in files[first : first + BATCH]]
        response = await client.post("/api/documents", files=batch, timeout=600)
        if response.status_code != 202:
            return {
                "error": response.json().get("error", response.text),
                "start": start,
                "end": time.monotonic(),
            }
        jobs.append(response.json()["job"])
    done = []
    for job in jobs:
        while job["state"] in ("queued", "running"):
            await asyncio.sleep(0.5)
            job = (await client.get(f"/api/jobs/{job['id']}")).json()
        done.append(job)
    return {
        "start": start,
        "end": time.monotonic(),
        "files": len(files),
        "added": sum(len(job["added"]) + len(job["replaced"]) for job in done),
        "failed": sum(len(job["failed"]) for job in done),
        "pages": sum(job["pages"] for job in done),
        "job_errors": [job["error"] for job in done if job["error"]],
    }


def summarize(samples: list[Sample], seconds: float) -> dict:
    latencies = [s.seconds for s in samples if s.ok]
    return {
        "requests": len(samples),
        "errors": sum(not s.ok for s in samples),
        "rps": round(len(samples) / seconds, 1) if seconds > 0 else 0.0,
        **(harness.latency(latencies) if latencies else {"p50_ms": None, "p95_ms": None, "p99_ms": None}),
    }


async def run(args, url: str, key: str, questions: list[str], files: list[Path]) -> dict:
    options = {"k": args.k, "mode": args.mode, "ranker": args.ranker}
    limits = httpx.Limits(max_connections=args.clients + 2)
    async with httpx.AsyncClient(
        base_url=url, headers={"X-API-Key": key}, timeout=120, limits=limits
    ) as client:
        for warm in ("search", "ask"):  # load the query encoder and the reader before timing
            response = await (client.post("/api/ask", json={"question": questions[0], **options}) if warm == "ask"
                              else client.get("/api/search", params={"q": questions[0], "k": args.k}))  # fmt: skip
            if response.status_code != 200:
                raise SystemExit(f"warm-up {warm} failed: {response.status_code} {response.text}")
        samples: list[Sample] = []
        start = time.monotonic()
        deadline = start + args.seconds
        rng = random.Random(0)
        loops = [
            client_loop(
                client, questions, options, deadline, args.ask_share, random.Random(rng.random()), samples
            )
            for _ in range(args.clients)
        ]
        ingesting = asyncio.ensure_future(ingest(client, files)) if files else None
        await asyncio.gather(*loops)
        elapsed = time.monotonic() - start
        ingestion = await ingesting if ingesting else None

    result = {
        "clients": args.clients,
        "workers": args.workers,
        "seconds": round(elapsed, 1),
        "mode": args.mode or "default",
        "ranker": args.ranker,
        "ask_share": args.ask_share,
        "endpoints": {
            name: summarize([s for s in samples if s.endpoint == name], elapsed) for name in ("search", "ask")
        },
    }
    if ingestion is not None:
        window = (ingestion.pop("start"), ingestion.pop("end"))
        overlap = max(0.0, min(window[1], deadline) - window[0])
        during = [s for s in samples if window[0] <= s.start <= window[1]]
        result["ingestion"] = {**ingestion, "seconds": round(window[1] - window[0], 1),
                               "finished_within_load": window[1] <= deadline}  # fmt: skip
        result["during_ingestion"] = {
            name: summarize([s for s in during if s.endpoint == name], overlap) for name in ("search", "ask")
        }
    return result


def print_table(result: dict) -> None:
    lines = [
        f"{'endpoint':<28}{'requests':>9}{'errors':>8}{'req/s':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
    ]
    for label, group in [
        ("", result["endpoints"]),
        (" (during ingestion)", result.get("during_ingestion", {})),
    ]:
        for name, s in group.items():
            cells = [
                f"{s[key]:>9}" if s[key] is not None else f"{'-':>9}"
                for key in ("p50_ms", "p95_ms", "p99_ms")
            ]
            lines.append(f"{name + label:<28}{s['requests']:>9}{s['errors']:>8}{s['rps']:>8}{''.join(cells)}")
    print("\n".join(lines), file=sys.stderr)


def measure(args, index: str, questions: list[str], files: list[Path], scratch: Path) -> dict:
    if files and not args.in_place:
        copy = str(scratch / "served")
        shutil.copytree(index, copy, ignore=shutil.ignore_patterns("write.lock"))
        index = copy
    key = secrets.token_hex(16)
    server, url = start_server(index, key, args.readers, args.workers)
    try:
        return asyncio.run(run(args, url, key, questions, files))
    finally:
        server.terminate()
        server.wait(timeout=60)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--index", help="the index folder to serve")
    parser.add_argument("--data", type=Path, default=harness.SHARED / "irpapers", help="questions from here")
    parser.add_argument("--clients", type=int, default=None, help="concurrent clients (default 32; tiny 2)")
    parser.add_argument("--seconds", type=float, default=None, help="how long they run (default 60; tiny 2)")
    parser.add_argument("--ask-share", type=float, default=0.25, help="share of requests that ask")
    parser.add_argument("--mode", choices=["lexical", "dense", "visual", "hybrid"], default=None)
    parser.add_argument("-k", dest="k", type=int, default=5)
    parser.add_argument(
        "--no-ranker", dest="ranker", action="store_false", help="hybrid: without the learned ranker"
    )
    parser.add_argument("--readers", type=int, default=4, help="the server's --readers")
    parser.add_argument("--workers", type=int, default=1, help="the server's --workers (processes)")
    parser.add_argument(
        "--ingest", type=Path, nargs="+", default=[], help="files or folders uploaded meanwhile"
    )
    parser.add_argument("--in-place", action="store_true", help="with --ingest: write into DIR, not a copy")
    args = harness.start(parser, argv)
    args.clients = args.clients or (2 if args.tiny else 32)
    args.seconds = args.seconds or (2.0 if args.tiny else 60.0)
    with tempfile.TemporaryDirectory(prefix="pagesight-serve-bench-") as scratch:
        if args.tiny:
            data = harness.toy_dataset(Path(scratch) / "data", tables=3)
            uploads = Path(scratch) / "uploads"
            uploads.mkdir()
            shutil.move(next(data.documents.glob("*.pdf")), uploads)  # served without it, uploaded meanwhile
            harness.toy_index(Path(scratch) / "index", data).close()
            index, files = str(Path(scratch) / "index"), upload_files([uploads])
        elif args.index:
            data, index, files = Dataset.load(args.data), args.index, upload_files(args.ingest)
            if args.ingest and not files:
                parser.error(
                    f"no {', '.join(sorted(SUFFIXES))} files under {', '.join(map(str, args.ingest))}"
                )
        else:
            parser.error("--index is needed (or --tiny)")
        result = measure(args, index, list(data.queries.values()), files, Path(scratch))
    print_table(result)
    harness.finish(args, __spec__.name, {"index": args.index, **result})
    errors = sum(s["errors"] for s in result["endpoints"].values())
    raise SystemExit(1 if errors or result.get("ingestion", {}).get("job_errors") else 0)


if __name__ == "__main__":
    main()
