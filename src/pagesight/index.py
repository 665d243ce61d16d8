"""The user-facing index: one directory, opened once, with the verbs add, search, delete, info.

from pagesight import Index
index = Index.open("my-index")
index.add(["papers/", "scan.png"])
for hit in index.search("reciprocal rank fusion", k=5):
    print(hit.page_id, hit.score, hit.snippet)
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

from PIL import Image

from pagesight.encode.dense import dense_model
from pagesight.encode.lexical import term_matcher
from pagesight.errors import IndexFormatError, PagesightError
from pagesight.ingest import pipeline
from pagesight.records import Hit
from pagesight.render import open_source
from pagesight.render.tiles import downscale
from pagesight.search.fusion import reciprocal_rank_fusion, relative_score_fusion
from pagesight.settings import Settings
from pagesight.store import retrievers as store
from pagesight.store.catalog import Catalog, TileRow
from pagesight.store.lock import WriteLock

MODES = ("lexical", "dense", "hybrid")
FUSIONS = ("rrf", "rsf")
# Weight of the dense side in relative score fusion. Swept on IRPAPERS (BENCHMARKS.md): with
# MiniLM text vectors the best hybrid keeps BM25 dominant and lets dense break its ties.
DEFAULT_ALPHA = 0.1


class Index:
    def __init__(self, root: Path, catalog: Catalog):
        self.root = root
        self.catalog = catalog
        self._retrievers: store.Retrievers | None = None
        self._pages: OrderedDict[tuple[str, int], Image.Image] = OrderedDict()

    @classmethod
    def open(cls, path: str | os.PathLike, *, create: bool = True, settings: Settings | None = None) -> Index:
        """Open the index at ``path``; create it (with ``settings``) when ``create`` and absent."""
        root = Path(path)
        if not (root / "catalog.sqlite").exists():
            if not create:
                raise IndexFormatError(f"{root}: no pagesight index here")
            if root.exists() and (not root.is_dir() or any(root.iterdir())):
                raise IndexFormatError(f"{root}: exists and is not a pagesight index")
            return cls(root, Catalog(root, settings or Settings()))
        catalog = Catalog(root)
        if settings is not None and settings != catalog.settings:
            raise IndexFormatError(
                f"{root}: index was created with settings {catalog.settings.to_dict()}; "
                "they cannot change (make a new index)"
            )
        return cls(root, catalog)

    @property
    def settings(self) -> Settings:
        return self.catalog.settings

    # Writing -----------------------------------------------------------------------------------

    def add(self, paths: str | os.PathLike | Iterable[str | os.PathLike], **options) -> pipeline.IngestReport:
        """Ingest files and folders; see ``pipeline.run`` for the options (ocr, jobs, timeout, ...).

        Files already indexed and unchanged are skipped; changed files replace their pages.
        Failures are reported per file in the returned report, never raised.
        """
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        with WriteLock(self.root):
            report = pipeline.run(self.catalog, paths, **options)
            self._refresh_locked()
        return report

    def delete(self, doc_id: str) -> bool:
        """Remove a document and its pages; False when there is no such document."""
        with WriteLock(self.root):
            deleted = self.catalog.delete_document(doc_id)
            if deleted:
                self._refresh_locked()
        return deleted

    def refresh(self) -> None:
        """Bring the retriever files up to date with the catalog (after a crash, for example)."""
        with WriteLock(self.root):
            self._refresh_locked()

    def _refresh_locked(self) -> None:
        previous = self._retrievers or store.load(self.root)
        if previous is not None and previous.generation == self.catalog.generation():
            self._retrievers = previous
            return
        self._retrievers = store.build(self.catalog, previous, self._dense_dim())
        store.save(self.root, self._retrievers)

    def _dense_dim(self) -> int | None:
        name = self.settings.dense_model
        return dense_model(name).dim if name else None

    def _current(self) -> store.Retrievers:
        """Retrievers matching the catalog now: loaded, or built in memory if the files lag."""
        generation = self.catalog.generation()
        if self._retrievers is not None and self._retrievers.generation == generation:
            return self._retrievers
        loaded = store.load(self.root)
        if loaded is not None and loaded.generation == generation:
            self._retrievers = loaded
            return loaded
        lock = WriteLock(self.root)
        if lock.acquire():  # no writer at work: the files are stale after a crash; repair them
            try:
                self._refresh_locked()
            finally:
                lock.release()
        else:  # a writer is at work and will save its own; search what is committed so far
            self._retrievers = store.build(self.catalog, loaded or self._retrievers, self._dense_dim())
        return self._retrievers

    # Searching ---------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        mode: str | None = None,
        fusion: str = "rsf",
        alpha: float = DEFAULT_ALPHA,
        rrf_k: float = 60.0,
        doc_ids: Sequence[str] | None = None,
        candidates: int = 100,
        evidence: bool = True,
    ) -> list[Hit]:
        """The ``k`` best tiles for a text query.

        ``mode`` is lexical, dense or hybrid (default: hybrid when the index has dense vectors).
        Hybrid fuses the two rankings by reciprocal rank fusion (``fusion="rrf"``, constant
        ``rrf_k``) or relative score fusion (``"rsf"``, ``alpha`` weighing the dense side).
        ``doc_ids`` restricts the search to those documents. ``evidence=False`` leaves out
        snippets and boxes, for callers that only need the ranking (evaluation runs deep lists).
        """
        mode = mode or ("hybrid" if self.settings.dense_model else "lexical")
        if mode not in MODES:
            raise PagesightError(f"mode must be one of {', '.join(MODES)}, got '{mode}'")
        if fusion not in FUSIONS:
            raise PagesightError(f"fusion must be one of {', '.join(FUSIONS)}, got '{fusion}'")
        if mode != "lexical" and not self.settings.dense_model:
            raise PagesightError(f"{self.root}: index has no dense vectors; use --mode lexical")
        if not query.strip() or k <= 0:
            return []
        current = self._current()
        allowed = self.catalog.tile_ids_of(doc_ids) if doc_ids else None
        if allowed is not None and len(allowed) == 0:
            return []
        pool = max(candidates, k)
        runs: dict[str, list[tuple[int, float]]] = {}
        if mode in ("lexical", "hybrid"):
            runs["bm25"] = current.lexical.search(query, pool, allowed)
        if mode in ("dense", "hybrid"):
            vector = dense_model(self.settings.dense_model).encode([query])[0]
            runs["dense"] = current.dense.search(vector, pool, allowed)
        if mode == "hybrid":
            if fusion == "rrf":
                ranked = reciprocal_rank_fusion(runs, k=rrf_k)
            else:
                ranked = relative_score_fusion(runs, {"dense": alpha, "bm25": 1.0 - alpha})
        else:
            ranked = next(iter(runs.values()))
        ranked = ranked[:k]
        rows = self.catalog.tiles([tile_id for tile_id, _ in ranked], spans=evidence)
        per_retriever = {name: dict(run) for name, run in runs.items()}
        matcher = term_matcher(query)
        hits = []
        for tile_id, score in ranked:
            row = rows.get(tile_id)
            if row is None:  # deleted since the retrievers were built
                continue
            scores = {name: found[tile_id] for name, found in per_retriever.items() if tile_id in found}
            hits.append(_hit(row, score, scores, matcher))
        return hits

    def ask(self, question: str, reader="extractive", *, k: int = 5, **options):
        """Answer ``question`` from the ``k`` best tiles, with citations; see ``pagesight.answer.ask``."""
        from pagesight.answer.ask import ask

        return ask(self, question, reader, k=k, **options)

    # Reading -----------------------------------------------------------------------------------

    def page_image(self, doc_id: str, page: int) -> Image.Image:
        """The page rendered again from its source at the index DPI (a few pages are cached)."""
        key = (doc_id, page)
        if key in self._pages:
            self._pages.move_to_end(key)
            return self._pages[key]
        document = self.catalog.document(doc_id)
        if document is None:
            raise PagesightError(f"{self.root}: no document '{doc_id}'")
        if not 1 <= page <= document.n_pages:
            raise PagesightError(f"{doc_id}: page {page} out of range 1..{document.n_pages}")
        source = open_source(document.source, document.type)
        try:
            image = source.render(page, self.settings.dpi)
        finally:
            source.close()
        self._pages[key] = image
        while len(self._pages) > 8:
            self._pages.popitem(last=False)
        return image

    def tile_image(self, doc_id: str, page: int, tile: int = 0, compression: float = 1.0) -> Image.Image:
        """A tile cut from its re-rendered page, each side divided by sqrt(``compression``)."""
        row = self.catalog.tile_at(doc_id, page, tile)
        if row is None:
            raise PagesightError(f"{doc_id}: no tile {tile} on page {page}")
        x0, y0, x1, y1 = (round(v) for v in row.box)
        return downscale(self.page_image(doc_id, page).crop((x0, y0, x1, y1)), compression)

    def info(self) -> dict:
        current = store.load(self.root)
        size = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
        return {
            "path": str(self.root),
            **self.catalog.counts(),
            "generation": self.catalog.generation(),
            "retrievers_generation": current.generation if current else None,
            "settings": self.settings.to_dict(),
            "bytes_on_disk": size,
        }

    def documents(self) -> list[str]:
        return [d.id for d in self.catalog.documents()]

    def close(self) -> None:
        self.catalog.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _hit(row: TileRow, score: float, scores: dict[str, float], matcher) -> Hit:
    """A hit whose snippet and boxes are the tile's lines that share the most query terms."""
    matched = []
    for position, (text, box, _source, _conf) in enumerate(row.spans):
        overlap = matcher(text)
        if overlap:
            matched.append((overlap, position, text, tuple(box)))
    if matched:
        best = max(m[0] for m in matched)
        chosen = sorted((m for m in matched if m[0] * 2 >= best), key=lambda m: (-m[0], m[1]))[:5]
        evidence = sorted(chosen, key=lambda m: m[1])
        snippet = " … ".join(m[2] for m in evidence[:3])
        boxes = [m[3] for m in evidence]
    else:
        snippet = " ".join(s[0] for s in row.spans[:3])
        boxes = []
    if len(snippet) > 300:
        snippet = snippet[:299] + "…"
    return Hit(
        doc_id=row.doc_id,
        page=row.page,
        tile=row.idx,
        score=float(score),
        scores={name: float(value) for name, value in scores.items()},
        snippet=snippet,
        boxes=[tuple(float(v) for v in box) for box in boxes],
        page_size=row.page_size,
        tile_box=row.box,
    )
