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
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import Image

from pagesight.errors import PagesightError
from pagesight.records import Hit
from pagesight.request import AskRequest, ImageSearchRequest, SearchRequest
from pagesight.settings import Settings
from pagesight.store.base import Catalog, Store, open_store, store_exists

# FAISS, bm25s, the models and the file readers are imported by the methods that use them, so a
# command that only opens the index (info, documents) starts in a fraction of a second.
if TYPE_CHECKING:
    from pagesight.answer.base import Answer, Reader
    from pagesight.endpoints import VisualEndpoint
    from pagesight.ingest.options import IngestOptions
    from pagesight.ingest.pipeline import IngestReport
    from pagesight.render.pages import PageRenderer
    from pagesight.search.explain import SimilarityMap
    from pagesight.search.rerank import Reranker


class Index:
    def __init__(
        self,
        store: Store,
        device: str = "auto",
        trust_remote_code: bool = False,
        visual_endpoint: VisualEndpoint | None = None,
    ):
        self.store = store
        self._renderer = None  # render.pages.PageRenderer, made when a page must be rendered again
        self._visual = None  # the visual encoder, loaded on first use
        self._owns_visual = False  # loaded here (closed with the index), not lent by another index
        self._visual_copies: dict = {}  # by device: its copies on the other GPUs ingestion encodes on
        self._rerankers: dict = {}  # loaded rerankers by name and options
        self.device = device  # where the visual encoder and rerankers run: auto, cpu, cuda[:N] or mps
        # whether its models (visual encoder, rerankers, readers built by name) may run the code
        # that comes with a model: the opener's leave, given at each open, never stored
        self.trust_remote_code = trust_remote_code
        # where the readers and rerankers it builds by name call their models (answer.endpoint;
        # None: each from the environment); a server sets its offer's, so requests reach no other
        self.endpoint = None
        # where its visual encoder runs when not here: a server of the model (endpoints.VisualEndpoint),
        # the opener's choice like the device, never stored (the index records the model, not where)
        self.visual_endpoint = visual_endpoint

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        create: bool = True,
        settings: Settings | Mapping[str, Any] | None = None,
        device: str = "auto",
        trust_remote_code: bool = False,
        visual_endpoint: VisualEndpoint | None = None,
    ) -> Index:
        """Open the index at ``path``; create it with ``settings`` when ``create`` and absent.

        ``settings`` is a whole ``Settings``, or a mapping of some fields (the rest default for a
        new index). An existing index is checked against them: the fields given must be those it
        was made with, or ``SettingsConflict`` names each difference (settings are fixed when an
        index is made). ``device`` is where its models run (the visual encoder, rerankers): auto,
        cpu, cuda[:N] or mps. ``trust_remote_code`` lets them run the code a model comes with
        (VisRAG-Ret, jina-embeddings-v4, Nemotron ColEmbed, jina-reranker-m0): it is this opening's
        leave, not a setting, so an index made with such an encoder must be opened with it again
        to encode with it; without it, loading that model is refused, naming it and the flag.
        ``visual_endpoint`` runs the visual encoder's model on an inference server instead
        (``endpoints.VisualEndpoint``: vLLM's pooling or embeddings API); the index's recorded
        encoder (name, model, width) is checked against what the server gives, as in-process.
        """
        if settings is not None and not store_exists(path):
            from pagesight.ingest.options import check_new_index

            settings = Settings.given(settings)
            check_new_index(settings)
        store = open_store(path, create=create, settings=settings)
        return cls(store, device=device, trust_remote_code=trust_remote_code, visual_endpoint=visual_endpoint)

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

    def add(
        self,
        paths: str | os.PathLike | Iterable[str | os.PathLike],
        options: IngestOptions | None = None,
        *,
        progress: Callable[[str, str, int], None] | None = None,
        on_planned: Callable[[int], None] | None = None,
        **fields: Any,
    ) -> IngestReport:
        """Ingest files, folders and web pages with ``options`` (``ingest.options.IngestOptions``:
        ocr, jobs, timeouts, memory, web rendering, Ray), or its fields as keywords over them.

        Files already indexed and unchanged are skipped; changed files replace their pages.
        Failures are reported per file in the returned report, never raised. An error that stops
        the whole run (an encoder that cannot load) is raised, and an index that this object
        created and that stored nothing is removed again.
        """
        from pagesight.ingest import pipeline
        from pagesight.ingest.options import IngestOptions

        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        try:
            options = IngestOptions.given(options, **fields)  # a bad option: a new index goes again
            if options.ray is not None and self.visual_endpoint is not None and self.settings.visual_encoder:
                raise PagesightError(
                    "--ray loads the visual encoder in its actors; with --visual-endpoint ingest without --ray "
                    "(the server batches the pages of every client)"
                )
            with self.store.writing():
                visual = self._ingest_encoders if self.settings.visual_encoder else None
                report = pipeline.run(
                    self.catalog, paths, options, progress=progress, on_planned=on_planned, visual=visual
                )
                self.store.refresh()
        except PagesightError:
            self.store.discard()
            raise
        return report

    def delete(self, doc_id: str) -> bool:
        """Remove a document and its pages; False when there is no such document. An office file's
        converted PDF goes from the cache with it (``render/office.py``), unless another document
        of the index has the same content."""
        with self.store.writing():
            row = self.catalog.document(doc_id)
            deleted = self.catalog.delete_document(doc_id)
            if deleted:
                self.store.refresh()
            converted = deleted and row.type == "office"  # read only for an office file's delete
            if converted and any(other.sha256 == row.sha256 for other in self.catalog.documents()):
                converted = False  # another document's pages are still rendered from it
        if converted:
            from pagesight.render.office import discard

            discard(row.sha256)
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
            self._visual = self._load_visual(self.device)
            self._owns_visual = True
        return self._visual

    def use_visual_encoder(self, encoder) -> None:
        """Search and ingest with ``encoder``, a loaded visual encoder: another ``Index``'s over the
        same store (a model loaded once per process), or one wrapped (a server's
        ``encode.visual.batching.QueryBatcher``)."""
        # a wrapper of the encoder loaded here stays this index's to close
        self._owns_visual = self._owns_visual and getattr(encoder, "encoder", None) is self._visual
        self._visual = encoder

    def _load_visual(self, device: str):
        """The index's visual encoder loaded on ``device``, checked against the recorded one."""
        from pagesight.encode.visual import check_compatible, make_encoder

        settings = self.settings
        if self.visual_endpoint is not None:
            from pagesight.encode.visual.served import served_encoder

            encoder = served_encoder(
                settings.visual_encoder, settings.visual_model, self.visual_endpoint, settings.visual_adapter
            )
        else:
            encoder = make_encoder(
                settings.visual_encoder,
                model=settings.visual_model,
                adapter=settings.visual_adapter,
                device=device,
                trust_remote_code=self.trust_remote_code,
            )
        recorded = self.catalog.visual_spec()
        if recorded is not None:
            check_compatible(recorded, encoder)
        return encoder

    def _ingest_encoders(self) -> list:
        """The visual encoder for ingestion, its spec recorded by the first ingestion, and a copy of
        it on every other GPU torch sees when the index's device is auto or cuda
        (``devices.every_gpu``): ingestion encodes on each."""
        from pagesight.devices import every_gpu

        encoder = self.visual_encoder()
        if self.catalog.visual_spec() is None:
            self.catalog.set_visual_spec(encoder.spec())
        if self.visual_endpoint is not None:
            return [encoder]  # the server spreads the pages over its own devices
        for device in every_gpu(self.device)[1:]:
            if device not in self._visual_copies:
                self._visual_copies[device] = self._load_visual(device)
        return [encoder, *self._visual_copies.values()]

    # Searching ---------------------------------------------------------------------------------

    def search(
        self,
        query: str | SearchRequest,
        k: int | None = None,
        *,
        image: Image.Image | None = None,
        region: tuple[float, float, float, float] | None = None,
        evidence: bool = True,
        rerank: str | Reranker | None = None,
        timings: dict[str, float] | None = None,
        **options: Any,
    ) -> list[Hit]:
        """The ``k`` best tiles for a query: a ``SearchRequest`` (an ``ImageSearchRequest`` to search
        by a picture), or the query and the request's fields as keywords (over the request's, when
        both are given).

        ``mode`` is lexical, dense, visual or hybrid (default: hybrid when the index has dense or
        visual vectors). Hybrid fuses the rankings of every retriever the index has by reciprocal
        rank fusion (``fusion="rrf"``, constant ``rrf_k``) or relative score fusion (``"rsf"``),
        each run weighed alike: ``visual_weight`` for the visual run, and of the rest, ``alpha`` for
        dense, the remainder for BM25 (None: the fusion's default, ``search.fusion``; with rrf
        every run the same); ``ef``, ``nprobe`` and ``ef_search`` set how widely the dense and
        visual runs look in their indexes (``store.base.Effort``; None: the index's own). Each
        tile's score is then fused with its document's, ``document_weight`` times
        the score of the document's best pages among the ``candidates`` (``search.documents``; 0:
        pages alone).
        ``doc_ids`` restricts the search to those documents. ``image``: a picture the query is about
        (or the ``region`` of it, x0, y0, x1, y1 in its pixels; they make the request an
        ``ImageSearchRequest``), searched by the visual run instead of the text alone: with the query
        when the encoder embeds both as one query, else alone (``info()["query_image"]``); the text
        runs read the query, and fusion weighs them as ever. With no query, the picture alone is
        ranked by the visual run (the fields that rank text or fuse runs are refused).
        ``evidence=False`` leaves out snippets and boxes, for callers that only need the ranking
        (evaluation runs deep lists).
        ``rerank`` (a reranker, or the name of one built with ``rerank_model`` once per index
        object; see ``search.rerank``) reorders the ``rerank_candidates`` best fused tiles; its last
        call's size and time are in ``self.reranker(...).last``. ``timings``, when given, gets
        the seconds each stage of the search took (``search.engine.Laps``: check, bm25, dense,
        encode, visual, fuse, rank, rerank, evidence).
        """
        from pagesight.search import engine
        from pagesight.search.rerank import rerank_stage

        request, reranker = self.search_request(
            query, k, image=image, region=region, rerank=rerank, **options
        )
        reranking = None
        if reranker is not None:
            reranking = rerank_stage(
                self.catalog, self.settings, self.tile_image, reranker, request.rerank_candidates
            )
        return engine.search_text(
            self.store,
            request,
            visual_encoder=self.visual_encoder,
            evidence=evidence,
            rerank=reranking,
            timings=timings,
        )

    def search_request(
        self,
        query: str | SearchRequest,
        k: int | None = None,
        *,
        image: Image.Image | None = None,
        region: tuple[float, float, float, float] | None = None,
        rerank: str | Reranker | None = None,
        **options: Any,
    ) -> tuple[SearchRequest, Reranker | None]:
        """The request ``search`` makes of these arguments, its candidates widened to what its
        reranker reads, and that reranker (loaded: ``reranker``), or None. For a caller that runs
        the search's stages itself (``serve.pool.Lending``)."""
        reranker = None
        if rerank is not None and not isinstance(rerank, str):
            reranker, rerank = rerank, None
        by_image = image is not None or region is not None or isinstance(query, ImageSearchRequest)
        kind = ImageSearchRequest if by_image else SearchRequest
        request = kind.given(query, k=k, rerank=rerank, image=image, region=region, **options)
        request = request.search_request()
        if reranker is not None and isinstance(request, ImageSearchRequest) and not request.query.strip():
            raise PagesightError(
                "an image alone is searched by its visual run, without rerank; give a query too"
            )
        if reranker is None and request.rerank is None:
            return request, None
        reranker = reranker or self.reranker(request.rerank, request.rerank_model)
        return request.replace(candidates=max(request.candidates, request.rerank_candidates)), reranker

    def reranker(self, name: str, model: str | None = None) -> Reranker:
        """The reranker ``name`` with ``model`` (``search.rerank.make_reranker``) on this index's
        device, with its leave to run a model's own code, calling a model behind an endpoint at
        ``self.endpoint``, loaded once per index object."""
        key = (name, model)
        if key not in self._rerankers:
            from pagesight.search.rerank import make_reranker

            self._rerankers[key] = make_reranker(
                name,
                model=model,
                device=self.device,
                trust_remote_code=self.trust_remote_code,
                endpoint=self.endpoint,
            )
        return self._rerankers[key]

    def search_image(
        self,
        image: Image.Image,
        k: int = 10,
        *,
        region: tuple[float, float, float, float] | None = None,
        **options: Any,
    ) -> list[Hit]:
        """The ``k`` best tiles for an image alone (PixSearch): a whole image, or the ``region``
        (x0, y0, x1, y1 in its pixels) of it, through the index's visual encoder, with the search
        fields ``options`` (``doc_ids``, ``where``, ...); ``search`` with an ``ImageSearchRequest``
        and no query."""
        return self.search(ImageSearchRequest(image=image, region=region, k=k, **options))

    def ask(
        self,
        question: str | AskRequest,
        reader: str | Reader | None = None,
        *,
        image: Image.Image | None = None,
        region: tuple[float, float, float, float] | None = None,
        hits: list[Hit] | None = None,
        on_text: Callable[[str], None] | None = None,
        **options: Any,
    ) -> Answer:
        """Answer ``question`` (an ``AskRequest``, or the question and the request's fields as
        keywords) from its ``k`` best tiles, with citations; see ``pagesight.answer.ask``.

        ``reader`` is a reader, or the name of one built with the request's reader options
        (default: the request's ``reader``; one built here has this index's leave to run a
        model's own code). ``image``: a picture the question is about, searched
        with the question (its ``region`` when given; see ``search``) and shown to a reader that
        reads images beside the tiles. With ``agent`` the reader (a model reader) searches
        itself, ``k`` tiles a search, up to ``max_searches`` times, by text or by regions of the
        question's ``image``, then answers from the tiles it read. ``hits``: the tiles to answer
        from, when the caller has searched already (the request's search is then not run again).
        """
        from pagesight.answer.ask import ask

        given = {"image": image, "region": region, "hits": hits}
        request, reader, _ = self._asking(question, reader, options)
        return ask(self, request, reader, on_text=on_text, **given)

    def ask_stream(
        self, question: str | AskRequest, reader: str | Reader | None = None, **options: Any
    ) -> Iterator[str | Answer]:
        """``ask`` as it happens, asked as ``ask`` is (but ``on_text``): the answer's text in pieces
        (``str``) as the reader writes them (whole once read, for a reader that cannot stream), then
        the ``Answer``, last; see ``pagesight.answer.ask.ask_stream``. Stopping early stops the
        reader at its next piece."""
        from pagesight.answer.ask import ask_stream

        request, reader, given = self._asking(question, reader, options)
        return ask_stream(self, request, reader, **given)

    def _asking(
        self, question: str | AskRequest, reader: str | Reader | None, options: dict[str, Any]
    ) -> tuple[AskRequest, Reader, dict[str, Any]]:
        """The request ``ask`` answers, the reader it reads with (built here when named) and
        ``ask``'s own arguments of ``options`` (the rest are the request's fields)."""
        given = {name: options.pop(name) for name in ("image", "region", "hits") if name in options}
        if isinstance(reader, str):
            options["reader"] = reader
        request = AskRequest.given(question, **options)
        if reader is None or isinstance(reader, str):
            from pagesight.answer.base import build_reader

            reader = build_reader(request, trust_remote_code=self.trust_remote_code, endpoint=self.endpoint)
        return request, reader, given

    # Reading -----------------------------------------------------------------------------------

    def page_image(self, doc_id: str, page: int, max_pixels: int | None = None) -> Image.Image:
        """The page rendered again from its source at the index DPI (a few pages are cached), or
        at a lower one when that would be more than ``max_pixels`` pixels."""
        return self.renderer.page_image(doc_id, page, max_pixels)

    def tile_image(
        self, doc_id: str, page: int, tile: int = 0, compression: float = 1.0, *, rerender: bool = False
    ) -> Image.Image:
        """A tile cut from its re-rendered page, each side divided by sqrt(``compression``).

        Web page tiles come from the image kept in the index, or are rendered again from their
        source (always, with ``rerender``), pixel-identical to the first render.
        """
        return self.renderer.tile_image(doc_id, page, tile, compression, rerender=rerender)

    def explain(self, query: str, doc_id: str, page: int, tile: int = 0) -> SimilarityMap:
        """Which patches of a tile match ``query``: its similarity map by the index's visual encoder,
        a late-interaction one (ColPali, ColQwen, ColSmol, ColModernVBert) or CLIP (``search.explain``)."""
        from pagesight.search.explain import explain

        return explain(self.visual_encoder(), self.tile_image(doc_id, page, tile), query, self.store.location)

    @property
    def renderer(self) -> PageRenderer:
        """Renders pages and tiles again (``render/pages.py``); made on first use, as it imports
        the PDF renderer."""
        if self._renderer is None:
            from pagesight.render.pages import PageRenderer

            self._renderer = PageRenderer(self.catalog, self.settings, self.root)
        return self._renderer

    def info(self) -> dict:
        from pagesight.search.explain import draws_maps, query_image

        spec, encoder = self.catalog.visual_spec(), self.settings.visual_encoder
        languages: Counter = Counter()  # pages by language (text.language)
        for document in self.catalog.documents():
            languages.update(document.meta.get("languages") or {"en": document.n_pages})
        return {
            "path": self.store.location,
            **self.catalog.counts(),
            "languages": dict(languages),
            "generation": self.catalog.generation(),
            "retrievers_generation": self.store.retrievers_generation(),
            "settings": self.settings.to_dict(),
            "visual_encoder": spec,
            "visual_index": self.settings.visual_structure(spec["multi_vector"]) if spec else None,
            "similarity_maps": draws_maps(encoder),
            "query_image": query_image(encoder),
            "bytes_on_disk": self.store.size_bytes(),
        }

    def documents(self) -> list[str]:
        """The ids of the documents, sorted: what ``delete`` and ``doc_ids`` take."""
        return [d.id for d in self.catalog.documents()]

    def document_list(self, where: str | None = None) -> list[dict]:
        """Each document as {"id", "type", "pages", "source", "bytes", "notes", "fields"}, sorted
        by id; notes are caveats found when it was read (blank pages, a web page cut short), fields
        what a ``where`` filter reads (``pagesight.where``: ``language`` is its pages' most frequent),
        which ``where`` keeps them to."""
        from pagesight.where import document_fields, parse

        rows = self.catalog.documents() if where is None else self.catalog.documents_where(parse(where))
        return [
            {"id": d.id, "type": d.type, "pages": d.n_pages, "source": str(d.source), "bytes": d.size,
             "notes": list(d.meta.get("notes", [])), "fields": document_fields(d)}
            for d in rows
        ]  # fmt: skip

    def close(self) -> None:
        if self._owns_visual and hasattr(self._visual, "close"):
            self._visual.close()  # a served encoder's connections to its endpoint
        self._visual = None
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self.store.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
