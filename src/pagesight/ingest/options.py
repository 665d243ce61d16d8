"""What an ingestion is asked with besides its inputs: one frozen, self-checking ``IngestOptions``,
taken by ``Index.add`` (or its fields as keywords), the CLI's ``ingest``, the server's uploads and
eval's indexing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from pagesight.errors import PagesightError
from pagesight.render.web.jobs import RenderOptions
from pagesight.settings import OCR_MODES, Settings
from pagesight.spec import check_fields, option


@dataclass
class RayOptions:
    """Where and how wide ingestion runs on Ray."""

    address: str | None = option(
        None,
        "With --ray: the cluster (ray://HOST:10001, HOST:6379 or auto; default: a local Ray in this "
        "process); files must be at the same paths on every node.",
        flags=("--ray-address",),
    )
    readers: int | None = option(
        None,
        "Read tasks at once (default: as many as the cluster has CPUs; ingest: --jobs).",
        ge=1,
        cli=False,
    )
    encoders: int = option(
        1,
        "With --ray: actors per encoder model (each visual one on a GPU of its own when the cluster has GPUs).",
        ge=1,
        flags=("--ray-encoders",),
    )
    gpus_per_encoder: float | None = option(
        None,
        "With --ray: GPUs for each encoder actor (default: one for each visual encoder actor when the "
        "cluster has GPUs, none for the dense text model's).",
        ge=0,
        flags=("--ray-gpus",),
    )
    device: str = option(
        "auto",
        "Where the visual encoder runs in its actors: auto, cpu, cuda, ... (ingest: --device).",
        cli=False,
    )
    trust_remote_code: bool = option(
        False, "Whether the actors' visual encoder may run its model's own code.", cli=False
    )

    def __post_init__(self) -> None:
        check_fields(self, "ray: ")


def meta_fields(given: list[str], what: str = "--meta") -> dict[str, str]:
    """``KEY=VALUE`` items (``ingest --meta``, an upload's ``meta`` form fields) as fields; the
    catalog's facts (``where.FACTS``: id, path, type, ...) are refused."""
    from pagesight.where import FACTS

    fields = {}
    for item in given:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PagesightError(f"{what} must be KEY=VALUE, got '{item[:100]}'")
        if key.strip() in FACTS:
            raise PagesightError(
                f"{what}: '{key.strip()}' is the catalog's own field ({', '.join(FACTS)}); it cannot be given"
            )
        fields[key.strip()] = value.strip()
    return fields


@dataclass(frozen=True)
class TextOptions:
    """How the worker processes give a run's pages their text: ``ocr`` (auto, always, never), the
    pages' ``language`` when the run gives one, whose OCR model then reads them (None: each page's
    told from a first OCR, ``text.ocr.LanguageOcr``), and ``transcripts``, a file of the pages'
    text (``text.transcripts``) taken instead of their text layer and OCR (None: they are read).
    With ``pages``, the workers also render each page at the index DPI for the visual encoder, from
    the file they read (``outcome.Rendered``), so the process that encodes does not."""

    ocr: str = "auto"
    language: str | None = None
    transcripts: str | None = None
    pages: bool = False


@dataclass(frozen=True)
class IngestOptions:
    """``ocr``: auto (pages without a text layer), always or never. ``jobs``: worker processes
    (None: one per core). A file may take ``timeout`` seconds plus ``page_timeout`` for each page
    read, and ``max_memory`` bytes (None: no limit). ``web``: how web pages render (width, tile
    height and the per-page timeout come from the index's settings and ``timeout``; a mapping of
    its fields is taken too). ``ray``: read and encode on a Ray cluster (True: a local Ray, a
    string: a cluster's address, or ``RayOptions``); web pages are then refused. ``meta``: fields
    every document of the run carries, for ``where`` filters (``pagesight.where``; a file's own, from
    ``pagesight.meta.csv`` and ``<file>.meta.json`` beside it, take precedence). ``stands_for``:
    files read where they are but recorded as another path, whose stem is the document's id and
    which is its source (a server's staged upload, standing for the file it replaces once read).
    ``transcripts``: a JSON-lines file of the pages' text (``text.transcripts``: a dataset's own
    transcriptions), indexed instead of their text layer and OCR; checked when the options are
    made. Files only: web pages keep their own text. ``visual_batch``: tiles a visual encoder call
    takes, of several documents, longest first (None: from the accelerator's free memory,
    ``ingest.feeding.default_batch``)."""

    ocr: str = option(
        "auto",
        "OCR pages without a usable text layer (auto), all, or none; web pages take the DOM's text "
        "unless always (then OCR reads their tiles).",
        choices=OCR_MODES,
    )
    jobs: int | None = option(
        None, "Reader processes (default: one per core).", ge=1, flags=("--jobs", "-j"), none=0
    )
    timeout: float = option(
        120.0, "Seconds allowed to read one file (or render one web page), besides its pages."
    )
    page_timeout: float = option(20.0, "Seconds more a file may take for each page it has read.", ge=0)
    max_memory: int | None = option(
        4 << 30, "GiB of memory a reader process may use (bytes in the library; 0: no limit).", unit=1 << 30
    )
    web: RenderOptions = option(
        help="How web pages render (its fields the command line offers, as options of their own).",
        factory=RenderOptions,
        cli=False,
        parts=RenderOptions,
    )
    ray: RayOptions | None = option(
        None,
        "Read and encode files on Ray (a local Ray unless --ray-address).",
        flags=("--ray/--no-ray",),
        taken_as=bool,
        parts=RayOptions,
    )
    meta: Mapping[str, str | float] = option(
        help="A field KEY=VALUE every document ingested carries, for where filters (repeatable).",
        factory=dict,
        taken_as=list[str],
        read=lambda given, name: meta_fields(given, name),
        form=True,
    )
    # the worker processes' niceness: a server ingests uploads at priority.BACKGROUND
    nice: int = option(0, "The worker processes' niceness.", ge=0, le=19, cli=False)
    language: str | None = option(
        None,
        "Every page's language, for BM25's stemming and stop words: en, fr, de, es, it or pt "
        "(default: detected a page).",
        form=True,
    )
    stands_for: Mapping[str, str] = option(
        help="Files read where they are but recorded as another path (read path: recorded path).",
        factory=dict,
        cli=False,
    )
    transcripts: str | None = option(
        None, "A texts.jsonl read instead of the pages' text layer and OCR (text.transcripts).", cli=False
    )
    # the machine's, not an uploader's: a batch too large for the card fails the server's ingestion
    visual_batch: int | None = option(
        None,
        "Tiles the visual encoder takes in one call, from across documents (default: a tile a GiB of "
        "the GPU's free memory, up to 32; 8 on the CPU; 0: the default).",
        ge=1,
        none=0,
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.transcripts is not None:
            from pagesight.text.transcripts import read_transcripts

            object.__setattr__(self, "transcripts", str(self.transcripts))
            read_transcripts(self.transcripts)  # a malformed line is refused before any file is read
        if self.language is not None:
            from pagesight.text.language import check_language

            check_language(self.language)
        if not self.timeout > 0 or not self.page_timeout >= 0:
            raise PagesightError("timeout must be above 0 and page_timeout 0 or more")
        if self.max_memory is not None and self.max_memory <= 0:
            raise PagesightError(f"max_memory must be above 0 bytes, got {self.max_memory}")
        for name, value in self.meta.items():
            if (
                not (isinstance(name, str) and name)
                or isinstance(value, bool)
                or not isinstance(value, (str, int, float))
            ):
                raise PagesightError(f"meta: '{name}' must name a string or a number, got {value!r}")
        if isinstance(self.web, Mapping):
            object.__setattr__(self, "web", _parts(RenderOptions, self.web, "web"))
        if isinstance(self.ray, Mapping):
            object.__setattr__(self, "ray", _parts(RayOptions, self.ray, "ray"))
        elif self.ray is True or isinstance(self.ray, str):
            object.__setattr__(self, "ray", RayOptions(address=None if self.ray is True else self.ray))
        elif self.ray is False:
            object.__setattr__(self, "ray", None)

    @classmethod
    def given(cls, options: IngestOptions | None = None, **fields: Any) -> IngestOptions:
        """``options`` (default ones when None) with ``fields`` over them."""
        from dataclasses import replace

        base = options or cls()
        return replace(base, **fields) if fields else base


def _parts(kind: type, given: Mapping[str, Any], what: str) -> Any:
    """A ``kind`` (``RenderOptions``, ``RayOptions``) from a mapping of its fields."""
    known = {f.name for f in fields(kind)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise PagesightError(f"unknown {what} option {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return kind(**given)


def check_new_index(settings: Settings) -> None:
    """Refuse settings naming models no registry knows, or layout regions that cannot be made,
    before an index is made with them (``Index.open``)."""
    from pagesight.encode.dense import check_dense_model
    from pagesight.encode.visual import ENCODERS

    if settings.dense_model is not None:
        check_dense_model(settings.dense_model)
    if settings.visual_encoder is not None and settings.visual_encoder not in ENCODERS:
        raise PagesightError(
            f"unknown visual encoder '{settings.visual_encoder}'; choose one of {', '.join(sorted(ENCODERS))}"
        )
    if settings.layout:
        from pagesight.text.layout import model_path

        model_path()  # the extra is installed and its model is there
