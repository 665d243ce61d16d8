"""Pages' text given rather than read: transcriptions (a dataset's own, as ViDoRe's markdown or
IRPAPERS' text), indexed instead of the text layer and OCR (``IngestOptions.transcripts``).

    texts.jsonl   {"corpus_id": "<document id>_<page>" | "<document id>", "text": "..."} a line

A page's transcription is the one named ``<document id>_<page>`` (pages from 1), or, for a
document of one page (an image), the one named by the document id. A page the file does not name
has no text.

A transcription has no positions. Its lines are laid over the page in reading order, top to
bottom, each a band as wide as the page and as tall as its share of the page's characters, and go
to the tiles the bands fall in, as read lines do: a tall page's first tile gets its first lines. A
hit's boxes, a reader's context and its citations are then these bands: where a line is, roughly,
never the words' own boxes; their spans' source says so (``TRANSCRIPT``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from pagesight.errors import InputError
from pagesight.jsonl import numbered
from pagesight.records import Span

TRANSCRIPT = "transcript"  # the source of a transcription's spans and of its pages' text


def read_transcripts(path: str | os.PathLike) -> Mapping[str, str]:
    """The transcriptions of ``path`` by corpus id (read once while the file is unchanged, so
    read-only); ``InputError`` naming ``path:line`` for a line that is not ``{"corpus_id", "text"}``
    or names a corpus id a second time."""
    path = Path(path)
    try:
        changed = path.stat().st_mtime_ns
    except OSError:
        raise InputError(f"{path}: missing") from None
    return _read(path, changed)


@lru_cache(maxsize=4)
def _read(path: Path, changed: int) -> Mapping[str, str]:
    texts: dict[str, str] = {}
    for number, row in numbered(path):
        corpus_id, text = row.get("corpus_id"), row.get("text")
        if isinstance(corpus_id, bool) or not isinstance(corpus_id, (str, int)) or not isinstance(text, str):
            raise InputError(
                f'{path}:{number}: needs "corpus_id" (a string or a number) and "text" (a string)'
            )
        if str(corpus_id) in texts:
            raise InputError(f"{path}:{number}: corpus id {corpus_id} has a text already")
        texts[str(corpus_id)] = text
    return MappingProxyType(texts)


def page_transcript(texts: Mapping[str, str], doc_id: str, number: int, n_pages: int) -> str:
    """The transcription of page ``number`` of the document ``doc_id`` of ``n_pages`` pages ('' when
    there is none); a document of several pages named by its id alone is refused (which page?)."""
    own = f"{doc_id}_{number}"
    if own in texts:
        return texts[own]
    if doc_id in texts and n_pages > 1:
        raise InputError(
            f"the transcriptions name document {doc_id}, which has {n_pages} pages: name each page "
            f"({doc_id}_1, {doc_id}_2, ...)"
        )
    return texts.get(doc_id, "")


def transcript_spans(text: str, width: int, height: int) -> list[Span]:
    """``text``'s lines laid over a ``width`` x ``height`` page in reading order, each a band as
    wide as the page and as tall as its share of the characters (see the module docstring)."""
    lines = [line for line in (" ".join(raw.split()) for raw in text.splitlines()) if line]
    total = sum(len(line) for line in lines)
    spans, done = [], 0
    for line in lines:
        top = height * done / total
        done += len(line)
        spans.append(Span(line, (0.0, top, float(width), height * done / total), TRANSCRIPT))
    return spans
