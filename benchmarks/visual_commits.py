"""What a commit costs an index with visual vectors as it grows: the time of adding one document
of two tiles to an index of N tiles with visual vectors, and the bytes of retriever files it writes
(issue 39: a change costs what it changes).

    python -m benchmarks.visual_commits --tiles 20000 [--dim 1536] [--tokens 0] [--batch 2000]
    python -m benchmarks.visual_commits --tiny       # 60 tiles of 4 token vectors of 16 dimensions

The vectors are random unit vectors of ``--dim`` dimensions (a single-vector encoder, DSE's width
by default) or, with ``--tokens T``, T token vectors a tile (late interaction, found through
MUVERA). They go through the local store's own write path: the catalog's ``put_document`` and the
store's refresh, ``--batch`` tiles a commit, as ``pagesight ingest`` commits them. Then, five times:
one document of two tiles is added and made searchable (timed, with the bytes of the retriever files
written), and a search of the visual vectors (k 10) is timed, after the merges the build made due
(``store.local.merging``, which a commit starts in a process of its own); and 50 queries made from
stored tiles (the vector, or 20 of the tile's token vectors, with noise) are asked whether they find
their tile first.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import harness
from pagesight.records import Document, Page, Span, Tile
from pagesight.settings import Settings
from pagesight.store.base import open_store
from pagesight.store.local import merging


def document(number: int, tiles: int) -> Document:
    made = [
        Tile(
            i,
            (0.0, 100.0 * i, 100.0, 100.0 * (i + 1)),
            [Span(f"tile {number} {i}", (0.0, 0.0, 9.0, 9.0), "pdf")],
        )
        for i in range(tiles)
    ]
    return Document(
        f"doc{number}",
        f"/docs/doc{number}.pdf",
        f"sha{number}",
        "pdf",
        1,
        1,
        [Page(1, 100, 100 * tiles, "pdf", made)],
    )


def vectors(rng: np.random.Generator, dim: int, tokens: int) -> np.ndarray:
    made = rng.normal(size=(tokens, dim) if tokens else dim).astype(np.float32)
    return made / np.linalg.norm(made, axis=-1, keepdims=True)


def written(folder: Path, before: dict[Path, int]) -> int:
    """Bytes of the files under ``folder`` that are new or changed since ``before`` (mtimes)."""
    return sum(
        path.stat().st_size
        for path in folder.rglob("*")
        if path.is_file() and before.get(path) != path.stat().st_mtime_ns
    )


def run(tiles: int, dim: int, tokens: int, batch: int, root: Path) -> dict:
    rng = np.random.default_rng(0)
    store = open_store(str(root), create=True, settings=Settings(dense_model=None))
    with store.writing():
        store.catalog.set_visual_spec({"encoder": "random", "dim": dim, "multi_vector": bool(tokens)})
    planted = {int(i): None for i in rng.choice(tiles, size=min(50, tiles), replace=False)}
    started = time.perf_counter()
    number = 0
    while number < tiles:
        with store.writing():
            for _ in range(min(batch, tiles - number)):
                made = vectors(rng, dim, tokens)
                if number in planted:
                    planted[number] = made
                store.catalog.put_document(document(number, 1), {}, {(1, 0): made})
                number += 1
            store.refresh()
    build = time.perf_counter() - started
    store.close()
    merging.merge_due(root)  # what the merging process a commit starts would do meanwhile
    store = open_store(str(root), create=False, settings=None)
    folder = root / "retrievers"
    adds, sizes, searches = [], [], []
    for _ in range(5):
        before = {path: path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()}
        started = time.perf_counter()
        with store.writing():
            pair = {(1, i): vectors(rng, dim, tokens) for i in range(2)}
            store.catalog.put_document(document(number, 2), {}, pair)
            store.refresh()
        adds.append(time.perf_counter() - started)
        sizes.append(written(folder, before))
        number += 1
        visual = store.retrievers().visual
        for _ in range(10):
            query = vectors(rng, dim, 20 if tokens else 0)  # a question's 20 token vectors
            started = time.perf_counter()
            visual.search(query, 10)
            searches.append(time.perf_counter() - started)
    found = 0  # a query made from a stored tile (its vector, or 20 of its tokens, with noise) finds it first
    for tile, made in planted.items():
        query = made[rng.choice(len(made), size=20)] if tokens else made
        query = query + rng.normal(scale=0.5 / np.sqrt(dim), size=query.shape).astype(np.float32)
        (best, _), *_ = visual.search(query, 10)
        found += store.catalog.tile_pages([best])[best][0] == f"doc{tile}"
    parts = len(visual.segments)
    store.close()
    return {
        "tiles": tiles,
        "dim": dim,
        "tokens": tokens,
        "build_seconds": round(build, 1),
        "add_seconds_median": round(float(np.median(adds)), 3),
        "add_bytes_written_median": int(np.median(sizes)),
        "retriever_bytes": sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()),
        "search": harness.latency(searches),
        "planted_found_first": round(found / len(planted), 3),
        "visual_segments": parts,
    }


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--tiles", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=1536)
    parser.add_argument("--tokens", type=int, default=0, help="token vectors a tile (0: one vector)")
    parser.add_argument("--batch", type=int, default=2000)
    args = harness.start(parser, argv)
    if args.tiny:
        args.tiles, args.dim, args.tokens, args.batch = 60, 16, 4, 20
    with tempfile.TemporaryDirectory() as scratch:
        result = run(args.tiles, args.dim, args.tokens, args.batch, Path(scratch) / "index")
    harness.finish(args, __spec__.name, result)


if __name__ == "__main__":
    main()
