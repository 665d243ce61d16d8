"""What extracting one input gives the ingestion loop, the same for files, web pages and Ray.

Planning and extraction (a file's worker, the browser, Ray's tasks) produce ``Extracted`` records;
``pipeline`` stores each one the same way: a document is encoded (unless it comes encoded) and
committed in its own transaction, an unchanged input is noted, a failure is reported with its
reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pagesight.records import Document


@dataclass
class Unchanged:
    """An input whose content is already indexed; ``mtime_ns`` (when not None) is noted for it, so
    the next run skips it without reading."""

    source: str
    mtime_ns: int | None = None


@dataclass
class Extracted:
    """One input's outcome: its document (with its vectors, when encoded where it was extracted),
    ``Unchanged``, or the exception it failed with."""

    label: str  # the path or URL the report names
    doc_id: str
    outcome: Document | Unchanged | Exception
    replacing: bool = False  # the document replaces one of the same id
    keep_images: bool = True  # keep the tile images extraction attached (web screenshots)
    # Vectors computed where the document was extracted (Ray's encoder actors): None means encode here.
    vectors: dict[tuple[int, int], np.ndarray] | None = field(default=None, repr=False)
    images: dict[tuple[int, int], np.ndarray] | None = field(default=None, repr=False)
    spec: dict | None = None  # the visual encoder's spec, when ``images`` came from elsewhere
    # where the file is read now, when its recorded source is a path it is not at yet (a server's
    # staged upload, moved to its source only once committed): its pages are rendered from here
    read_from: str | None = None
    # its pages as the worker that read it rendered them at the index DPI (PNG by page number), for
    # the visual encoder: None when it did not (web pages, Ray), and they are rendered again
    pages: dict[int, bytes] | None = field(default=None, repr=False)


@dataclass
class Rendered:
    """What a worker gives for a document read with its pages rendered for the visual encoder
    (``TextOptions.pages``): the document, and each page at the index DPI as PNG by number."""

    document: Document
    pages: dict[int, bytes]
