"""What an ingestion is asked with besides its inputs: one frozen, self-checking ``IngestOptions``,
taken by ``Index.add`` (or its fields as keywords), the CLI's ``ingest``, the server's uploads and
eval's indexing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pagesight.errors import PagesightError
from pagesight.render.web.jobs import RenderOptions
from pagesight.settings import OCR_MODES


@dataclass
class RayOptions:
    """Where and how wide ingestion runs on Ray."""

    address: str | None = None  # None: start a local Ray in this process
    readers: int | None = None  # read tasks at once (default: as many as the cluster has CPUs)
    encoders: int = 1  # actors per encoder (each holds one copy of the model)
    gpus_per_encoder: float = 0.0  # num_gpus of each encoder actor
    device: str = "auto"  # where the visual encoder runs in its actors: auto, cpu, cuda, ...
    trust_remote_code: bool = False  # whether the actors' visual encoder may run its model's own code


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
class PageReading:
    """How the reader processes read a run's pages: ``ocr`` (auto, always, never), the pages'
    ``language`` when the run gives one, whose OCR model then reads them (None: each page's told
    from a reading, ``read.ocr.LanguageReader``), and ``transcripts``, a file of the pages' text
    (``read.transcripts``) read instead of their text layer and OCR (None: they are read)."""

    ocr: str = "auto"
    language: str | None = None
    transcripts: str | None = None


@dataclass(frozen=True)
class IngestOptions:
    """``ocr``: auto (pages without a text layer), always or never. ``jobs``: reader processes
    (None: one per core). A file may take ``timeout`` seconds plus ``page_timeout`` for each page
    read, and ``max_memory`` bytes (None: no limit). ``web``: how web pages render (width, tile
    height and the per-page timeout come from the index's settings and ``timeout``; a mapping of
    its fields is taken too). ``ray``: read and encode on a Ray cluster (True: a local Ray, a
    string: a cluster's address, or ``RayOptions``); web pages are then refused. ``meta``: fields
    every document of the run carries, for ``where`` filters (``pagesight.where``; a file's own, from
    ``pagesight.meta.csv`` and ``<file>.meta.json`` beside it, take precedence). ``stands_for``:
    files read where they are but recorded as another path, whose stem is the document's id and
    which is its source (a server's staged upload, standing for the file it replaces once read).
    ``transcripts``: a JSON-lines file of the pages' text (``read.transcripts``: a dataset's own
    transcriptions), indexed instead of their text layer and OCR; checked when the options are
    made. Files only: web pages keep their own text."""

    ocr: str = "auto"
    jobs: int | None = None
    timeout: float = 120.0
    page_timeout: float = 20.0
    max_memory: int | None = 4 << 30
    web: RenderOptions = field(default_factory=RenderOptions)
    ray: RayOptions | None = None
    meta: Mapping[str, str | float] = field(default_factory=dict)
    nice: int = 0  # the reader processes' niceness: a server ingests uploads at priority.BACKGROUND
    language: str | None = None  # every page's language (read.language); None: detected a page
    stands_for: Mapping[str, str] = field(default_factory=dict)  # read path -> recorded path
    transcripts: str | None = None  # a texts.jsonl read instead of the pages' text layer and OCR

    def __post_init__(self) -> None:
        if self.transcripts is not None:
            from pagesight.read.transcripts import read_transcripts

            object.__setattr__(self, "transcripts", str(self.transcripts))
            read_transcripts(self.transcripts)  # a malformed line is refused before any file is read
        if self.language is not None:
            from pagesight.read.language import check_language

            check_language(self.language)
        if not 0 <= self.nice <= 19:
            raise PagesightError(f"nice must be between 0 and 19, got {self.nice}")
        if self.ocr not in OCR_MODES:
            raise PagesightError(f"ocr must be one of {', '.join(OCR_MODES)}, got '{self.ocr}'")
        if self.jobs is not None and self.jobs < 1:
            raise PagesightError(f"jobs must be 1 or more, got {self.jobs}")
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
            object.__setattr__(self, "web", _web(self.web))
        if self.ray is True or isinstance(self.ray, str):
            object.__setattr__(self, "ray", RayOptions(address=None if self.ray is True else self.ray))
        elif self.ray is False:
            object.__setattr__(self, "ray", None)

    @classmethod
    def given(cls, options: IngestOptions | None = None, **fields: Any) -> IngestOptions:
        """``options`` (default ones when None) with ``fields`` over them."""
        from dataclasses import replace

        base = options or cls()
        return replace(base, **fields) if fields else base


def _web(given: Mapping[str, Any]) -> RenderOptions:
    known = set(RenderOptions.__dataclass_fields__)
    unknown = sorted(set(given) - known)
    if unknown:
        raise PagesightError(f"unknown web option {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return RenderOptions(**given)
