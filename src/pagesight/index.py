"""The user-facing index: a store opened once, with the verbs add, search, ask, delete, info.

from pagesight import Index
index = Index.open("my-index")
index.add(["papers/", "scan.png"])
for hit in index.search("reciprocal rank fusion", k=5):
    print(hit.page_id, hit.score, hit.snippet)

A façade: storage is the store's (``store/``: the catalog and the vector stores, chosen by the
location), ingestion the pipeline's (``ingest/``), search the engine's (``search/``), answers the
readers' (``answer/``), and pages are rendered again from their sources (``render/``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import Image

from pagesight.errors import PagesightError
from pagesight.records import Hit
from pagesight.search.documents import DEFAULT_DOCUMENT_WEIGHT
from pagesight.search.fusion import DEFAULT_ALPHA, DEFAULT_VISUAL_WEIGHT
from pagesight.settings import Settings
from pagesight.store.base import Catalog, Store, open_store, store_exists

# FAISS, bm25s, the models and the file readers are imported by the methods that use them, so a
# command that only opens the index (info, documents) starts in a fraction of a second.
if TYPE_CHECKING:
    from pagesight.ingest.pipeline import IngestReport
    from pagesight.render.pages import PageRenderer
    from pagesight.search.rerank import Reranker


class Index:
    def __init__(self, store: Store):
        self.store = store
        self._renderer = None  # render.pages.PageRenderer, made when a page must be rendered again
        self._visual = None  # the visual encoder, loaded on first use
        self._rerankers: dict = {}  # loaded rerankers by name and options
        self.device = "auto"  # where the visual encoder runs: auto, cpu, cuda[:N] or mps

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        create: bool = True,
        settings: Settings | Mapping[str, Any] | None = None,
    ) -> Index:
        """Open the index at ``path``; create it with ``settings`` when ``create`` and absent.

        ``settings`` is a whole ``Settings``, or a mapping of some fields (the rest default for a
        new index). An existing index is checked against them: the fields given must be those it
        was made with, or ``SettingsConflict`` names each difference (settings are fixed when an
        index is made).
        """
        if settings is not None and not store_exists(path):
            settings = Settings.given(settings)
            _check_models(settings)
            if settings.layout:
                _check_layout()
        return cls(open_store(path, create=create, settings=settings))

    @property
    def root(self) -> Path:
        """Where the index lives (the directory of a local store)."""
        return Path(self.store.location)

    @property
    def catalog(self) -> Catalog:
        return self.store.catalog

    @property
    def settings(self) -> Settings:
        return self.catalog.settings

    # Writing -----------------------------------------------------------------------------------

    def add(self, paths: str | os.PathLike | Iterable[str | os.PathLike], **options) -> IngestReport:
        """Ingest files and folders; see ``pipeline.run`` for the options (ocr, jobs, timeout, ...).

        Files already indexed and unchanged are skipped; changed files replace their pages.
        Failures are reported per file in the returned report, never raised. An error that stops
        the whole run (an encoder that cannot load) is raised, and an index that this object
        created and that stored nothing is removed again.
        """
        from pagesight.ingest import pipeline

        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        try:
            with self.store.writing():
                visual = self._ingest_encoder if self.settings.visual_encoder else None
                report = pipeline.run(self.catalog, paths, visual=visual, **options)
                self.store.refresh()
        except PagesightError:
            self.store.discard()
            raise
        return report

    def delete(self, doc_id: str) -> bool:
        """Remove a document and its pages; False when there is no such document."""
        with self.store.writing():
            deleted = self.catalog.delete_document(doc_id)
            if deleted:
                self.store.refresh()
        return deleted

    def refresh(self) -> None:
        """Bring the retriever files up to date with the catalog (after a crash, for example)."""
        with self.store.writing():
            self.store.refresh()

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
        rerank: str | Reranker | None = None,
        rerank_candidates: int = 50,
        rerank_options: dict | None = None,
        document_weight: float = DEFAULT_DOCUMENT_WEIGHT,
    ) -> list[Hit]:
        """The ``k`` best tiles for a text query.

        ``mode`` is lexical, dense, visual or hybrid (default: hybrid when the index has dense or
        visual vectors). Hybrid fuses the rankings of every retriever the index has by reciprocal
        rank fusion (``fusion="rrf"``, constant ``rrf_k``) or relative score fusion (``"rsf"``:
        ``visual_weight`` for the visual run, and of the rest, ``alpha`` for dense, the remainder
        for BM25). Each tile's score is then fused with its document's, ``document_weight`` times
        the score of the document's best pages among the ``candidates`` (``search.documents``; 0:
        pages alone).
        ``doc_ids`` restricts the search to those documents. ``evidence=False`` leaves out
        snippets and boxes, for callers that only need the ranking (evaluation runs deep lists).
        ``rerank`` (a reranker or its name, built with ``rerank_options`` once per index object;
        see ``search.rerank``) reorders the ``rerank_candidates`` best fused tiles; its last call's
        size and time are in ``self.reranker(...).last``.
        """
        from pagesight.search import engine

        reranking = None
        if rerank is not None:
            if rerank_candidates < 1:
                raise PagesightError(f"rerank_candidates must be 1 or more, got {rerank_candidates}")
            if isinstance(rerank, str):
                rerank = self.reranker(rerank, **(rerank_options or {}))
            reranking = self._reranking(rerank, rerank_candidates)
            candidates = max(candidates, rerank_candidates)

        return engine.search_text(
            self.store,
            query,
            k,
            visual_encoder=self.visual_encoder,
            mode=mode,
            fusion=fusion,
            alpha=alpha,
            rrf_k=rrf_k,
            visual_weight=visual_weight,
            doc_ids=doc_ids,
            candidates=candidates,
            evidence=evidence,
            rerank=reranking,
            document_weight=document_weight,
        )

    def reranker(self, name: str, **options) -> Reranker:
        """The reranker ``name`` built with ``options`` (``search.rerank.make_reranker``), loaded
        once per index object."""
        key = (name, tuple(sorted(options.items())))
        if key not in self._rerankers:
            from pagesight.search.rerank import make_reranker

            self._rerankers[key] = make_reranker(name, **options)
        return self._rerankers[key]

    def _reranking(self, reranker: Reranker, n: int):
        """The engine's rerank step: the ``n`` best tiles as candidates (text, and images rendered
        on demand) scored by ``reranker``."""
        from pagesight.search.rerank import Candidate, reorder

        chunking = (self.settings.chunk_words, self.settings.chunk_overlap)

        def rerank(query: str, ranked):
            tile_ids = [tile_id for tile_id, _ in ranked[:n]]
            rows = self.catalog.tiles(tile_ids, spans=True)

            @cache
            def recorded() -> dict | None:  # the spec of the encoder that wrote the stored vectors
                return self.catalog.visual_spec()

            @cache
            def vectors() -> dict:  # the candidates' stored vectors, read once, when first asked
                ids, found = self.catalog.visual_vectors(tile_ids)
                return dict(zip(ids.tolist(), found))

            def stored(tile_id: int, spec: dict):
                """The tile's stored vectors when ``spec`` (the asking encoder's) is their space."""
                from pagesight.encode.visual.base import spec_differences

                if recorded() is None or spec_differences(recorded(), spec):
                    return None
                return vectors().get(tile_id)

            candidates = [
                Candidate(
                    row.id,
                    row.doc_id,
                    row.page,
                    row.idx,
                    "\n".join(span[0] for span in row.spans),
                    partial(self.tile_image, row.doc_id, row.page, row.idx),
                    chunking,
                    partial(stored, row.id),
                )
                for row in (rows.get(tile_id) for tile_id, _ in ranked[:n])
                if row is not None
            ]
            scores = reranker.score(query, candidates)
            return reorder([(c.tile_id, 0.0) for c in candidates] + ranked[n:], scores)

        return rerank

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
        from pagesight.search import engine

        return engine.search_image(
            self.store, image, k, visual_encoder=self.visual_encoder, region=region, doc_ids=doc_ids
        )

    def ask(
        self,
        question: str,
        reader="extractive",
        *,
        k: int = 5,
        agent: bool = False,
        max_searches: int = 3,
        **options,
    ):
        """Answer ``question`` from the ``k`` best tiles, with citations; see ``pagesight.answer.ask``.

        With ``agent`` the reader (a model reader) searches itself, ``k`` tiles a search, up to
        ``max_searches`` times, then answers from the tiles it read.
        """
        from pagesight.answer.ask import ask

        return ask(self, question, reader, k=k, agent=agent, max_searches=max_searches, **options)

    # Reading -----------------------------------------------------------------------------------

    def page_image(self, doc_id: str, page: int) -> Image.Image:
        """The page rendered again from its source at the index DPI (a few pages are cached)."""
        return self.renderer.page_image(doc_id, page)

    def tile_image(
        self, doc_id: str, page: int, tile: int = 0, compression: float = 1.0, *, rerender: bool = False
    ) -> Image.Image:
        """A tile cut from its re-rendered page, each side divided by sqrt(``compression``).

        Web page tiles come from the image kept in the index, or are rendered again from their
        source (always, with ``rerender``), pixel-identical to the first render.
        """
        return self.renderer.tile_image(doc_id, page, tile, compression, rerender=rerender)

    @property
    def renderer(self) -> PageRenderer:
        """Renders pages and tiles again (``render/pages.py``); made on first use, as it imports
        the PDF renderer."""
        if self._renderer is None:
            from pagesight.render.pages import PageRenderer

            self._renderer = PageRenderer(self.catalog, self.settings, self.root)
        return self._renderer

    def info(self) -> dict:
        return {
            "path": self.store.location,
            **self.catalog.counts(),
            "generation": self.catalog.generation(),
            "retrievers_generation": self.store.retrievers_generation(),
            "settings": self.settings.to_dict(),
            "visual_encoder": self.catalog.visual_spec(),
            "bytes_on_disk": self.store.size_bytes(),
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
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self.store.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _check_models(settings: Settings) -> None:
    """Refuse settings naming models no registry knows, before an index is made with them."""
    from pagesight.encode.dense import check_dense_model
    from pagesight.encode.visual import ENCODERS

    if settings.dense_model is not None:
        check_dense_model(settings.dense_model)
    if settings.visual_encoder is not None and settings.visual_encoder not in ENCODERS:
        raise PagesightError(
            f"unknown visual encoder '{settings.visual_encoder}'; choose one of {', '.join(sorted(ENCODERS))}"
        )


def _check_layout() -> None:
    """Refuse layout regions when they cannot be made, before an index is made with them."""
    from pagesight.read.layout import model_path

    model_path()  # the extra is installed and its model is there
