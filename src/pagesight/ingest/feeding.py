"""The visual encoder kept fed at ingestion: documents in, the same documents out with their tiles'
vectors, in the order they came, the encoder never waiting for what the CPU does.

    documents read ─► windows         the main thread: a document's tiles cut from its pages in a
    (workers)         (by arrival)    thread pool as it arrives; a window of documents closes at
                                      ``window`` tiles, or as soon as no batch waits for a device
                                      (so a slow reader's documents are not held back), its tiles
                                      sorted by size into batches (``visual.plan_batches``)
                         │
                         ▼  a queue of batches, taken by each device as it is free
    per device:   prepare thread ─► encode thread
                  the processor        the model, and only the model; ``PREFETCH`` batches
                  (pinned on CUDA)     prepared ahead of it
                         │
                         ▼
    windows done, in order ─► the main thread commits each document alone (``pipeline.Storing``)

A batch spans documents, and a document's tiles may be spread over several batches; it is given
back once they all are encoded, so each document still commits in its own transaction. Every device
(``devices.every_gpu``) holds a copy of the encoder, fed from the same queue: one process, a thread
pair a device (the model's work runs outside Python's lock; what runs under it is the launching of
kernels, small beside a batch of pages). ``summary`` says how long the devices waited between
batches, over their encoding wall time.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from pagesight.devices import free_bytes
from pagesight.errors import InputError
from pagesight.ingest.outcome import Extracted
from pagesight.ingest.visual import Key, extracted_tiles, image_size, plan_batches
from pagesight.records import Document
from pagesight.settings import Settings

CPU_BATCH = 8  # tiles an encoder call takes off CUDA, where memory is no bound but time is
MAX_BATCH = 32  # the largest default on a GPU: past it a batch gains little, and pads more
TILE_BYTES = 1 << 30  # free GPU memory a tile of a batch is given by default (a 3B model's pages)
WINDOW_BATCHES = 4  # a window closes at this many batches a device
PREFETCH = 2  # batches prepared ahead of each device
WINDOWS_AHEAD = 2  # windows encoding or waiting at once; the main thread waits past them


def default_batch(encoders: list) -> int:
    """Tiles an encoder call takes when the run does not say: on CUDA a tile a GiB of the device's
    free memory (the least of the devices', the model loaded), 1 to ``MAX_BATCH``; ``CPU_BATCH``
    elsewhere."""
    free = [free_bytes(str(getattr(encoder, "device", "cpu"))) for encoder in encoders]
    if not free or any(found is None for found in free):
        return CPU_BATCH
    return max(1, min(MAX_BATCH, min(free) // TILE_BYTES))


def prepare(encoder, images: list[Image.Image]) -> Any:
    """The CPU half of an encoder call: its processor's (``prepare_images``), or the images for an
    encoder that has no such half."""
    return encoder.prepare_images(images) if hasattr(encoder, "prepare_images") else images


def encode(encoder, prepared: Any) -> list:
    return (
        encoder.encode_prepared(prepared)
        if hasattr(encoder, "encode_prepared")
        else encoder.encode_images(prepared)
    )


@dataclass
class _Window:
    """Documents (and the failures and unchanged inputs between them, kept in order) whose tiles are
    encoded together; ``done`` once every batch of them is back, or one failed (``error``)."""

    items: list[Extracted] = field(default_factory=list)
    cutting: list[Future | None] = field(default_factory=list)  # each document's tiles being cut
    vectors: list[dict] = field(default_factory=list)
    tiles: int = 0  # tiles of its documents, from their records (before they are cut)
    pending: int = 0  # batches not back yet
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, extracted: Extracted, cutting: Future | None) -> None:
        self.items.append(extracted)
        self.cutting.append(cutting)
        self.vectors.append({})
        if cutting is not None:
            self.tiles += sum(len(page.tiles) for page in extracted.outcome.pages)

    def finish(self, tiles: list, vectors: list | None, error: BaseException | None) -> None:
        """A batch of this window back: its vectors, or the error it failed with."""
        with self.lock:
            if error is not None:
                self.error = self.error or error
            else:
                for (item, key, _), vector in zip(tiles, vectors):
                    self.vectors[item][key] = vector
            self.pending -= 1
            if self.pending <= 0 or self.error is not None:
                self.done.set()

    def given_back(self) -> Iterator[Extracted]:
        for item, cutting, vectors in zip(self.items, self.cutting, self.vectors):
            if cutting is not None and isinstance(item.outcome, Document):
                item.images, item.pages = vectors, None
            yield item


@dataclass
class _Batch:
    window: _Window
    tiles: list[tuple[int, Key, Image.Image]]  # (the window's item, the tile's key, its image)


class Timeline:
    """When each encoder call ran, by device: the devices' idle share between calls."""

    def __init__(self):
        self.calls: dict[int, list[tuple[float, float, int]]] = {}
        self.lock = threading.Lock()

    def record(self, device: int, start: float, end: float, tiles: int) -> None:
        with self.lock:
            self.calls.setdefault(device, []).append((start, end, tiles))

    def summary(self) -> dict:
        """Tiles, calls, the seconds encoding (``encode_s``, every device's summed), the devices'
        wall time from their first call's start to their last's end (``wall_s``, summed) and the
        share of it spent between calls (``idle_fraction``: waiting for input)."""
        tiles = calls = 0
        busy = wall = 0.0
        for spans in self.calls.values():
            spans = sorted(spans)
            tiles += sum(count for _, _, count in spans)
            calls += len(spans)
            busy += sum(end - start for start, end, _ in spans)
            wall += spans[-1][1] - spans[0][0]
        idle = max(0.0, wall - busy)
        return {
            "tiles": tiles,
            "calls": calls,
            "encode_s": round(busy, 3),
            "wall_s": round(wall, 3),
            "idle_fraction": round(idle / wall, 4) if wall > 0 else 0.0,
        }


class VisualFeed:
    """``feed(outcomes)``: each ``Extracted`` of ``outcomes`` again, in order, a document's with its
    tile vectors (``Extracted.images``), or as the ``InputError`` its pages failed to render with;
    ``encoders`` are one encoder a device (the same model), ``batch`` the tiles a call takes
    (None: ``default_batch``), ``window`` the tiles a window closes at (None: ``WINDOW_BATCHES``
    batches a device); ``eager``, whether it also closes as soon as no batch waits for a device
    (off, windows are of ``window`` tiles whatever the pace: tests). An encoder's failure is
    raised, as the encoder's own call raises it."""

    def __init__(
        self,
        encoders: list,
        settings: Settings,
        batch: int | None = None,
        window: int | None = None,
        cutters: int = 2,
        eager: bool = True,
    ):
        self.encoders, self.settings = list(encoders), settings
        self.batch = batch or default_batch(self.encoders)
        self.window = window or self.batch * WINDOW_BATCHES * len(self.encoders)
        self.cutters, self.eager = cutters, eager
        self.timeline = Timeline()
        self._queue: queue.Queue[_Batch | None] = queue.Queue()
        self._stopping = threading.Event()

    def summary(self) -> dict:
        """What the report says of the visual encoding (``Timeline.summary``, the batch, devices)."""
        devices = [str(getattr(encoder, "device", "?")) for encoder in self.encoders]
        return {**self.timeline.summary(), "batch": self.batch, "devices": devices}

    def __call__(self, outcomes: Iterable[Extracted]) -> Iterator[Extracted]:
        threads = [
            thread for number, encoder in enumerate(self.encoders) for thread in self._start(number, encoder)
        ]
        cutter = ThreadPoolExecutor(self.cutters, thread_name_prefix="pagesight-tiles")
        windows: deque[_Window] = deque()
        window = _Window()
        try:
            for extracted in outcomes:
                cutting = None
                if isinstance(extracted.outcome, Document):
                    cutting = cutter.submit(extracted_tiles, extracted, self.settings)
                window.add(extracted, cutting)
                if window.tiles >= self.window or (self.eager and self._queue.empty()):  # no device waits
                    windows.append(self._close(window))
                    window = _Window()
                yield from self._given_back(windows, WINDOWS_AHEAD)
            windows.append(self._close(window))
            yield from self._given_back(windows, 0)
        finally:
            self._stop(threads)
            cutter.shutdown(wait=False, cancel_futures=True)

    def _close(self, window: _Window) -> _Window:
        """The window's tiles, once cut, queued in batches; a document whose pages cannot be
        rendered fails alone."""
        tiles: list[tuple[int, Key, Image.Image]] = []
        for number, cutting in enumerate(window.cutting):
            if cutting is None:
                continue
            try:
                images = cutting.result()
            except InputError as exc:
                item = window.items[number]
                window.items[number] = Extracted(item.label, item.doc_id, exc, replacing=item.replacing)
                window.cutting[number] = None
                continue
            tiles += [(number, key, image) for key, image in images.items()]
        batches = plan_batches([image_size(image) for _, _, image in tiles], self.batch)
        window.pending = len(batches)
        if not batches:
            window.done.set()
        for chosen in batches:
            self._queue.put(_Batch(window, [tiles[i] for i in chosen]))
        return window

    def _given_back(self, windows: deque[_Window], ahead: int) -> Iterator[Extracted]:
        """The documents of the windows done, in order; waits while more than ``ahead`` are not."""
        while windows and (windows[0].done.is_set() or len(windows) > ahead):
            window = windows[0]
            window.done.wait()
            windows.popleft()
            if window.error is not None:
                raise window.error
            yield from window.given_back()

    def _start(self, number: int, encoder) -> list[threading.Thread]:
        ready: queue.Queue = queue.Queue(PREFETCH)
        threads = [
            threading.Thread(target=self._preparing, args=(encoder, ready), daemon=True),
            threading.Thread(target=self._encoding, args=(number, encoder, ready), daemon=True),
        ]
        for thread in threads:
            thread.name = f"pagesight-visual-{number}-{'prepare' if thread is threads[0] else 'encode'}"
            thread.start()
        return threads

    def _preparing(self, encoder, ready: queue.Queue) -> None:
        """A device's processor: batches from the queue, prepared, handed to its encoding thread."""
        while (batch := self._queue.get()) is not None:
            if batch.window.error is not None or self._stopping.is_set():
                ready.put((batch, None, batch.window.error))
                continue
            try:
                ready.put((batch, prepare(encoder, [image for _, _, image in batch.tiles]), None))
            except BaseException as exc:  # given to the window, which the main thread raises
                ready.put((batch, None, exc))
        ready.put(None)

    def _encoding(self, number: int, encoder, ready: queue.Queue) -> None:
        """A device's model: prepared batches encoded one after another, their vectors given back."""
        while (prepared := ready.get()) is not None:
            batch, inputs, error = prepared
            vectors = None
            if error is None and not self._stopping.is_set():
                try:
                    start = time.perf_counter()
                    vectors = encode(encoder, inputs)
                    self.timeline.record(number, start, time.perf_counter(), len(batch.tiles))
                except BaseException as exc:
                    error = exc
            batch.window.finish(batch.tiles, vectors, error or (None if vectors is not None else _STOPPED))
            del inputs, prepared, batch  # the device's inputs go before the next batch is taken

    def _stop(self, threads: list[threading.Thread]) -> None:
        """The threads ended: batches not started dropped, the ones running finished."""
        self._stopping.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        for _ in self.encoders:
            self._queue.put(None)
        for thread in threads:
            thread.join(timeout=600)


_STOPPED = InputError("ingestion stopped before this document's tiles were encoded")
