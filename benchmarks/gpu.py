"""The pixel path on one accelerator (issue 53), in one run on the same pages, as one JSON object.

    python -m benchmarks.gpu --pdfs DIR [--device cuda] [--models colqwen2.5,colpali,dse,reader]
                             [--batches 4,8,16,32] [--clients 16] [--json out.json]
    python -m benchmarks.gpu --tiny          # the same code at toy size on the CPU

Models are built with random weights at the public checkpoints' sizes (``gpu_models.py``: no
download; times and memory are those of the trained models, rankings and answers are not). For each
visual model (ColQwen2.5, ColPali, DSE):

- ``ingest``: ``Index.add`` (what ``pagesight ingest`` runs) of the PDFs into a new index with that
  encoder and no dense model: pages/s whole (the model loaded first, and apart: ``load_s``), tiles/s
  of the encoder calls alone (``encode_only_tiles_per_s``), the devices' idle share between calls,
  the batch it chose; text layers only (``ocr="never"``), so OCR does not stand for the encoder;
- ``by_hand`` (the colpali-engine models): colpali-engine's processor and model in a plain loop
  (``torch.no_grad``, the device's dtype) over the same tiles at each batch, and its best (ColPali's
  LM head tied as pagesight ties it; its logits computed for every token, as colpali-engine's
  forward does, where pagesight asks for one position's);
- ``encoder_api``: pagesight's ``encode_images`` over the same tiles at each batch;
- ``search``: visual and hybrid search latency from one client in the process, and, for the first
  model, from ``--clients`` clients at once through ``pagesight serve`` (loopback HTTP).

Then the reader (Qwen2.5-VL-3B) answers over the ColQwen2.5 index: prefill (one token) and decode
(tokens/s). Each step carries the GPU's busy share and the card's memory while it ran (nvidia-smi,
sampled every 0.5 s, when present) and the process's peak memory (host, and CUDA allocated).
``ratio``: pagesight's ingestion (whole, the model loaded) over the best by-hand loop, tiles a
second on the same tiles (the issue's 0.29x: 3.02 pages/s against 10.3).
"""

from __future__ import annotations

import asyncio
import resource
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import traceback
from pathlib import Path

from benchmarks import gpu_models, harness

VISUAL = ("colqwen2.5", "colpali", "dse")
BY_HAND = {"colqwen2.5": ("ColQwen2_5", "ColQwen2_5_Processor"), "colpali": ("ColPali", "ColPaliProcessor")}
QUESTIONS = [
    "What does the report say about revenue growth?",
    "How is retrieval quality measured?",
    "Which table lists the costs?",
    "What is shown in the first figure?",
    "How many staff are mentioned?",
    "What does the memo ask for?",
]


class Sampler:
    """nvidia-smi's GPU utilisation and memory every 0.5 s, in a thread; nothing without it."""

    def __init__(self):
        self.samples: list[tuple[float, float, float]] = []  # (time, busy %, MiB used)
        self.process = None
        if shutil.which("nvidia-smi"):
            self.process = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits",
                 "-lms", "500"], stdout=subprocess.PIPE, text=True)  # fmt: skip
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                busy, used = (float(part) for part in line.split(",")[:2])
            except ValueError:
                continue
            self.samples.append((time.time(), busy, used))

    def between(self, start: float, end: float) -> dict:
        found = [(busy, used) for when, busy, used in self.samples if start <= when <= end]
        if not found:
            return {}
        return {"gpu_busy": round(statistics.mean(b for b, _ in found) / 100, 3),
                "card_peak_gib": round(max(u for _, u in found) / 1024, 2), "samples": len(found)}  # fmt: skip

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()


def memory() -> dict:
    """The process's peak memory so far: host (max RSS) and, on CUDA, what torch allocated."""
    import torch

    found = {"host_peak_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}
    if torch.cuda.is_available():
        found["cuda_peak_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        torch.cuda.reset_peak_memory_stats()
    return found


def step(sampler: Sampler, function, *args) -> dict:
    """``function(*args)``'s result with its wall time, the GPU while it ran and peak memory; an
    error becomes the step's result, so one failing step leaves the others measured."""
    start = time.time()
    try:
        result = function(*args)
    except Exception as exc:
        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:400]}
    return {
        **result,
        "step_s": round(time.time() - start, 2),
        **sampler.between(start, time.time()),
        **memory(),
    }


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def tiles_of(pdfs: list[Path]) -> list:
    """Every tile image ingestion encodes of ``pdfs`` (read and cut as the workers do, text layer only)."""
    from pagesight.ingest.extract import extract
    from pagesight.ingest.options import TextOptions
    from pagesight.ingest.visual import tile_images
    from pagesight.settings import Settings

    settings, images = Settings(dense_model=None), []
    for path in pdfs:
        document = extract(str(path), path.stem, None, settings, TextOptions(ocr="never"))
        images += list(tile_images(document, settings).values())
    return images


def ingest(name: str, folder: Path, pdfs: list[Path], where: Path, device: str, batch: int | None) -> dict:
    from pagesight import Index

    settings = {"dense_model": None, "visual_encoder": name, "visual_model": str(folder)}
    index = Index.open(where, settings=settings, device=device)
    start = time.perf_counter()
    index.visual_encoder()
    loaded = time.perf_counter() - start
    report = index.add(pdfs, ocr="never", visual_batch=batch)
    wall = time.perf_counter() - start
    index.close()
    visual = report.visual or {}
    return {
        "pages": report.pages, "failed": len(report.failed), "load_s": round(loaded, 2),
        "wall_s": round(wall, 2), "pages_per_s": round(report.pages / wall, 2),
        "pages_per_s_loaded": round(report.pages / (wall - loaded), 2),
        "tiles_per_s_loaded": round(visual.get("tiles", 0) / (wall - loaded), 2),
        "encode_only_tiles_per_s": round(visual["tiles"] / visual["encode_s"], 2) if visual.get("encode_s") else None,
        **{key: visual.get(key) for key in ("tiles", "calls", "batch", "devices", "idle_fraction")},
    }  # fmt: skip


def by_hand(name: str, folder: Path, tiles: list, device: str, batches: list[int]) -> dict:
    """colpali-engine's own loop over ``tiles``: processor, model, vectors to the host, per batch."""
    import torch

    from pagesight.encode.visual.late_interaction import import_colpali
    from pagesight.encode.visual.processors import image_only

    engine = import_colpali()
    model_name, processor_name = BY_HAND[name]
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = getattr(engine, model_name).from_pretrained(folder, dtype=dtype)
    if name == "colpali":  # transformers 5 leaves PaliGemma's tied LM head on the meta device
        model.model.tie_weights()
    model = model.to(device).eval()
    processor = image_only(getattr(engine, processor_name)).from_pretrained(folder)
    rates = {}
    for size in batches:
        with torch.no_grad():
            model(**processor.process_images(tiles[:size]).to(device))  # warm-up
            sync(device)
            start = time.perf_counter()
            for first in range(0, len(tiles), size):
                model(**processor.process_images(tiles[first : first + size]).to(device)).float().cpu()
            sync(device)
        rates[size] = round(len(tiles) / (time.perf_counter() - start), 2)
    del model
    best = max(rates, key=rates.get)
    return {"tiles_per_s": rates, "best_batch": best, "best_tiles_per_s": rates[best]}


def encoder_api(name: str, folder: Path, tiles: list, device: str, batches: list[int]) -> dict:
    """pagesight's ``encode_images`` over ``tiles``, per batch size."""
    from pagesight.encode.visual import make_encoder

    encoder = make_encoder(name, model=str(folder), device=device)
    rates = {}
    for size in batches:
        encoder.batch_size = size
        encoder.encode_images(tiles[:size])  # warm-up
        start = time.perf_counter()
        encoder.encode_images(tiles)
        rates[size] = round(len(tiles) / (time.perf_counter() - start), 2)
    best = max(rates, key=rates.get)
    return {"tiles_per_s": rates, "best_batch": best, "best_tiles_per_s": rates[best]}


def search(where: Path, device: str, rounds: int) -> dict:
    """Visual and hybrid searches from one client, each question ``rounds`` times, the first
    search (the encoder loading) apart."""
    from pagesight import Index

    index = Index.open(where, create=False, device=device)
    start = time.perf_counter()
    index.search(QUESTIONS[0], k=10, mode="visual")
    first = time.perf_counter() - start
    found: dict[str, list[float]] = {"visual": [], "hybrid": []}
    for _ in range(rounds):
        for question in QUESTIONS:
            for mode in found:
                start = time.perf_counter()
                index.search(question, k=10, mode=mode)
                found[mode].append(time.perf_counter() - start)
    index.close()
    return {
        "first_search_s": round(first, 2),
        **{mode: harness.latency(times) for mode, times in found.items()},
    }


def served(where: Path, clients: int, rounds: int) -> dict:
    """``clients`` clients at once searching (visual, then hybrid) through ``pagesight serve``."""
    import secrets

    import httpx

    from benchmarks.serve import start_server

    key = secrets.token_hex(16)
    server, url = start_server(str(where), key, readers=clients)
    try:
        found = {}
        for mode in ("visual", "hybrid"):
            found[mode] = asyncio.run(_clients(url, key, mode, clients, rounds, httpx))
        return found
    finally:
        server.terminate()
        server.wait(30)


async def _clients(url: str, key: str, mode: str, clients: int, rounds: int, httpx) -> dict:
    times, errors = [], 0
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(
        base_url=url, headers={"X-API-Key": key}, timeout=300, limits=limits
    ) as client:
        await client.get("/api/search", params={"q": QUESTIONS[0], "k": 10, "mode": mode})  # warm-up

        async def one(number: int) -> None:
            nonlocal errors
            for turn in range(rounds):
                start = time.perf_counter()
                params = {"q": QUESTIONS[(number + turn) % len(QUESTIONS)], "k": 10, "mode": mode}
                response = await client.get("/api/search", params=params)
                times.append(time.perf_counter() - start)
                errors += response.status_code != 200

        start = time.perf_counter()
        await asyncio.gather(*(one(number) for number in range(clients)))
        wall = time.perf_counter() - start
    return {
        "clients": clients,
        "searches_per_s": round(len(times) / wall, 2),
        "errors": errors,
        **harness.latency(times),
    }


def reader(where: Path, folder: Path, device: str, count: int, max_tokens: int) -> dict:
    """The transformers reader over ``where``'s pages: prefill (one token) and decode."""
    from pagesight import Index
    from pagesight.answer.vlm import TransformersReader

    gpu_models.register_image_only()
    index = Index.open(where, create=False, device=device)
    read = TransformersReader(model=str(folder), device=device, max_tokens=1)
    index.ask(QUESTIONS[0], read, k=3)  # warm-up (the visual encoder loads)
    prefill, whole, tokens = [], [], []
    for question in (QUESTIONS * count)[:count]:
        read.max_tokens = 1
        prefill.append(index.ask(question, read, k=3).timings["read"])
        read.max_tokens = max_tokens
        answer = index.ask(question, read, k=3)
        tokens.append(answer.usage.get("completion_tokens", 0))
        whole.append(answer.timings["read"])
    index.close()
    decoding = sum(whole) - sum(prefill)  # the same questions read to one token, then to max_tokens
    produced = sum(tokens) - len(tokens)
    return {"questions": count, "k": 3, "prefill_s_p50": round(statistics.median(prefill), 3),
            "read_s_p50": round(statistics.median(whole), 3), "completion_tokens": tokens,
            "decode_tokens_per_s": round(produced / decoding, 1) if decoding > 0 and produced else None}  # fmt: skip


def pdfs_of(folder: Path, limit: int) -> list[Path]:
    return sorted(folder.glob("*.pdf"), key=lambda p: (len(p.stem), p.stem))[:limit]


def visual_steps(name: str, args, sampler: Sampler, tiles: list, pdfs: list[Path]) -> dict:
    folder, where = args.work / "models" / name, args.work / f"index-{name}"
    found = {"ingest": step(sampler, ingest, name, folder, pdfs, where, args.device, args.batch)}
    if name in BY_HAND:
        found["by_hand"] = step(sampler, by_hand, name, folder, tiles, args.device, args.batches)
    found["encoder_api"] = step(sampler, encoder_api, name, folder, tiles, args.device, args.batches)
    found["search"] = step(sampler, search, where, args.device, args.rounds)
    if args.clients and name == args.models[0]:  # the first model's index alone: a server start each is long
        found["serve"] = step(sampler, served, where, args.clients, args.rounds)
    done, best = (
        found["ingest"].get("tiles_per_s_loaded"),
        found.get("by_hand", {}).get("best_tiles_per_s"),
    )
    if done and best:
        found["ratio"] = round(done / best, 3)
    return found


def environment(device: str) -> dict:
    import torch
    import transformers

    found = {"torch": torch.__version__, "transformers": transformers.__version__, "device": device}
    if torch.cuda.is_available():
        found["gpus"] = [torch.cuda.get_device_name(n) for n in range(torch.cuda.device_count())]
    return found


def run(args) -> dict:
    sampler = Sampler()
    try:
        results: dict = {"environment": environment(args.device), "models": {}}
        for name in args.models:
            results["models"][name] = step(sampler, gpu_models.build, name, args.work / "models" / name,
                                           args.tiny, args.device)  # fmt: skip
        pdfs = pdfs_of(args.pdfs, args.max_files)
        tiles = tiles_of(pdfs)
        results["pages"] = {"files": len(pdfs), "tiles": len(tiles)}
        for name in [name for name in args.models if name in VISUAL]:
            results[name] = visual_steps(name, args, sampler, tiles, pdfs)
        if "reader" in args.models and "colqwen2.5" in args.models:
            results["reader"] = step(sampler, reader, args.work / "index-colqwen2.5", args.work / "models" / "reader",
                                     args.device, args.questions, args.max_tokens)  # fmt: skip
        return results
    finally:
        sampler.stop()


def arguments(argv: list[str] | None = None):
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--pdfs", type=Path, default=harness.ROOT / "samples" / "corpus", help="folder of PDFs"
    )
    parser.add_argument("--max-files", type=int, default=1000)
    parser.add_argument("--device", default=None, help="default: cuda, or cpu with --tiny")
    parser.add_argument("--models", default=",".join(gpu_models.MODELS))
    parser.add_argument(
        "--batches", default=None, help="by hand and encoder API (default 4,8,16,32; tiny 2,4)"
    )
    parser.add_argument("--batch", type=int, default=None, help="ingest's visual_batch (default: its own)")
    parser.add_argument("--rounds", type=int, default=None, help="searches a question and client (3; tiny 1)")
    parser.add_argument(
        "--clients", type=int, default=None, help="clients through pagesight serve (16; tiny 2; 0: none)"
    )
    parser.add_argument("--questions", type=int, default=None, help="reader questions (10; tiny 2)")
    parser.add_argument("--max-tokens", type=int, default=None, help="reader decode length (64; tiny 8)")
    parser.add_argument(
        "--work", type=Path, default=None, help="models and indexes (default: a temporary one)"
    )
    args = harness.start(parser, argv)
    args.device = args.device or ("cpu" if args.tiny else "cuda")
    args.models = [name.strip() for name in args.models.split(",") if name.strip()]
    args.batches = [int(n) for n in (args.batches or ("2,4" if args.tiny else "4,8,16,32")).split(",")]
    args.rounds = args.rounds or (1 if args.tiny else 3)
    args.clients = (2 if args.tiny else 16) if args.clients is None else args.clients
    args.questions = args.questions or (2 if args.tiny else 10)
    args.max_tokens = args.max_tokens or (8 if args.tiny else 64)
    return args


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    with tempfile.TemporaryDirectory(prefix="pagesight-gpu-") as scratch:
        args.work = args.work or Path(scratch)
        results = run(args)
    harness.finish(args, __spec__.name, results)


if __name__ == "__main__":
    main()
