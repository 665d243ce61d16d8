"""Queries of concurrent threads encoded together (``QueryBatcher``) on tiny random-weight CLIP and
ColQwen2: each thread gets the vectors it would get alone, the encoder is called once for a batch
instead of once a thread, an encoder's failure reaches every thread of its batch, and a query the
model cannot take fails alone."""

from __future__ import annotations

import importlib.util
import threading
import time

import numpy as np
import pytest

from pagesight.encode.visual import make_encoder
from pagesight.encode.visual.batching import QueryBatcher

from .conftest import build_clip, build_qwen

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


class Counted:
    """A real encoder whose query calls are counted (everything else is its own)."""

    def __init__(self, encoder):
        self.encoder, self.calls = encoder, []

    def __getattr__(self, name):
        return getattr(self.encoder, name)

    def encode_queries(self, texts):
        self.calls.append(len(texts))
        return self.encoder.encode_queries(texts)

    def encode_image_queries(self, images):
        self.calls.append(len(images))
        return self.encoder.encode_image_queries(images)


def together(function, inputs: list) -> list:
    """``function(item)`` for each input, each in its own thread, started at once."""
    start = threading.Barrier(len(inputs))
    results: list = [None] * len(inputs)

    def run(n: int) -> None:
        start.wait()
        try:
            results[n] = function(inputs[n])
        except Exception as exc:  # noqa: BLE001 - the test reads it
            results[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def assert_close(got, expected) -> None:
    got, expected = np.asarray(got, np.float32), np.asarray(expected, np.float32)
    assert got.shape == expected.shape
    cosines = (got * expected).sum(-1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(expected, axis=-1))
    assert cosines.min() >= 0.9999


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-clip")
    build_clip(folder)
    return make_encoder("clip", model=str(folder), device="cpu")


@pytest.mark.timeout(180)
def test_text_and_image_queries_of_many_threads_are_one_batch_each(clip, queries, pages):
    counted = Counted(clip)
    batcher = QueryBatcher(counted, window=0.5)  # long enough for every thread to join on a busy machine
    texts = (queries * 3)[:8]
    found = together(lambda text: batcher.encode_queries([text])[0], texts)
    assert len(counted.calls) < len(texts) and sum(counted.calls) == len(texts)
    for text, vector in zip(texts, found):
        assert_close(vector, clip.encode_queries([text])[0])
    counted.calls.clear()
    images = [page.crop((0, 0, 200, 200)) for page in pages[:4]]
    found = together(lambda image: batcher.encode_image_queries([image])[0], images)
    assert len(counted.calls) < len(images)
    for image, vector in zip(images, found):
        assert_close(vector, clip.encode_image_queries([image])[0])
    assert batcher.dim == clip.dim and batcher.encode_images is not None  # the rest is the encoder's


@pytest.mark.timeout(120)
def test_a_full_batch_is_encoded_at_once_and_a_failure_reaches_every_caller(clip, queries):
    counted = Counted(clip)
    batcher = QueryBatcher(counted, window=60.0, max_batch=4)  # only a full batch ends the wait
    found = together(lambda text: batcher.encode_queries([text]), (queries * 4)[:4])
    assert counted.calls == [4] and all(len(vectors) == 1 for vectors in found)

    class Broken(Counted):
        def encode_queries(self, texts):
            raise RuntimeError("the device went away")

    failing = QueryBatcher(Broken(clip), window=0.5)
    failed = together(lambda text: failing.encode_queries([text]), list(queries[:3]))
    assert all(isinstance(result, RuntimeError) for result in failed)
    assert failing.encode_queries([]) == []


@pytest.mark.timeout(120)
def test_queries_arriving_while_the_encoder_is_busy_are_its_next_batch(clip, queries):
    """With no window at all, the queries that arrive while a batch is encoded wait for the encoder
    together and are one batch after it (they were a batch each when a window alone gathered)."""
    texts = (queries * 4)[:7]

    class Slow(Counted):
        def encode_queries(self, batch):
            if not self.calls:  # the first batch holds the encoder until the others wait for it
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and len(waiting()) < len(texts) - len(batch):
                    time.sleep(0.01)
            return super().encode_queries(batch)

    def waiting() -> list:
        """The queries of the batch gathering now (none gather once a batch closes at its window)."""
        gathering = batcher._open.get("text")
        return gathering.items if gathering is not None else []

    slow = Slow(clip)
    batcher = QueryBatcher(slow, window=0.0)

    found = together(lambda text: batcher.encode_queries([text])[0], texts)
    assert sum(slow.calls) == len(texts) and len(slow.calls) <= 2, slow.calls
    for text, vector in zip(texts, found):
        assert_close(vector, clip.encode_queries([text])[0])


@pytest.mark.timeout(240)
def test_late_interaction_queries_of_different_lengths_keep_their_own_tokens(tmp_path, queries):
    if importlib.util.find_spec("colpali_engine") is None:
        pytest.skip("colpali-engine is not installed")
    from pagesight.encode.visual.late_interaction import import_colpali

    models = import_colpali()
    build_qwen(tmp_path / "colqwen2", "qwen2-vl", models.ColQwen2, models.ColQwen2Processor)
    encoder = make_encoder("colqwen2", model=str(tmp_path / "colqwen2"), device="cpu")
    batcher = QueryBatcher(encoder, window=0.5)
    texts = list(queries[:4])
    found = together(lambda text: batcher.encode_queries([text])[0], texts)
    lengths = {vector.shape[0] for vector in found}
    assert len(lengths) > 1  # padded together, each keeps its own real tokens
    for text, vector in zip(texts, found):
        assert_close(vector, encoder.encode_queries([text])[0])


@pytest.mark.timeout(120)
def test_a_query_the_model_cannot_take_fails_alone(clip, pages):
    """Issue 60, defect 7: one tenant's failing query (a picture of no pixels) failed every query
    batched with it; now it fails alone and the others get their own vectors."""
    batcher = QueryBatcher(clip, window=0.5)
    images = [page.crop((0, 0, 200, 200)) for page in pages[:3]] + [pages[0].crop((10, 10, 10, 10))]
    found = together(lambda image: batcher.encode_image_queries([image])[0], images)
    assert isinstance(found[-1], Exception)
    for image, vector in zip(images[:-1], found[:-1]):
        assert_close(vector, clip.encode_image_queries([image])[0])
