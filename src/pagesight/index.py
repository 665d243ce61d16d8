"""The user-facing index: one directory, opened once, with the verbs add, search, delete, info.

from pagesight import Index
index = Index.open("my-index")
index.add(["papers/", "scan.png"])
for hit in index.search("reciprocal rank fusion", k=5):
    print(hit.page_id, hit.score, hit.snippet)
"""

from __future__ import annotations

import io
import os
import shutil
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PIL import Image

from pagesight.errors import IndexFormatError, PagesightError
from pagesight.records import Hit
from pagesight.search.fusion import (
    DEFAULT_ALPHA,
    DEFAULT_VISUAL_WEIGHT,
    reciprocal_rank_fusion,
    relative_score_fusion,
)
from pagesight.settings import Settings
from pagesight.store.catalog import Catalog, TileRow
from pagesight.store.lock import WriteLock

# FAISS, bm25s, the models and the file readers are imported by the methods that use them, so a
# command that only opens the index (info, documents) starts in a fraction of a second.
if TYPE_CHECKING:
    from pagesight.ingest.pipeline import IngestReport
    from pagesight.store.retrievers import Retrievers

MODES = ("lexical", "dense", "visual", "hybrid")
FUSIONS = ("rrf", "rsf")


class Index:
    def __init__(self, root: Path, catalog: Catalog):
        self.root = root
        self.catalog = catalog
        self._retrievers: Retrievers | None = None
        self._pages: OrderedDict[tuple[str, int], Image.Image] = OrderedDict()
        self._web = None  # render.web.OnDemand, started when a web tile must be rendered again
        self._visual = None  # the visual encoder, loaded on first use
        self.device = "auto"  # where the visual encoder runs: auto, cpu, cuda[:N] or mps
        self._new: Path | None = None  # what this object created, undone if the first add cannot start

    @classmethod
    def open(cls, path: str | os.PathLike, *, create: bool = True, settings: Settings | None = None) -> Index:
        """Open the index at ``path``; create it (with ``settings``) when ``create`` and absent."""
        root = Path(path)
        if not (root / "catalog.sqlite").exists():
            if not create:
                raise IndexFormatError(f"{root}: no pagesight index here")
            if root.exists() and (not root.is_dir() or any(root.iterdir())):
                raise IndexFormatError(f"{root}: exists and is not a pagesight index")
            settings = settings or Settings()
            _check_models(settings)
            made = not root.exists()
            index = cls(root, Catalog(root, settings))
            index._new = root if made else root / "catalog.sqlite"
            return index
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

    def add(self, paths: str | os.PathLike | Iterable[str | os.PathLike], **options) -> IngestReport:
        """Ingest files and folders; see ``pipeline.run`` for the options (ocr, jobs, timeout, ...).

        Files already indexed and unchanged are skipped; changed files replace their pages.
        Failures are reported per file in the returned report, never raised.
        """
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        from pagesight.ingest import pipeline

        try:
            with WriteLock(self.root):
                visual = self._ingest_encoder if self.settings.visual_encoder else None
                report = pipeline.run(self.catalog, paths, visual=visual, **options)
                self._refresh_locked()
        except PagesightError:
            self._undo_creation()
            raise
        self._new = None
        return report

    def _undo_creation(self) -> None:
        """Remove the index this object created when its first ``add`` failed as a whole (its
        encoder could not load, say) before storing anything, so no unusable index is left."""
        if self._new is None or self.catalog.counts()["documents"]:
            return
        self.catalog.close()
        for name in ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm", "write.lock"):
            (self.root / name).unlink(missing_ok=True)
        shutil.rmtree(self.root / "retrievers", ignore_errors=True)
        if self._new == self.root and not any(self.root.iterdir()):
            self.root.rmdir()
        self._new = None

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
        from pagesight.store import retrievers as store

        previous = self._retrievers or store.load(self.root)
        if previous is not None and previous.generation == self.catalog.generation():
            self._retrievers = previous
            return
        self._retrievers = store.build(self.catalog, previous, self._dense_dim())
        store.save(self.root, self._retrievers)

    def visual_encoder(self):
        """The visual encoder the index was created with, loaded once on ``self.device`` and checked
        against the encoder that wrote the stored vectors; None when the index has none."""
        if self.settings.visual_encoder is None:
            return None
        if self._visual is None:
            from pagesight.encode.visual import check_compatible, make_encoder

            encoder = make_encoder(
                self.settings.visual_encoder,
                model=self.settings.visual_model,
                adapter=self.settings.visual_adapter,
                device=self.device,
            )
            recorded = self.catalog.visual_spec()
            if recorded is not None:
                check_compatible(recorded, encoder)
            self._visual = encoder
        return self._visual

    def _ingest_encoder(self):
        """The visual encoder for ingestion, its spec recorded by the first ingestion."""
        encoder = self.visual_encoder()
        if self.catalog.visual_spec() is None:
            self.catalog.set_visual_spec(encoder.spec())
        return encoder

    def _dense_dim(self) -> int | None:
        from pagesight.encode.dense import DENSE_MODELS

        name = self.settings.dense_model
        return DENSE_MODELS[name].dim if name else None

    def _current(self) -> Retrievers:
        """Retrievers matching the catalog now: loaded, or built in memory if the files lag."""
        from pagesight.store import retrievers as store

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
        visual_weight: float = DEFAULT_VISUAL_WEIGHT,
        doc_ids: Sequence[str] | None = None,
        candidates: int = 100,
        evidence: bool = True,
    ) -> list[Hit]:
        """The ``k`` best tiles for a text query.

        ``mode`` is lexical, dense, visual or hybrid (default: hybrid when the index has dense or
        visual vectors). Hybrid fuses the rankings of every retriever the index has by reciprocal
        rank fusion (``fusion="rrf"``, constant ``rrf_k``) or relative score fusion (``"rsf"``:
        ``visual_weight`` for the visual run, and of the rest, ``alpha`` for dense, the remainder
        for BM25).
        ``doc_ids`` restricts the search to those documents. ``evidence=False`` leaves out
        snippets and boxes, for callers that only need the ranking (evaluation runs deep lists).
        """
        mode = self._check_mode(mode, fusion)
        if not query.strip():
            raise PagesightError("the query is empty")
        if not 0 <= alpha <= 1:
            raise PagesightError(f"alpha must be between 0 and 1, got {alpha:g}")
        self._check_request(k, doc_ids)
        current = self._current()
        allowed = self.catalog.tile_ids_of(doc_ids) if doc_ids else None
        if allowed is not None and len(allowed) == 0:
            return []
        pool = max(candidates, k)
        runs: dict[str, list[tuple[int, float]]] = {}
        if mode in ("lexical", "hybrid"):
            runs["bm25"] = current.lexical.search(query, pool, allowed)
        if mode == "dense" or (mode == "hybrid" and self.settings.dense_model):
            from pagesight.encode.dense import dense_model

            vector = dense_model(self.settings.dense_model).encode_queries([query])[0]
            runs["dense"] = current.dense.search(vector, pool, allowed)
        if mode == "visual" or (mode == "hybrid" and self.settings.visual_encoder):
            vector = self.visual_encoder().encode_queries([query])[0]
            runs["visual"] = self._visual_run(current, vector, pool, allowed)
        if mode == "hybrid":
            if fusion == "rrf":
                ranked = reciprocal_rank_fusion(runs, k=rrf_k)
            else:
                text = 1.0 - visual_weight if "visual" in runs else 1.0
                weights = {"bm25": text * (1.0 - alpha), "dense": text * alpha, "visual": visual_weight}
                if "dense" not in runs:
                    weights["bm25"] = text
                ranked = relative_score_fusion(runs, weights)
        else:
            ranked = next(iter(runs.values()))
        return self._hits(ranked[:k], runs, query, evidence)

    def search_image(
        self,
        image: Image.Image,
        k: int = 10,
        *,
        region: tuple[float, float, float, float] | None = None,
        doc_ids: Sequence[str] | None = None,
    ) -> list[Hit]:
        """The ``k`` best tiles for an image query (PixSearch): a whole image, or the ``region``
        (x0, y0, x1, y1 in its pixels) of it, through the index's visual encoder."""
        self._check_mode("visual", "rsf")
        if region is not None:
            x0, y0, x1, y1 = region
            if not (0 <= x0 < x1 <= image.width and 0 <= y0 < y1 <= image.height):
                raise PagesightError(
                    f"region {list(region)} is not inside the {image.width}x{image.height} query image"
                )
            image = image.crop((round(x0), round(y0), round(x1), round(y1)))
        self._check_request(k, doc_ids)
        allowed = self.catalog.tile_ids_of(doc_ids) if doc_ids else None
        if allowed is not None and len(allowed) == 0:
            return []
        vector = self.visual_encoder().encode_image_queries([image.convert("RGB")])[0]
        runs = {"visual": self._visual_run(self._current(), vector, k, allowed)}
        return self._hits(runs["visual"], runs, "", evidence=True)

    def _check_request(self, k: int, doc_ids: Sequence[str] | None) -> None:
        if k <= 0:
            raise PagesightError(f"k must be 1 or more, got {k}")
        missing = [doc_id for doc_id in doc_ids or () if self.catalog.document(doc_id) is None]
        if missing:
            raise PagesightError(f"{self.root}: no document {', '.join(map(repr, missing))} in the index")

    def _check_mode(self, mode: str | None, fusion: str) -> str:
        """``mode`` (None: the default of this index) checked against what the index holds."""
        settings = self.settings
        mode = mode or ("hybrid" if settings.dense_model or settings.visual_encoder else "lexical")
        if mode not in MODES:
            raise PagesightError(f"mode must be one of {', '.join(MODES)}, got '{mode}'")
        if fusion not in FUSIONS:
            raise PagesightError(f"fusion must be one of {', '.join(FUSIONS)}, got '{fusion}'")
        if mode == "dense" and not settings.dense_model:
            raise PagesightError(f"{self.root}: index has no dense vectors; use --mode lexical")
        if mode == "hybrid" and not (settings.dense_model or settings.visual_encoder):
            raise PagesightError(f"{self.root}: index has no dense vectors to fuse with; use --mode lexical")
        if mode == "visual" and not settings.visual_encoder:
            raise PagesightError(
                f"{self.root}: index has no visual vectors (create it with a visual encoder: --encoder)"
            )
        return mode

    @staticmethod
    def _visual_run(current, vector, pool: int, allowed) -> list[tuple[int, float]]:
        """The visual run from the same retrievers as the query's other runs."""
        return current.visual.search(vector, pool, allowed) if current.visual is not None else []

    def _hits(self, ranked, runs: dict, query: str, evidence: bool) -> list[Hit]:
        """Hits for the ranked (tile id, score) pairs, with each retriever's score and evidence."""
        rows = self.catalog.tiles([tile_id for tile_id, _ in ranked], spans=evidence)
        per_retriever = {name: dict(run) for name, run in runs.items()}
        from pagesight.encode.lexical import term_matcher

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
        from pagesight.render import open_source
        from pagesight.render.web.sites import WEB_SOURCES

        if document.type in WEB_SOURCES:
            image = self._web_page(document, page)
        else:
            source = open_source(document.source, document.type)
            try:
                image = source.render(page, self.settings.dpi)
            finally:
                source.close()
        self._pages[key] = image
        while len(self._pages) > 8:
            self._pages.popitem(last=False)
        return image

    def tile_image(
        self, doc_id: str, page: int, tile: int = 0, compression: float = 1.0, *, rerender: bool = False
    ) -> Image.Image:
        """A tile cut from its re-rendered page, each side divided by sqrt(``compression``).

        Web page tiles come from the image kept in the index, or are rendered again from their
        source (always, with ``rerender``), pixel-identical to the first render.
        """
        row = self.catalog.tile_at(doc_id, page, tile)
        if row is None:
            raise PagesightError(f"{doc_id}: no tile {tile} on page {page}")
        from pagesight.render.tiles import downscale
        from pagesight.render.web.sites import WEB_SOURCES

        document = self.catalog.document(doc_id)
        if document is not None and document.type in WEB_SOURCES:
            return downscale(self._web_tiles(document, [row], rerender)[0], compression)
        x0, y0, x1, y1 = (round(v) for v in row.box)
        return downscale(self.page_image(doc_id, page).crop((x0, y0, x1, y1)), compression)

    def _web_tiles(self, document, rows: list[TileRow], rerender: bool = False) -> list[Image.Image]:
        """Tile images of a web page: kept ones from the catalog, the others rendered again at once."""
        data = [None if rerender else self.catalog.tile_image(row.id) for row in rows]
        missing = [i for i, found in enumerate(data) if found is None]
        if missing:
            from pagesight.render.web import OnDemand

            self._web = self._web or OnDemand()
            try:
                again = self._web.tiles(
                    document.type, document.source, document.meta, [rows[i].box for i in missing]
                )
            except PagesightError as exc:
                raise PagesightError(f"{document.id}: cannot render the page again ({exc})") from None
            for i, png in zip(missing, again):
                data[i] = png
        return [Image.open(io.BytesIO(png)).convert("RGB") for png in data]

    def _web_page(self, document, page: int) -> Image.Image:
        """A web page put together from its tiles (kept or rendered again)."""
        rows = self.catalog.page_tiles(document.id, page)
        width, height = rows[0].page_size
        image = Image.new("RGB", (width, height), "white")
        for row, tile in zip(rows, self._web_tiles(document, rows)):
            image.paste(tile, (round(row.box[0]), round(row.box[1])))
        return image

    def info(self) -> dict:
        from pagesight.store.retrievers import current_generation

        size = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
        return {
            "path": str(self.root),
            **self.catalog.counts(),
            "generation": self.catalog.generation(),
            "retrievers_generation": current_generation(self.root),
            "settings": self.settings.to_dict(),
            "visual_encoder": self.catalog.visual_spec(),
            "bytes_on_disk": size,
        }

    def documents(self) -> list[str]:
        """The ids of the documents, sorted: what ``delete`` and ``doc_ids`` take."""
        return [d.id for d in self.catalog.documents()]

    def document_list(self) -> list[dict]:
        """Each document as {"id", "type", "pages", "source", "bytes", "notes"}, sorted by id;
        notes are caveats found when it was read (blank pages, a web page cut short)."""
        return [
            {
                "id": d.id,
                "type": d.type,
                "pages": d.n_pages,
                "source": str(d.source),
                "bytes": d.size,
                "notes": list(d.meta.get("notes", [])),
            }
            for d in self.catalog.documents()
        ]

    def close(self) -> None:
        if self._web is not None:
            self._web.close()
            self._web = None
        self.catalog.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _check_models(settings: Settings) -> None:
    """Refuse settings naming models no registry knows, before an index is made with them."""
    from pagesight.encode.dense import DENSE_MODELS
    from pagesight.encode.visual import ENCODERS

    if settings.dense_model is not None and settings.dense_model not in DENSE_MODELS:
        raise PagesightError(
            f"unknown dense model '{settings.dense_model}'; choose one of {', '.join(sorted(DENSE_MODELS))}"
        )
    if settings.visual_encoder is not None and settings.visual_encoder not in ENCODERS:
        raise PagesightError(
            f"unknown visual encoder '{settings.visual_encoder}'; choose one of {', '.join(sorted(ENCODERS))}"
        )


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
