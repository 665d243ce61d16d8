"""The visual encoder kept fed (``ingest/feeding.py``): tiles of several documents in one encoder
call, longest first, the processor's work in a thread of its own, documents given back whole and
in order with the vectors each tile has alone, every device fed from one queue, the batch from the
accelerator's free memory. The encoders here are stand-ins whose vector is read off the tile's own
pixels; the real models' vectors are compared in ``test_feeding_families.py``."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from PIL import Image

from pagesight.errors import InputError
from pagesight.ingest.extract import png
from pagesight.ingest.feeding import CPU_BATCH, MAX_BATCH, VisualFeed, default_batch
from pagesight.ingest.outcome import Extracted, Unchanged
from pagesight.ingest.visual import extracted_tiles, plan_batches
from pagesight.records import Document, Page, Tile
from pagesight.settings import Settings

SETTINGS = Settings(dense_model=None)
WIDTH = 112


def rendered(number: int, heights: list[list[int]]) -> Extracted:
    """Document ``number`` as its worker gives it: a page per list of tile heights, rendered (PNG),
    each tile's first pixel saying (document, page, tile)."""
    doc_id = f"doc{number}"
    document = Document(doc_id, f"/nowhere/{doc_id}.pdf", "0" * 64, "pdf", 1, 1)
    pages = {}
    for page_number, tiles in enumerate(heights, start=1):
        page = Page(page_number, WIDTH, sum(tiles), "pdf")
        image = Image.new("RGB", (WIDTH, page.height), (200, 220, 240))
        top = 0
        for index, height in enumerate(tiles):
            page.tiles.append(Tile(index, (0.0, float(top), float(WIDTH), float(top + height))))
            image.putpixel((0, top), (number, page_number, index))
            top += height
        document.pages.append(page)
        pages[page_number] = png(image)
    return Extracted(doc_id, doc_id, document, pages=pages)


class Recording:
    """A stand-in encoder: a tile's vector is its first pixel and its size, whatever its batch. It
    records each call's tiles as (document, page, tile, height) and the threads that prepared them,
    and sets ``called`` after each call; with ``barrier``, its first call waits for another
    device's."""

    multi_vector, dim = False, 5

    def __init__(self, barrier=None, device: str = "cpu", fail: bool = False):
        self.calls: list[list[tuple[int, int, int, int]]] = []
        self.threads: set[str] = set()
        self.barrier, self.device, self.fail = barrier, device, fail
        self.called = threading.Event()

    @staticmethod
    def vector(image: Image.Image) -> np.ndarray:
        return np.array([*image.getpixel((0, 0)), *image.size], np.float32)

    def prepare_images(self, images):
        self.threads.add(threading.current_thread().name)
        return [self.vector(image) for image in images]

    def encode_prepared(self, prepared):
        if self.barrier is not None and not self.calls:
            self.barrier.wait(30)
        if self.fail:
            raise RuntimeError("CUDA out of memory (a stand-in)")
        self.calls.append([(int(v[0]), int(v[1]), int(v[2]), int(v[4])) for v in prepared])
        self.called.set()
        return list(prepared)


def expected_vectors(items: list[Extracted]) -> dict[str, dict]:
    """Each document's vectors as its tiles give them alone (before the feed lets its pages go)."""
    return {
        item.doc_id: {key: Recording.vector(image) for key, image in extracted_tiles(item, SETTINGS).items()}
        for item in items
        if isinstance(item.outcome, Document)
    }


def corpus(count: int) -> list[Extracted]:
    heights = [[56, 28], [84], [28, 56, 84], [56]]
    return [rendered(n, [heights[n % 4], heights[(n + 1) % 4]]) for n in range(count)]


def check_given_back(out: list[Extracted], items: list[Extracted], expected: dict) -> None:
    assert [item.doc_id for item in out] == [item.doc_id for item in items]
    for item in out:
        if isinstance(item.outcome, Document):
            assert item.pages is None  # its pages are let go once its tiles are encoded
            assert item.images.keys() == expected[item.doc_id].keys()
            for key, vector in item.images.items():
                assert np.array_equal(vector, expected[item.doc_id][key])


@pytest.mark.timeout(60)
def test_calls_take_tiles_of_several_documents_longest_first_and_give_documents_back_in_order():
    items = corpus(24)
    items.insert(5, Extracted("gone.pdf", "gone", InputError("file is empty")))
    items.insert(9, Extracted("same.pdf", "same", Unchanged("same.pdf")))
    expected = expected_vectors(items)
    encoder = Recording()
    feed = VisualFeed([encoder], SETTINGS, batch=4, window=12, eager=False)
    out = list(feed(items))
    check_given_back(out, items, expected)
    assert isinstance(out[5].outcome, InputError) and isinstance(out[9].outcome, Unchanged)
    assert all(1 <= len(call) <= 4 for call in encoder.calls)
    assert any(len({doc for doc, *_ in call}) > 1 for call in encoder.calls), "no call spans documents"
    for call in encoder.calls:  # longest first: each call's tiles by height, from the tallest
        assert [height for *_, height in call] == sorted((height for *_, height in call), reverse=True)
    assert encoder.threads == {"pagesight-visual-0-prepare"}  # the processor beside the model's thread
    summary = feed.summary()
    assert summary["tiles"] == sum(len(vectors) for vectors in expected.values())
    assert summary["calls"] == len(encoder.calls) and summary["batch"] == 4
    assert summary["devices"] == ["cpu"] and 0 <= summary["idle_fraction"] <= 1


@pytest.mark.timeout(60)
def test_a_document_is_encoded_before_the_next_arrives_when_the_device_waits():
    """A slow reader's documents are not held back to fill a window: with no batch waiting for the
    device, the window closes at once (the next document here arrives only once the first's tiles
    have been encoded)."""
    items = corpus(3)
    encoder = Recording()

    def slowly():
        for item in items:
            yield item
            assert encoder.called.wait(20), "the document was held back for the next one"
            encoder.called.clear()

    expected = expected_vectors(items)
    check_given_back(list(VisualFeed([encoder], SETTINGS, batch=8)(slowly())), items, expected)
    assert len(encoder.calls) == 3


@pytest.mark.timeout(30)
def test_plan_batches_sorts_by_size_and_keeps_ties_in_order():
    assert plan_batches([5, 9, 5, 1, 9], 2) == [[1, 4], [0, 2], [3]]
    assert plan_batches([], 3) == []


@pytest.mark.timeout(60)
def test_a_document_whose_pages_cannot_be_cut_fails_alone():
    items = corpus(3)
    items[1].pages = {}  # its worker gave no page: it cannot be encoded
    expected = expected_vectors([items[0], items[2]])
    out = list(VisualFeed([Recording()], SETTINGS, batch=2)(items))
    assert isinstance(out[1].outcome, InputError) and "not rendered" in str(out[1].outcome)
    check_given_back([out[0], out[2]], [items[0], items[2]], expected)


@pytest.mark.timeout(60)
def test_an_encoder_failure_ends_the_run_with_its_error_and_stops_the_threads():
    feed = VisualFeed([Recording(fail=True)], SETTINGS, batch=2)
    with pytest.raises(RuntimeError, match="out of memory"):
        list(feed(corpus(6)))
    assert not [t for t in threading.enumerate() if t.name.startswith("pagesight-visual")]


@pytest.mark.timeout(60)
def test_every_device_takes_batches_from_the_one_queue():
    """Two devices: each first call waits for the other's, so both must have taken a batch."""
    items = corpus(12)
    expected = expected_vectors(items)
    barrier = threading.Barrier(2)
    devices = [Recording(barrier=barrier), Recording(barrier=barrier)]
    feed = VisualFeed(devices, SETTINGS, batch=2, window=8)
    check_given_back(list(feed(items)), items, expected)
    assert all(device.calls for device in devices)
    assert feed.summary()["calls"] == sum(len(device.calls) for device in devices)


@pytest.mark.timeout(30)
def test_the_default_batch_is_a_tile_a_gib_of_the_devices_free_memory(monkeypatch):
    torch = pytest.importorskip("torch")
    free = {"cuda:0": 12 << 30, "cuda:1": 20 << 30}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (free[str(device)], 80 << 30))
    on = [Recording(device="cuda:0"), Recording(device="cuda:1")]
    assert default_batch(on) == 12  # the least of the devices'
    free["cuda:0"] = 200 << 30
    assert default_batch(on[:1]) == MAX_BATCH
    free["cuda:0"] = 1 << 28
    assert default_batch(on[:1]) == 1
    assert default_batch([Recording(device="cpu")]) == CPU_BATCH
    assert VisualFeed([Recording(device="cpu")], SETTINGS).batch == CPU_BATCH


@pytest.mark.timeout(30)
def test_ingestion_encodes_on_every_gpu_torch_sees(monkeypatch):
    torch = pytest.importorskip("torch")
    from pagesight.devices import every_gpu

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    assert every_gpu("auto") == every_gpu("cuda") == ["cuda:0", "cuda:1", "cuda:2"]
    assert every_gpu("cuda:1") == ["cuda:1"] and every_gpu("cpu") == ["cpu"]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert every_gpu("auto") == ["auto"]


@pytest.mark.timeout(180)
def test_an_index_ingests_on_every_device_with_the_runs_batch(monkeypatch, tmp_path):
    """``Index.add`` with a copy of the encoder on each device (two CPUs standing in for two GPUs,
    ``devices.every_gpu``) and ``visual_batch``: the vectors of one encoder alone, tile for tile,
    and the report says how the tiles went (``pagesight ingest --json`` prints it)."""
    pytest.importorskip("transformers")
    import pagesight.devices
    from pagesight import Index
    from tests.conftest import cli
    from tests.encode.visual.conftest import clip_report_and_memo

    settings = clip_report_and_memo(tmp_path)
    pdfs = [tmp_path / "report.pdf", tmp_path / "memo.pdf"]
    alone = Index.open(tmp_path / "alone", settings=settings, device="cpu")
    assert alone.add(pdfs, ocr="never", visual_batch=1).visual["devices"] == ["cpu"]
    monkeypatch.setattr(pagesight.devices, "every_gpu", lambda device: ["cpu", "cpu"])
    both = Index.open(tmp_path / "both", settings=settings, device="cpu")
    report = both.add(pdfs, ocr="never", visual_batch=2)
    assert report.ok and report.visual["devices"] == ["cpu", "cpu"] and report.visual["batch"] == 2
    assert report.visual["tiles"] == 3 and report.visual["calls"] >= 2
    expected, got = stored_vectors(alone), stored_vectors(both)
    assert len(expected) == 3 and expected.keys() == got.keys()
    for key, vector in expected.items():
        cosine = np.dot(vector, got[key]) / np.linalg.norm(vector) / np.linalg.norm(got[key])
        assert cosine >= 0.9999  # stored in float16, so compared as cosines
    alone.close()
    both.close()
    monkeypatch.undo()
    shown = cli("ingest", str(pdfs[1]), "--index", str(tmp_path / "cli"), "--encoder", "clip",
                "--encoder-model", str(tmp_path / "clip"), "--no-dense", "--device", "cpu",
                "--visual-batch", "3", "--json")  # fmt: skip
    assert json.loads(shown.stdout)["visual"]["batch"] == 3


def stored_vectors(index) -> dict:
    """An index's visual vectors by (document, page, tile)."""
    rows = index.catalog.tiles(index.catalog.tile_ids().tolist())
    ids, vectors = index.catalog.visual_vectors(list(rows))
    return {(rows[int(i)].doc_id, rows[int(i)].page, rows[int(i)].idx): v for i, v in zip(ids, vectors)}
