"""A visual encoder behind an inference server, on this CPU with a tiny random-weight model (issue 62):
what the client costs beside the model.

    python -m benchmarks.served [--encoder colqwen3] [--pdfs 12] [--batch 4] [--rounds 3]
                                [--searches 48] [--clients 16] [--json out.json]
    python -m benchmarks.served --tiny     # 2 PDFs, one round, 2 clients searching twice

1. Ingestion: the same PDFs ingested with the encoder in-process and through the loopback double
   of vLLM (``tests/encode/visual/vllm_double.py``, in a process of its own, batching the requests
   that arrive together as vLLM's scheduler does), at the same ``--visual-batch``, the two
   alternated ``--rounds`` times: pages a second of the whole ingestion (rendering included).
2. Searches: ``pagesight serve --visual-endpoint`` (a process of its own) over the index built
   through the double; one client searching in visual mode ``--searches`` times one after another,
   then ``--clients`` clients at once, each as many times: latency p50 and p99 of each; then the
   same with the encoder in the server's process (``serve`` without ``--visual-endpoint``). Each
   with the CPU a search took of the server (its workers included), the double and the clients,
   and ``p50_floor_ms``: the clients' searches' CPU shared by every core of the machine, the least
   a search of theirs can take when they search at once (with one client's latency, what bounds
   the ratio of the two on this machine whatever the server does).

Three processes share the machine (the double, the server or the ingestion, the clients), so the
figures are the machine's at its load, which is printed with them.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks import harness
from benchmarks.harness import ROOT
from tests.conftest import make_pdf

QUERIES = ["quarterly revenue by region", "staff numbers", "costs fell", "outlook for next year",
           "appendix tables", "warehouse capacity", "supplier change", "annual report summary"]  # fmt: skip
KINDS = {"colqwen3": ("qwen3-vl", "ColQwen3", "ColQwen3Processor"),
         "colqwen3.5": ("qwen3.5", "ColQwen3_5", "ColQwen3_5Processor")}  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def load() -> str:
    return " ".join(f"{value:.1f}" for value in harness.load())


def wait_for(url: str, process: subprocess.Popen, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the process ended ({process.returncode})")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {seconds:.0f} s")


def corpus(folder: Path, count: int) -> list[Path]:
    """``count`` two-page PDFs of a few lines and a coloured block each."""
    folder.mkdir(parents=True)
    pdfs = []
    for number in range(count):
        lines = [QUERIES[(number + k) % len(QUERIES)] for k in range(3)]
        colour = ((number * 37 % 100) / 100, (number * 59 % 100) / 100, 0.5)
        blocks = [(72, 300, 300, 200, colour), (200, 80, 250, 400, colour[::-1])]
        pdfs.append(make_pdf(folder / f"doc{number:03d}.pdf", [lines, lines[::-1]], blocks=blocks))
    return pdfs


def ingest(index: Path, settings: dict, pdfs: list[Path], batch: int, endpoint=None) -> dict:
    from pagesight import Index

    shutil.rmtree(index, ignore_errors=True)
    start = time.perf_counter()
    with Index.open(index, settings=settings, visual_endpoint=endpoint) as opened:
        opened.device = "cpu"
        report = opened.add(pdfs, jobs=1, ocr="never", visual_batch=batch)
    seconds = time.perf_counter() - start
    assert report.ok, report.failed
    return {"pages": report.pages, "tiles": report.visual["tiles"], "seconds": round(seconds, 2),
            "pages_per_s": round(report.pages / seconds, 2), "load": load()}  # fmt: skip


def searches(url: str, clients: int, each: int) -> list[float]:
    """Latencies (ms) of ``clients`` threads each searching ``each`` times, at once."""
    latencies: list[float] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            for k in range(each):
                query = QUERIES[(number + k) % len(QUERIES)]
                start = time.perf_counter()
                answer = http.get("/api/search", params={"q": query, "mode": "visual", "k": 5})
                took = (time.perf_counter() - start) * 1000
                answer.raise_for_status()
                with lock:
                    latencies.append(took)

    threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) of process ``pid`` and of every process under it (Linux's
    /proc: a server's workers, a double's), 0 for one that has ended."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        children = " ".join(path.read_text() for path in Path(f"/proc/{pid}/task").glob("*/children"))
    except OSError:
        return 0.0
    own = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return own + sum(cpu_seconds(int(child)) for child in children.split())


def measured(url: str, clients: int, each: int, processes: dict[str, int]) -> dict:
    """``searches`` with their latencies' quantiles and each side's CPU a search (ms): the
    ``processes`` named (pid) and these clients (this process)."""
    before = {name: cpu_seconds(pid) for name, pid in processes.items()}
    own = time.process_time()
    latencies = searches(url, clients, each)
    cpu = {name: cpu_seconds(pid) - before[name] for name, pid in processes.items()}
    cpu["clients"] = time.process_time() - own
    return {
        **percentiles(latencies),
        "cpu_ms_a_search": {k: round(v * 1000 / len(latencies), 2) for k, v in cpu.items()},
    }


def percentiles(latencies: list[float]) -> dict:
    """The count and quantiles of ``latencies`` (ms)."""
    return {"n": len(latencies), **harness.latency([ms / 1000 for ms in latencies])}


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--encoder", choices=sorted(KINDS), default="colqwen3")
    parser.add_argument("--pdfs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--searches", type=int, default=48)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--workers", type=int, default=1, help="the server's processes (serve --workers)")
    parser.add_argument(
        "--whole-pages",
        action="store_true",
        help="send pages whole (the server resizes them), not at the processor's size (--visual-max-pixels)",
    )
    args = harness.start(parser, argv)
    if args.tiny:
        args.pdfs, args.rounds, args.searches, args.clients = 2, 1, 2, 2

    from pagesight.encode.visual.late_interaction import import_colpali
    from pagesight.endpoints import VisualEndpoint
    from tests.encode.visual.conftest import build_qwen

    work = Path(tempfile.mkdtemp(prefix="pagesight-served-"))
    family, model_class, processor_class = KINDS[args.encoder]
    models = import_colpali()
    folder = work / args.encoder
    build_qwen(folder, family, getattr(models, model_class), getattr(models, processor_class))
    pdfs = corpus(work / "pdfs", args.pdfs)
    settings = {"dense_model": None, "visual_encoder": args.encoder, "visual_model": str(folder)}

    port = free_port()
    double = subprocess.Popen(
        [sys.executable, "-m", "tests.encode.visual.vllm_double", f"{folder}={args.encoder}:{folder}",
         "--port", str(port)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"},
    )  # fmt: skip
    server = None
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(f"{url}/v1/models", double)
        # the server processor's pixel budget, which an operator reads in the checkpoint's processor config
        processor = json.loads((folder / "processor_config.json").read_text())["image_processor"]
        budget = None if args.whole_pages else int(processor["size"]["longest_edge"])
        endpoint = VisualEndpoint(url, max_pixels=budget)
        ingestion: dict[str, list] = {"in_process": [], "endpoint": []}
        ingest(work / "warm", settings, pdfs[:2], args.batch)  # the model's first load and torch's warm-up
        for _ in range(args.rounds):
            ingestion["in_process"].append(ingest(work / "here", settings, pdfs, args.batch))
            ingestion["endpoint"].append(ingest(work / "served", settings, pdfs, args.batch, endpoint))
        rates = {
            kind: statistics.median(run["pages_per_s"] for run in runs) for kind, runs in ingestion.items()
        }

        search = {}
        sized = [] if budget is None else ["--visual-max-pixels", str(budget)]
        for kind, flags in (
            ("endpoint", ["--visual-endpoint", url, *sized]),
            ("in_process", ["--device", "cpu"]),
        ):
            serve_port = free_port()
            command = [sys.executable, "-m", "pagesight", "serve", "--index", str(work / "served"),
                       "--port", str(serve_port), "--workers", str(args.workers), *flags]  # fmt: skip
            server = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
            served = f"http://127.0.0.1:{serve_port}"
            wait_for(f"{served}/api/status", server)
            searches(served, 4, 4)  # warm-up
            before = load()
            processes = {"server": server.pid, **({"double": double.pid} if kind == "endpoint" else {})}
            one = measured(served, 1, args.searches, processes)
            many = measured(served, args.clients, args.searches, processes)
            cpu = sum(many["cpu_ms_a_search"].values())
            search[kind] = {
                "one_client": one,
                f"{args.clients}_clients": many,
                "load": f"{before} / {load()}",
                "p99_ratio": round(many["p99_ms"] / one["p99_ms"], 2),
                # the least a search of the many can take: their CPU shared by every core
                "p50_floor_ms": round(args.clients * cpu / (os.cpu_count() or 1), 1),
            }
            server.terminate()
            server.wait(timeout=30)
            server = None
        result = {
            "encoder": args.encoder,
            "batch": args.batch,
            "max_pixels_sent": budget,
            "workers": args.workers,
            "ingestion": ingestion,
            "pages_per_s_median": rates,
            "endpoint_over_in_process": round(rates["endpoint"] / rates["in_process"], 3),
            "search": search,
        }
    finally:
        for process in (server, double):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    harness.finish(args, __spec__.name, result)


if __name__ == "__main__":
    main()
