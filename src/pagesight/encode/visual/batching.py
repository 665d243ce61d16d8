"""Queries encoded together: the text and image queries of concurrent callers that wait for the
encoder gathered into one encoder call.

A server answers visual searches in many threads. Each alone would run the query encoder on a
batch of one, and a GPU then does one query's work per forward pass. ``QueryBatcher`` wraps a
loaded encoder: a caller's ``encode_queries`` (or ``encode_image_queries``) joins the batch being
gathered, or opens one and leads it. The leader waits for the encoder, which runs one batch at a
time: the batch takes whoever comes until the encoder is free (or ``max_batch`` queries wait), so
under load a batch holds the queries that arrived while the one before it was encoded (as
Triton's dynamic batcher and vLLM's scheduler batch: no delay of their own by default). Each
caller gets its own vectors back. A batch that fails is encoded again caller by caller, so a
query the model cannot take (one tenant's) fails alone and the others of its batch get their
vectors. Everything else (``encode_images``, ``spec``, ``max_pixels``, ...) is the wrapped
encoder's.

A query that finds the encoder free is encoded at once. ``window`` (seconds) makes a leader wait
that long for others first: a burst arriving together is then one batch instead of its first
query and the rest, at the price of every lone query waiting the window. A 3 ms window made one
client's visual search through ``serve`` 3-5 ms slower on two cores and 16 clients' no faster
(BENCHMARKS.md, "Visual queries: no batching window of pagesight's own"); with a window alone,
batches there held one or two queries ("Visual search served to many clients at once"). Vectors are those of the wrapped encoder's batches (its padding
masked).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

WINDOW = 0.0  # seconds a leader waits for other queries before it waits for the encoder
MAX_BATCH = 32  # queries in one encoder call


class _Batch:
    def __init__(self) -> None:
        self.items: list = []
        self.callers: list[tuple[int, int]] = []  # each caller's (start, count) among the items
        self.errors: dict[int, BaseException] = {}  # by caller's start: its own failure
        self.full = threading.Event()  # max_batch reached: the leader stops gathering
        self.done = threading.Event()
        self.vectors: list | None = None
        self.error: BaseException | None = None


class QueryBatcher:
    """``encoder`` with its query encodings gathered across threads (the module docstring)."""

    def __init__(self, encoder: Any, window: float = WINDOW, max_batch: int = MAX_BATCH):
        self.encoder, self.window, self.max_batch = encoder, window, max_batch
        self._lock = threading.Lock()
        self._encoding = threading.Lock()  # one batch on the encoder at a time
        self._open: dict[str, _Batch] = {}  # the batch gathering now, by kind of query

    def __getattr__(self, name: str) -> Any:
        return getattr(self.encoder, name)

    def encode_queries(self, texts: Sequence[str], progress=None) -> list:
        return self._gathered("text", list(texts))

    def encode_image_queries(self, images: Sequence, progress=None) -> list:
        return self._gathered("image", list(images))

    def _gathered(self, kind: str, items: list) -> list:
        """The vectors of ``items``, encoded in a batch with other threads' queries of ``kind``."""
        if not items:
            return []
        with self._lock:
            batch = self._open.get(kind)
            leader = batch is None
            if leader:
                batch = self._open[kind] = _Batch()
            start = len(batch.items)
            batch.items.extend(items)
            batch.callers.append((start, len(items)))
            if len(batch.items) >= self.max_batch:
                del self._open[kind]  # closed: the next caller opens another
                batch.full.set()
        if leader:
            self._lead(kind, batch)
        else:
            batch.done.wait()
        error = batch.error or batch.errors.get(start)
        if error is not None:
            raise error
        return batch.vectors[start : start + len(items)]

    def _lead(self, kind: str, batch: _Batch) -> None:
        batch.full.wait(self.window)
        try:
            with self._encoding:
                with self._lock:  # the encoder is free: the batch takes no one more
                    if self._open.get(kind) is batch:
                        del self._open[kind]
                encode = self.encoder.encode_queries if kind == "text" else self.encoder.encode_image_queries
                try:
                    batch.vectors = encode(batch.items)
                except Exception:
                    if len(batch.callers) == 1:
                        raise
                    batch.vectors = self._alone(encode, batch)
        except BaseException as exc:  # every caller of the batch sees its failure
            batch.error = exc
        finally:
            batch.done.set()

    @staticmethod
    def _alone(encode, batch: _Batch) -> list:
        """Each caller's queries encoded without the others', its failure its own."""
        vectors: list = [None] * len(batch.items)
        for start, count in batch.callers:
            try:
                vectors[start : start + count] = encode(batch.items[start : start + count])
            except Exception as exc:
                batch.errors[start] = exc
        return vectors
