"""Speed benchmarks: ingestion rate per stage and end to end, query latency per mode, size on disk,
peak memory, and dense search at synthetic scale. Every figure comes with the corpus size.

Stages are timed one after another in this process on the first ``max_pages`` pages of the
inputs (render at the index DPI, PDF text layer, OCR on ``ocr_pages`` of them, BM25 indexing,
dense encoding); the end-to-end rate is ``Index.add`` with its worker processes, as a user runs it.
"""

from __future__ import annotations

import os
import platform
import random
import resource
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import numpy as np

from pagesight.encode.dense import chunk_words, dense_model
from pagesight.errors import InputError
from pagesight.index import Index
from pagesight.ingest.pipeline import IngestReport, expand
from pagesight.render import open_source
from pagesight.settings import Settings
from pagesight.store.local.bm25 import LexicalRetriever
from pagesight.store.local.dense import DenseRetriever
from pagesight.text.ocr import ocr_spans


def machine() -> dict:
    return {
        "date": date.today().isoformat(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
    }


def peak_rss_mb() -> dict:
    """Peak resident memory of this process and of its largest finished child, in MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"peak_rss_mb": round(own), "peak_rss_mb_largest_worker": round(children)}


def _rate(count: int, seconds: float) -> float | None:
    return round(count / seconds, 2) if seconds > 0 else None


def stages(
    paths: Sequence[str | os.PathLike], settings: Settings, max_pages: int = 100, ocr_pages: int = 5
) -> dict:
    """Pages per second of each ingestion stage, on the first ``max_pages`` pages."""
    timings = {"render": 0.0, "text": 0.0, "ocr": 0.0}
    texts, ocr_done = _read_pages(expand(paths, IngestReport()), settings, max_pages, ocr_pages, timings)
    pages = len(texts)
    result = {
        "pages": pages,
        "render_pages_per_s": _rate(pages, timings["render"]),
        "text_layer_pages_per_s": _rate(pages, timings["text"]),
        "ocr_pages": ocr_done,
        "ocr_pages_per_s": _rate(ocr_done, timings["ocr"]),
    }
    start = time.perf_counter()
    LexicalRetriever.build(
        np.arange(len(texts)), texts, phrases=settings.phrases, term_weights=settings.term_weights
    )
    result["bm25_pages_per_s"] = _rate(len(texts), time.perf_counter() - start)
    if settings.dense_model:
        chunks = [
            c for text in texts for c in chunk_words(text, settings.chunk_words, settings.chunk_overlap)
        ]
        model = dense_model(settings.dense_model)
        model.encode(chunks[:8])  # load and warm up outside the timing
        start = time.perf_counter()
        model.encode(chunks)
        seconds = time.perf_counter() - start
        result.update(
            {
                "dense_chunks": len(chunks),
                "dense_chunks_per_s": _rate(len(chunks), seconds),
                "dense_pages_per_s": _rate(len(texts), seconds),
            }
        )
    return result


def _read_pages(
    files, settings: Settings, max_pages: int, ocr_pages: int, timings: dict
) -> tuple[list[str], int]:
    """The text of the first ``max_pages`` pages of ``files``, each rendered, its text layer read
    and, for the first ``ocr_pages``, OCR'd too, each stage's seconds added into ``timings``; and
    how many pages were OCR'd. Files that cannot be read are passed over."""
    texts: list[str] = []
    ocr_done = 0
    for path in files:
        if len(texts) >= max_pages:
            break
        try:
            source = open_source(path)
        except InputError:
            continue
        try:
            for number in range(1, source.n_pages + 1):
                if len(texts) >= max_pages:
                    break
                start = time.perf_counter()
                source.render(number, settings.dpi)
                timings["render"] += time.perf_counter() - start
                start = time.perf_counter()
                spans = source.text_layer(number, settings.dpi)
                timings["text"] += time.perf_counter() - start
                if ocr_done < ocr_pages:
                    dpi = settings.ocr_dpi if source.type == "pdf" else settings.dpi
                    start = time.perf_counter()
                    found = ocr_spans(source.render(number, dpi), engine=settings.ocr_engine)
                    timings["ocr"] += time.perf_counter() - start
                    ocr_done += 1
                    spans = spans or found
                texts.append(" ".join(span.text for span in spans))
        except InputError:
            pass
        finally:
            source.close()
    return texts, ocr_done


def end_to_end(paths: Sequence[str | os.PathLike], index_dir: Path, settings: Settings, **options) -> dict:
    """``Index.add`` into a new index, then again with nothing changed."""
    index = Index.open(index_dir, settings=settings)
    start = time.perf_counter()
    report = index.add(paths, **options)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    again = index.add(paths, **options)
    reingest = time.perf_counter() - start
    tiles = index.catalog.counts()["tiles"]
    index.close()  # checkpoints the write-ahead log into the catalog, so the size is the lasting one
    size = sum(path.stat().st_size for path in index_dir.rglob("*") if path.is_file())
    return {
        "documents": len(report.added),
        "failed": len(report.failed),
        "pages": report.pages,
        "tiles": tiles,
        "seconds": round(seconds, 2),
        "pages_per_s": _rate(report.pages, seconds),
        "reingest_seconds": round(reingest, 3),
        "reingest_unchanged": len(again.unchanged),
        "bytes_on_disk": size,
        "bytes_per_page": round(size / max(1, report.pages)),
    }


def sample_queries(index: Index, n: int = 100, words: int = 6, seed: int = 0) -> list[str]:
    """Queries cut from the indexed text: ``words`` consecutive words of random tiles."""
    rng = random.Random(seed)
    queries = []
    texts = [text.split() for _, text in index.catalog.tile_texts()]
    texts = [t for t in texts if len(t) >= words]
    for _ in range(n if texts else 0):
        text = rng.choice(texts)
        start = rng.randrange(len(text) - words + 1)
        queries.append(" ".join(text[start : start + words]))
    return queries


def latency(index: Index, queries: Sequence[str], modes: Sequence[str], k: int = 10) -> dict:
    """Search latency per mode in this warm process, in milliseconds."""
    result = {}
    for mode in modes:
        index.search("warm up", k=1, mode=mode)
        times = []
        for query in queries:
            start = time.perf_counter()
            index.search(query, k=k, mode=mode)
            times.append(1000 * (time.perf_counter() - start))
        result[mode] = quantiles(times)
    return {"queries": len(queries), "k": k, "ms": result}


def quantiles(times: list[float]) -> dict:
    """The median, 95th and 99th percentiles of ``times`` (nearest rank), rounded to 0.01."""
    ordered = sorted(times)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 2)

    return {"p50": round(statistics.median(ordered), 2), "p95": at(0.95), "p99": at(0.99)}


def scale(
    sizes: Sequence[int], dim: int = 384, n_queries: int = 100, k: int = 10, seed: int = 0
) -> list[dict]:
    """The index's dense search on random unit vectors: build time, latency, Recall@k against exact
    numpy search (the approach of VisRAG's and byaldi's code), the FAISS structure it built and its
    bytes per vector as saved (the file's size over the vectors)."""
    rng = np.random.default_rng(seed)
    results = []
    for size in sizes:
        vectors = rng.standard_normal((size, dim), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        queries = vectors[rng.choice(size, n_queries, replace=False)] + 0.5 * rng.standard_normal(
            (n_queries, dim), dtype=np.float32
        )
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        start = time.perf_counter()
        retriever = DenseRetriever.empty(dim)
        retriever.add(np.arange(size, dtype=np.int64), vectors)
        build = time.perf_counter() - start
        found, times = [], []
        for query in queries:
            start = time.perf_counter()
            found.append([tile for tile, _ in retriever.search(query, k)])
            times.append(1000 * (time.perf_counter() - start))
        exact_times, exact = [], []
        for query in queries:
            start = time.perf_counter()
            scores = vectors @ query
            top = np.argpartition(-scores, k)[:k]
            exact.append(set(top[np.argsort(-scores[top])].tolist()))
            exact_times.append(1000 * (time.perf_counter() - start))
        recall = sum(len(set(f) & e) / k for f, e in zip(found, exact)) / n_queries
        with tempfile.TemporaryDirectory(prefix="pagesight-bench-") as folder:
            saved = Path(folder) / "dense"
            retriever.save(saved)
            stored = saved.stat().st_size
        index = retriever.index
        results.append(
            {
                "vectors": size,
                "dim": dim,
                "index": f"faiss {index.structure()}, {index.storage}",
                "build_s": round(build, 3),
                f"recall@{k}_vs_exact": round(recall, 4),
                "search_ms": quantiles(times),
                "numpy_exact_ms": quantiles(exact_times),
                "bytes_per_vector": round(stored / size, 1),
            }
        )
        del retriever, vectors
    return results


def run(
    paths: Sequence[str | os.PathLike],
    settings: Settings,
    index_dir: Path | None = None,
    queries: Sequence[str] | None = None,
    scale_sizes: Sequence[int] = (),
    max_pages: int = 100,
    ocr_pages: int = 5,
    **options,
) -> dict:
    """The whole benchmark as one JSON-ready dict."""
    result: dict = {"machine": machine(), "settings": settings.to_dict()}
    result["stages"] = stages(paths, settings, max_pages, ocr_pages)
    with tempfile.TemporaryDirectory(prefix="pagesight-bench-") as tmp:
        target = index_dir or Path(tmp) / "index"
        result["ingest"] = end_to_end(paths, target, settings, **options)
        index = Index.open(target, create=False)
        asked = list(queries) if queries else sample_queries(index)
        modes = ["lexical", "dense", "hybrid"] if settings.dense_model else ["lexical"]
        result["search"] = latency(index, asked, modes) if asked else None
        index.close()
    result["memory"] = peak_rss_mb()
    if scale_sizes:
        result["scale"] = scale(scale_sizes)
    return result
