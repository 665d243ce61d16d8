"""The ``transformers`` reader at decoding time, on the tiny random-weight Qwen2-VL of
``test_vlm_reader``: its text handed on while it is generated, its stages timed apart, logits kept
only for log-probabilities asked for, the static cache, the attention implementation and the
images' pixel budget whatever the processor's own config says."""

from __future__ import annotations

import copy
import json
import shutil
import time

import pytest

from pagesight.answer.prompts import VisibleText
from pagesight.errors import PagesightError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize  # noqa: E402

from pagesight.answer.vlm import TransformersReader  # noqa: E402
from pagesight.answer.vlm_generation import STATIC_CACHE_BLOCK, Clock  # noqa: E402
from pagesight.answer.vlm_loading import MAX_IMAGE_TOKENS  # noqa: E402
from tests.answer.test_vlm_reader import PAGES, PIXELS, QUESTION, _item, tiny  # noqa: E402, F401


@pytest.fixture()
def context():
    return [_item(*page) for page in PAGES]


@pytest.fixture(scope="module")
def plain(tiny):  # noqa: F811
    """The tiny model made to write plain ASCII: every token that is not a printable character
    (partial UTF-8 bytes, the special tokens, ``<``) is suppressed, so each token is one piece."""
    model = copy.deepcopy(tiny.model)
    tokenizer = tiny.processor.tokenizer
    kept = [i for i in range(len(tokenizer)) if _printable(tokenizer.decode([i]))]
    model.generation_config.suppress_tokens = [
        i for i in range(model.config.text_config.vocab_size) if i not in kept
    ]
    model.generation_config.eos_token_id = None  # every answer runs to max_tokens
    return model


def _printable(text: str) -> bool:
    return len(text) >= 1 and text.isascii() and text.isprintable() and "<" not in text


class Forwards:
    """The start and end time of each forward pass of a model (torch hooks: generate inspects the
    forward's own signature, so it is not wrapped)."""

    def __init__(self, model):
        self.calls: list[tuple[float, float]] = []
        self._start = 0.0

        def before(module, args):
            self._start = time.perf_counter()

        def after(module, args, output):
            self.calls.append((self._start, time.perf_counter()))

        self.hooks = [model.register_forward_pre_hook(before), model.register_forward_hook(after)]

    def close(self):
        for hook in self.hooks:
            hook.remove()


@pytest.mark.timeout(120)
def test_text_is_handed_on_token_by_token_while_generating(plain, tiny, context):  # noqa: F811
    reader = TransformersReader.from_objects(plain, tiny.processor, max_tokens=8)
    forwards = Forwards(plain)
    pieces, steps = [], []

    def on_text(piece: str) -> None:
        pieces.append(piece)
        steps.append(len(forwards.calls))  # forward passes run when the piece came

    try:
        reading = reader.read(QUESTION, context, on_text=on_text)
    finally:
        forwards.close()
    assert reading.usage["completion_tokens"] == 8
    assert len(pieces) == 8 and all(pieces)  # one piece a token, as each was chosen
    assert steps == list(range(1, 9))  # token k reaches the caller right after forward pass k
    assert "".join(pieces).split() == reading.text.split()
    quiet = reader.read(QUESTION, context)  # no one to hand text to: the same answer
    assert quiet.text == reading.text


@pytest.mark.timeout(120)
def test_prefill_and_decode_are_timed_apart(plain, tiny, context):  # noqa: F811
    reader = TransformersReader.from_objects(plain, tiny.processor, max_tokens=6)
    forwards = Forwards(plain)
    try:
        before = time.perf_counter()
        reading = reader.read(QUESTION, context)
        after = time.perf_counter()
    finally:
        forwards.close()
    timings = reading.timings
    assert set(timings) == {"preprocess", "prefill", "decode"}
    (first_start, first_end), *rest = forwards.calls
    assert len(rest) == 5  # one forward pass a token after the first
    # prefill holds the first pass (the prompt) and ends before the second starts; decode holds the rest
    assert timings["prefill"] >= first_end - first_start
    assert before + timings["preprocess"] + timings["prefill"] <= rest[0][0]
    assert timings["decode"] >= rest[-1][1] - rest[0][0]
    assert sum(timings.values()) <= after - before
    assert reading.usage["decode_tokens_per_s"] == pytest.approx(5 / timings["decode"], rel=0.01)


@pytest.mark.timeout(120)
def test_logits_are_kept_only_for_logprobs(tiny, context):  # noqa: F811
    calls = []
    model = copy.deepcopy(tiny.model)
    generate = model.generate

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return generate(*args, **kwargs)

    model.generate = spy
    plain = TransformersReader.from_objects(model, tiny.processor, max_tokens=4)
    scored = TransformersReader.from_objects(model, tiny.processor, max_tokens=4, logprobs=True)
    a, b = plain.read(QUESTION, context), scored.read(QUESTION, context)
    assert "output_logits" not in calls[0] and "output_scores" not in calls[0]
    assert calls[1]["output_logits"] is True
    assert a.logprob is None and a.tokens is None
    assert b.logprob is not None and b.logprob < 0 and b.tokens == 4
    assert a.text == b.text


@pytest.mark.timeout(120)
def test_static_cache_gives_the_same_answer(tiny, context):  # noqa: F811
    calls = []
    model = copy.deepcopy(tiny.model)
    generate = model.generate

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return generate(*args, **kwargs)

    model.generate = spy
    dynamic = TransformersReader.from_objects(model, tiny.processor, max_tokens=5, logprobs=True)
    static = TransformersReader.from_objects(
        model, tiny.processor, max_tokens=5, logprobs=True, static_cache=True
    )
    a, b = dynamic.read(QUESTION, context), static.read(QUESTION, context)
    assert "cache_implementation" not in calls[0]
    assert calls[1]["cache_implementation"] == "static"
    length = calls[1]["max_cache_len"]
    assert length % STATIC_CACHE_BLOCK == 0 and length >= a.usage["prompt_tokens"] + 5
    assert a.text == b.text and a.logprob == pytest.approx(b.logprob, abs=1e-4)


@pytest.mark.timeout(120)
def test_attention_implementation(tiny):  # noqa: F811
    reader = TransformersReader(model=str(tiny.folder), device="cpu", max_tokens=2)
    assert reader.model.config._attn_implementation == "sdpa"  # no FlashAttention on a CPU
    eager = TransformersReader(model=str(tiny.folder), device="cpu", max_tokens=2, attention="eager")
    assert eager.model.config._attn_implementation == "eager"
    with pytest.raises(PagesightError, match="attention must be one of auto, sdpa"):
        TransformersReader(model=str(tiny.folder), device="cpu", attention="fast")


def _hub_layout(tiny, folder, max_pixels: int) -> None:  # noqa: F811
    """The tiny processor saved as the hub's Qwen-VL processors are: ``min_pixels`` and
    ``max_pixels`` keys beside ``size``, which override it when the processor is built."""
    shutil.copytree(tiny.folder, folder)
    config = json.loads((folder / "processor_config.json").read_text())
    config["image_processor"].update(min_pixels=28 * 28 * 4, max_pixels=max_pixels)
    (folder / "processor_config.json").write_text(json.dumps(config))


def _tokens(size: tuple[int, int], max_pixels: int, min_pixels: int = 28 * 28 * 4) -> int:
    height, width = smart_resize(size[1], size[0], factor=28, min_pixels=min_pixels, max_pixels=max_pixels)
    return (height // 28) * (width // 28)


@pytest.mark.timeout(180)
def test_the_pixel_budget_holds_against_the_processor_config(tiny, tmp_path):  # noqa: F811
    """The hub's processor configs say ``max_pixels`` 12,845,056 (16,384 tokens an image), which
    overrides a ``size`` given when loading: the budget is set on the loaded processor instead,
    the one asked for, else ``MAX_IMAGE_TOKENS`` tokens."""
    folder = tmp_path / "hub-config"
    _hub_layout(tiny, folder, max_pixels=12845056)
    big = [_item("report", 1, 0, (1400, 1400), ["Annual report 2023", "Revenue grew 12% in 2023."])]
    told = TransformersReader(model=str(folder), device="cpu", max_tokens=1, max_pixels=PIXELS[1])
    assert told.read(QUESTION, big).usage["image_tokens"] == _tokens((1400, 1400), PIXELS[1]) == 4
    default = TransformersReader(model=str(folder), device="cpu", max_tokens=1)
    capped = default.read(QUESTION, big).usage["image_tokens"]
    assert capped == _tokens((1400, 1400), 28 * 28 * MAX_IMAGE_TOKENS) <= MAX_IMAGE_TOKENS
    assert capped < _tokens((1400, 1400), 12845056) == 50 * 50  # what the config alone would give


@pytest.mark.timeout(30)
def test_clock_holds_back_a_character_until_its_bytes_are_written(tiny):  # noqa: F811
    tokenizer = tiny.processor.tokenizer
    ids = tokenizer.encode("Prix: 12 €\nfin", add_special_tokens=False)
    pieces: list[str] = []
    clock = Clock(tokenizer, pieces.append)
    clock.put(torch.tensor([[1, 2, 3]]))  # the prompt, first: not handed on
    for token in ids:
        clock.put(torch.tensor([token]))
        assert "\ufffd" not in "".join(pieces)
    clock.end()
    assert "".join(pieces) == "Prix: 12 €\nfin"
    assert set(clock.timings()) == {"prefill", "decode"}


@pytest.mark.timeout(30)
def test_visible_text_leaves_out_tags_and_thinking():
    reply = (
        '<think>the table says 12</think>Revenue grew 12% <bboxes image="1">[[0, 0, 10, 10]]</bboxes>'
        ' in 2023 <lines passage="2">[1]</lines>; a < b and <b>bold</b>.'
    )
    for size in (1, 2, 3, 5, 8, len(reply)):  # however the pieces fall
        visible = VisibleText()
        shown = "".join(visible.feed(reply[i : i + size]) for i in range(0, len(reply), size))
        shown += visible.end()
        assert shown == "Revenue grew 12%  in 2023 ; a < b and <b>bold</b>.", size
    held = VisibleText()
    assert held.feed("Twelve <bbo") == "Twelve "  # may open a tag: held back
    assert held.feed("ok") == "<bbook"  # does not
    assert held.feed(' <bboxes image="1">[[1, 2') == " " and held.end() == ""  # left open: dropped


@pytest.mark.timeout(120)
def test_auto_inputs_read_worded_tiles_as_passages(tiny):  # noqa: F811
    """With inputs auto a tile whose words stand for it goes as its numbered lines (its image is
    never rendered), the others as images: one image placeholder, its tokens alone counted."""
    from tests.answer.test_vlm_reader import SAVED_PIXELS, _image_tokens

    worded = _item("report", 1, 0, (200, 160), ["one two three four five six seven eight"] * 6, image=False)
    worded.layout = True  # the index looked for tables and figures, and found none on it
    slide = _item(*PAGES[1])  # three short lines: its image
    slide.layout = True
    reader = TransformersReader.from_objects(tiny.model, tiny.processor, inputs="auto", max_tokens=3)
    system, user = reader.messages(QUESTION, [worded, slide])
    assert "numbered together" in system["content"]
    assert [part["type"] for part in user["content"]].count("image") == 1
    assert user["content"][0]["text"].startswith("Passage 1: report page 1 tile 0\n[1] one two")
    assert user["content"][1]["text"] == "Image 2: slides page 3 tile 1\n"
    reading = reader.read(QUESTION, [worded, slide])
    assert reading.usage["image_tokens"] == _image_tokens(PAGES[1][3], SAVED_PIXELS)
