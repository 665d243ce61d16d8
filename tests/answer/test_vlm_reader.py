"""The ``transformers`` reader on a tiny Qwen2-VL with random weights, built from a config here.

The tokenizer is the encoder tests' byte-level BPE with the Qwen special tokens; the
processor is Qwen2-VL's, with its PIL image processor and Qwen2-VL's chat template. Both are saved
with ``save_pretrained`` and loaded through the reader's own ``model=<folder>`` path. Qwen2-VL's
processor class also wants a video processor, which needs torchvision (not installed here), so the
folder names a subclass without one.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from pagesight.answer import ContextItem, Reader, make_reader
from pagesight.answer.prompts import CLOSED_BOOK, parse_bboxes
from pagesight.answer.strategies import run
from pagesight.errors import PagesightError
from pagesight.eval.judges import PROMPTS, Judge
from pagesight.records import Hit, Span

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (  # noqa: E402
    Qwen2VLImageProcessorPil,
    smart_resize,
)

from pagesight.answer.vlm import TransformersReader  # noqa: E402
from tests.encode.visual.conftest import QWEN_IDS, qwen_config, qwen_tokenizer  # noqa: E402

END, IMAGE_PAD, VISION_START, VISION_END = (
    QWEN_IDS[token] for token in ("<|im_end|>", "<|image_pad|>", "<|vision_start|>", "<|vision_end|>")
)
# Qwen2-VL-Instruct's chat template.
TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SAVED_PIXELS = (28 * 28 * 4, 28 * 28 * 16)  # min and max pixels in the saved processor
PIXELS = (28 * 28 * 2, 28 * 28 * 8)  # what the reader is told to use instead
QUESTION = "By how much did revenue grow in 2023?"
PAGES = [  # doc id, page, tile, size, lines
    ("report", 1, 0, (200, 160), ["Annual report 2023", "Revenue grew 12% in 2023."]),
    ("slides", 3, 1, (160, 240), ["Outlook", "Costs fell by 4%.", "Staff: 120"]),
]


class ImageOnlyQwen2VLProcessor(transformers.Qwen2VLProcessor):
    """Qwen2-VL's processor without its video processor (which needs torchvision)."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        transformers.ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)
        self.image_token = "<|image_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)


class _ImageOnlyConfig(transformers.PretrainedConfig):
    model_type = "pagesight_test_image_only"


@dataclass
class Tiny:
    folder: Path
    model: object  # the model as built, before saving
    processor: object


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Tiny:
    """A random-weight Qwen2-VL (about 190k parameters) and its processor, saved to a folder."""
    transformers.AutoProcessor.register(_ImageOnlyConfig, ImageOnlyQwen2VLProcessor, exist_ok=True)
    tokenizer = qwen_tokenizer()
    image_processor = Qwen2VLImageProcessorPil(min_pixels=SAVED_PIXELS[0], max_pixels=SAVED_PIXELS[1])
    processor = ImageOnlyQwen2VLProcessor(image_processor, tokenizer, chat_template=TEMPLATE)
    torch.manual_seed(0)
    model = transformers.Qwen2VLForConditionalGeneration(qwen_config("qwen2-vl")).eval()
    folder = tmp_path_factory.mktemp("tiny-qwen2-vl")
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return Tiny(folder, model, processor)


@pytest.fixture(scope="module")
def reader(tiny) -> TransformersReader:
    return TransformersReader(
        model=str(tiny.folder),
        device="cpu",
        max_tokens=6,
        min_pixels=PIXELS[0],
        max_pixels=PIXELS[1],
        logprobs=True,
    )


def _item(doc_id: str, page: int, tile: int, size: tuple[int, int], lines: list[str], image: bool = True):
    width, height = size
    tile_box = (0.0, 300.0 * tile, float(width), 300.0 * tile + height)
    spans = [
        Span(text, (10.0, 300.0 * tile + 10 + 30 * i, 190.0, 300.0 * tile + 30 + 30 * i), "pdf")
        for i, text in enumerate(lines)
    ]
    hit = Hit(doc_id, page, tile, 1.0 - 0.1 * tile, {}, "", [], (width, 1000), tile_box)

    def render() -> Image.Image:
        picture = Image.new("RGB", size, "white")
        draw = ImageDraw.Draw(picture)
        for i, text in enumerate(lines):
            draw.text((10, 10 + 30 * i), text, fill="black")
        return picture

    return ContextItem(hit=hit, spans=spans, load_image=render if image else None)


@pytest.fixture()
def context() -> list[ContextItem]:
    return [_item(*page) for page in PAGES]


def _image_tokens(size: tuple[int, int], pixels: tuple[int, int]) -> int:
    """Image pad tokens Qwen2-VL's processor puts in for an image of ``size`` (width, height)."""
    height, width = smart_resize(size[1], size[0], factor=28, min_pixels=pixels[0], max_pixels=pixels[1])
    return (height // 14) * (width // 14) // 4


def _runs(ids: list[int], token: int) -> list[int]:
    """Lengths of the runs of ``token`` in ``ids``."""
    runs, length = [], 0
    for i in [*ids, -1]:
        if i == token:
            length += 1
        elif length:
            runs.append(length)
            length = 0
    return runs


def test_loads_from_a_folder(reader, tiny):
    assert isinstance(reader, Reader)
    assert (reader.name, reader.inputs, reader.max_images) == ("transformers", "images", None)
    assert reader.model.device.type == "cpu" and reader.model.dtype == torch.float32
    assert isinstance(reader.model, transformers.Qwen2VLForConditionalGeneration)
    for name, weight in tiny.model.state_dict().items():
        assert torch.equal(reader.model.state_dict()[name], weight), name
    size = reader.processor.image_processor.size
    assert (size["shortest_edge"], size["longest_edge"]) == PIXELS


def test_read_two_images(reader, context):
    reading = reader.read(QUESTION, context)
    assert isinstance(reading.text, str)
    assert math.isfinite(reading.logprob) and reading.logprob <= 0
    sizes = [page[3] for page in PAGES]
    expected = sum(_image_tokens(size, PIXELS) for size in sizes)
    assert reading.usage["image_tokens"] == expected
    assert expected != sum(_image_tokens(size, SAVED_PIXELS) for size in sizes)  # max_pixels took effect
    assert reading.usage["completion_tokens"] == 6
    assert reading.usage["prompt_tokens"] > expected


def test_logprob_is_the_models(reader, tiny, context):
    """The reported log-probability is recomputed by one forward pass of the model as built, over the
    prompt and the generated tokens, and each generated token is that pass's most likely one."""
    messages = reader.messages(QUESTION, context)
    images = [item.image for item in context]
    generation = reader.generate(messages, images)
    reading = reader.read(QUESTION, context)
    assert reading.logprob == pytest.approx(sum(generation.logprobs), abs=1e-6)
    assert reading.tokens == len(generation.tokens)  # nothing of the reply is a tag or thinking
    assert reading.usage["completion_tokens"] == len(generation.tokens) == 6

    prompt = reader.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = reader.processor(text=[prompt], images=images, return_tensors="pt")
    n = inputs["input_ids"].shape[1]
    assert n == generation.prompt_tokens
    new = torch.tensor([generation.tokens])
    with torch.no_grad():
        logits = tiny.model(
            input_ids=torch.cat([inputs["input_ids"], new], dim=1),
            attention_mask=torch.ones(1, n + new.shape[1], dtype=torch.long),
            mm_token_type_ids=torch.cat([inputs["mm_token_type_ids"], torch.zeros_like(new)], dim=1),
            pixel_values=inputs["pixel_values"],
            image_grid_thw=inputs["image_grid_thw"],
        ).logits[0, n - 1 : -1]
    assert logits.argmax(-1).tolist() == generation.tokens
    chosen = torch.log_softmax(logits.float(), dim=-1)[torch.arange(new.shape[1]), new[0]]
    assert float(chosen.sum()) == pytest.approx(reading.logprob, abs=1e-4)
    assert reading.logprob < -1  # a random model is unsure of its six tokens


def test_chat_template_places_both_images(reader, context):
    messages = reader.messages(QUESTION, context)
    prompt = reader.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    vision = "<|vision_start|><|image_pad|><|vision_end|>"
    marks = [
        "<|im_start|>system\n",
        '<bboxes image="N">',
        "Image 1: report page 1 tile 0",
        vision,
        "Image 2: slides page 3 tile 1",
        vision,
        f"Question: {QUESTION}",
        "<|im_start|>assistant\n",
    ]
    positions, start = [], 0
    for mark in marks:
        positions.append(prompt.index(mark, start))
        start = positions[-1] + len(mark)
    assert prompt.count(vision) == 2
    assert prompt.endswith("<|im_start|>assistant\n")
    inputs = reader.processor(text=[prompt], images=[item.image for item in context], return_tensors="pt")
    ids = inputs["input_ids"][0].tolist()
    assert _runs(ids, IMAGE_PAD) == [_image_tokens(page[3], PIXELS) for page in PAGES]
    generation = reader.generate(messages, [item.image for item in context])
    assert generation.seen_sizes == [
        smart_resize(h, w, factor=28, min_pixels=PIXELS[0], max_pixels=PIXELS[1])[::-1]
        for w, h in (page[3] for page in PAGES)
    ]


def test_max_tokens_cuts_the_answer(tiny, context):
    short = TransformersReader.from_objects(tiny.model, tiny.processor, max_tokens=2, logprobs=True)
    reading = short.read(QUESTION, context)
    assert reading.usage["completion_tokens"] == 2
    assert "the answer was cut at max_tokens=2" in reading.usage["warnings"]
    assert math.isfinite(reading.logprob)


def test_end_of_sequence_stops_without_warning(tiny, reader, context):
    first = reader.generate(reader.messages(QUESTION, context), [item.image for item in context]).tokens[0]
    model = copy.deepcopy(tiny.model)
    model.generation_config.eos_token_id = first  # the model's first choice now ends the answer
    stopping = TransformersReader.from_objects(model, reader.processor, max_tokens=6)
    reading = stopping.read(QUESTION, context)
    assert reading.usage["completion_tokens"] == 1
    assert "warnings" not in reading.usage


def test_from_objects_reads_like_the_saved_folder(tiny, context):
    loaded = TransformersReader(model=str(tiny.folder), device="cpu", max_tokens=4, logprobs=True)
    built = TransformersReader.from_objects(
        tiny.model, tiny.processor, max_tokens=4, source="tiny", logprobs=True
    )
    a, b = loaded.read(QUESTION, context), built.read(QUESTION, context)
    a.usage.pop("decode_tokens_per_s"), b.usage.pop("decode_tokens_per_s")  # a speed, not a count
    assert (a.text, a.usage) == (b.text, b.usage)
    assert a.logprob == pytest.approx(b.logprob, abs=1e-5)
    assert a.usage["image_tokens"] == sum(_image_tokens(page[3], SAVED_PIXELS) for page in PAGES)


def test_text_inputs_send_no_images(tiny):
    text_reader = TransformersReader.from_objects(
        tiny.model, tiny.processor, inputs="text", max_tokens=3, logprobs=True
    )
    no_images = [_item(*page, image=False) for page in PAGES]  # touching an image would raise
    reading = text_reader.read(QUESTION, no_images)
    assert reading.usage["image_tokens"] == 0
    assert math.isfinite(reading.logprob)
    user = text_reader.messages(QUESTION, no_images)[1]["content"]
    assert isinstance(user, str)
    assert "Passage 1: report page 1 tile 0\n[1] Annual report 2023\n[2] Revenue grew 12% in 2023." in user
    assert '<lines passage="N">' in text_reader.messages(QUESTION, no_images)[0]["content"]
    images_reader = TransformersReader.from_objects(tiny.model, tiny.processor, max_tokens=3)
    with pytest.raises(PagesightError, match="no image"):
        images_reader.read(QUESTION, no_images)


def test_images_and_text(tiny, context):
    both = TransformersReader.from_objects(tiny.model, tiny.processor, inputs="images+text", max_tokens=3)
    images = TransformersReader.from_objects(tiny.model, tiny.processor, max_tokens=3)
    parts = both.messages(QUESTION, context)[1]["content"]
    assert [part["type"] for part in parts].count("image") == 2
    assert {"type": "text", "text": "\nText of image 2:\nOutlook\nCosts fell by 4%.\nStaff: 120\n"} in parts
    a, b = both.read(QUESTION, context), images.read(QUESTION, context)
    assert a.usage["image_tokens"] == b.usage["image_tokens"] > 0
    assert a.usage["prompt_tokens"] > b.usage["prompt_tokens"]


def test_text_only_language_model(tmp_path):
    folder = tmp_path / "tiny-qwen2"
    torch.manual_seed(1)
    config = transformers.Qwen2Config(
        vocab_size=320,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        eos_token_id=END,
    )
    transformers.Qwen2ForCausalLM(config).save_pretrained(folder)
    tokenizer = qwen_tokenizer()
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(folder)
    text_reader = TransformersReader(
        model=str(folder), device="cpu", inputs="text", max_tokens=3, logprobs=True
    )
    assert isinstance(text_reader.model, transformers.Qwen2ForCausalLM)
    reading = text_reader.read(QUESTION, [_item(*page, image=False) for page in PAGES])
    assert reading.usage["completion_tokens"] == 3 and reading.usage["image_tokens"] == 0
    assert math.isfinite(reading.logprob)
    with pytest.raises(PagesightError, match="reads no images.*inputs='text'"):
        TransformersReader(model=str(folder), device="cpu")


def test_a_language_model_with_its_own_code_reads_only_with_leave(tmp_path):
    """A causal language model whose code comes with it (``tests/remote_code``) is refused in one line
    naming it and the flag; with the caller's leave (never a request's) it loads through that code
    and reads. A reader that runs no such model is built as before when the leave is given."""
    from pagesight.answer.base import build_reader
    from pagesight.request import AskRequest
    from tests.remote_code import modeling_tiny_lm, save

    tokenizer = qwen_tokenizer()
    tokenizer.chat_template = TEMPLATE
    folder = tmp_path / "tiny-lm"
    save(
        folder,
        modeling_tiny_lm,
        "AutoModelForCausalLM",
        tokenizer=tokenizer,
        vocab_size=len(tokenizer),
        eos_token_id=END,
    )
    with pytest.raises(
        PagesightError, match=f"reader: model '{folder}' runs code of its own.*--trust-remote-code"
    ):
        TransformersReader(model=str(folder), device="cpu", inputs="text")
    request = AskRequest(QUESTION, reader="transformers", model=str(folder), inputs="text", max_tokens=3)
    reader = build_reader(request, trust_remote_code=True, device="cpu")
    assert type(reader.model).__module__.startswith("transformers_modules.")  # the model's own code
    reading = reader.read(QUESTION, [_item(*page, image=False) for page in PAGES])
    assert 1 <= reading.usage["completion_tokens"] <= 3 and reading.logprob is None  # not asked for
    assert build_reader(AskRequest(QUESTION), trust_remote_code=True).name == "extractive"


def test_single_image_reader_and_weighted_selection(tiny, context):
    single = TransformersReader.from_objects(
        tiny.model, tiny.processor, max_images=1, max_tokens=3, logprobs=True
    )
    assert single.max_images == 1
    with pytest.raises(PagesightError, match="at most 1 images, got 2"):
        single.read(QUESTION, context)
    reading, shown = run("weighted", single, QUESTION, context)
    singles = [single.read(QUESTION, [item]) for item in context]
    scores = [item.hit.score for item in context]
    prior = [math.exp(score) / sum(math.exp(other) for other in scores) for score in scores]
    weights = [p * math.exp(one.logprob / one.tokens) for one, p in zip(singles, prior)]  # 1/perplexity
    best = singles[weights.index(max(weights))]
    assert (reading.text, reading.logprob) == (best.text, best.logprob)
    assert reading.usage["weight"] == pytest.approx(max(weights))
    assert reading.usage["completion_tokens"] == 6  # two readings of three tokens
    assert shown == context


def test_chat_is_a_judge(reader):
    prompt = "Is 12% the same as twelve percent? Answer yes or no."
    reply = reader.chat(prompt)
    assert isinstance(reply, str)
    assert reply == reader.generate([{"role": "user", "content": prompt}]).text.strip()
    grade = Judge("binary", reader.chat)(QUESTION, ["12%"], "twelve percent")
    judged = PROMPTS["binary"].format(question=QUESTION, reference="12%", answer="twelve percent")
    assert grade.reply == reader.chat(judged)


def test_with_no_pages_the_model_answers_from_what_it_knows(reader):
    system, user = reader.messages(QUESTION, [])
    assert system["content"] == CLOSED_BOOK and user["content"][-1]["text"].endswith(QUESTION)
    reading = reader.read(QUESTION, [])
    assert reading.usage["image_tokens"] == 0 and reading.cited == {}
    assert reading.tokens is not None and reading.tokens <= reading.usage["completion_tokens"]


def test_make_reader(tiny, context):
    made = make_reader("transformers", model=str(tiny.folder), device="cpu", max_tokens=2)
    assert isinstance(made, TransformersReader)
    assert made.read(QUESTION, context).usage["completion_tokens"] == 2


def test_cli_ask_with_a_local_model(tiny, sample_index):
    """``pagesight ask --reader transformers`` end to end: retrieval, tiles as images, one generation,
    in-process so the test's processor class stays registered."""
    from typer.testing import CliRunner

    from pagesight.cli import app

    args = ["ask", "Which supplier replaces Brightmere Supply?", "--index", str(sample_index.root), "-k", "2"]
    model = ["--reader", "transformers", "--model", str(tiny.folder), "--device", "cpu", "--max-tokens", "3"]
    result = CliRunner().invoke(app, [*args, *model, "-c", "4", "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["reader"] == "transformers" and len(answer["hits"]) == 2
    assert answer["usage"]["completion_tokens"] == 3
    hits = sample_index.search(args[1], k=2)
    assert [(hit["page_id"], hit["tile"]) for hit in answer["hits"]] == [(h.page_id, h.tile) for h in hits]
    tiles = [sample_index.tile_image(h.doc_id, h.page, h.tile, compression=4) for h in hits]
    assert answer["usage"]["image_tokens"] == sum(_image_tokens(tile.size, SAVED_PIXELS) for tile in tiles)
    weighted = CliRunner().invoke(app, [*args, *model, "--strategy", "weighted", "--json"])
    assert weighted.exit_code == 0, weighted.output
    assert json.loads(weighted.stdout)["usage"]["completion_tokens"] == 6  # one reading per tile


def test_boxes_on_the_resized_images():
    item = _item("report", 1, 1, (200, 160), ["line"])  # tile at y=300 on its page
    text = 'Twelve percent. <bboxes image="1">[[0, 0, 112, 84]]</bboxes>'
    answer, cited, problems = parse_bboxes(text, [item], "pixels", [(224, 168)])
    assert answer == "Twelve percent." and problems == []
    assert cited[0][0] == pytest.approx((0.0, 300.0, 100.0, 380.0))  # half of the tile
    norm = 'x <bboxes image="1">[[0, 0, 500, 500]]</bboxes>'
    assert parse_bboxes(norm, [item], "norm1000", [(224, 168)])[1] == parse_bboxes(norm, [item])[1]
    assert parse_bboxes(text, [item], "pixels", None)[1][0][0] == pytest.approx((0.0, 300.0, 112.0, 384.0))


def test_pixel_coordinates_reader_runs(tiny, context):
    pixels = TransformersReader.from_objects(tiny.model, tiny.processor, coordinates="pixels", max_tokens=2)
    assert "in pixels of the image" in pixels.messages(QUESTION, context)[0]["content"]
    assert pixels.read(QUESTION, context).usage["completion_tokens"] == 2


@pytest.mark.parametrize(
    "family, model_class, scale",
    [
        ("qwen2-vl", "Qwen2VLForConditionalGeneration", "norm1000"),
        ("qwen2.5-vl", "Qwen2_5_VLForConditionalGeneration", "pixels"),
        ("qwen3-vl", "Qwen3VLForConditionalGeneration", "norm1000"),
    ],
)
def test_each_family_cites_on_its_own_scale_unless_told(tiny, context, family, model_class, scale):
    model = getattr(transformers, model_class)(qwen_config(family)).eval()
    assert TransformersReader.from_objects(model, tiny.processor).coordinates == scale
    told = TransformersReader.from_objects(model, tiny.processor, coordinates="norm1", number_from=0)
    system, user = told.messages(QUESTION, context)
    assert "from 0 to 1 (decimal fractions)" in system["content"] and "numbered from 0" in system["content"]
    labels = [part["text"] for part in user["content"] if part["type"] == "text"]
    assert labels[:2] == ["Image 0: report page 1 tile 0\n", "Image 1: slides page 3 tile 1\n"]


def test_adapter(tiny, reader, context, tmp_path):
    peft = pytest.importorskip("peft")
    torch.manual_seed(2)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    tuned = peft.get_peft_model(copy.deepcopy(tiny.model), lora)
    tuned.save_pretrained(tmp_path / "adapter")
    adapted = TransformersReader(
        model=str(tiny.folder),
        device="cpu",
        max_tokens=6,
        min_pixels=PIXELS[0],
        max_pixels=PIXELS[1],
        adapter=str(tmp_path / "adapter"),
        logprobs=True,
    )
    merged = TransformersReader.from_objects(
        tuned.merge_and_unload(), reader.processor, max_tokens=6, logprobs=True
    )
    a, b = adapted.read(QUESTION, context), merged.read(QUESTION, context)
    assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
    assert abs(a.logprob - reader.read(QUESTION, context).logprob) > 1e-3


def test_bad_model_names_and_options(tiny, tmp_path):
    with pytest.raises(PagesightError, match="needs a model"):
        TransformersReader()
    missing = tmp_path / "no-such-model"
    with pytest.raises(PagesightError, match=f"'{missing}': no such folder"):
        TransformersReader(model=str(missing), device="cpu")
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    (empty / "notes.txt").write_text("hello")
    with pytest.raises(PagesightError, match=f"cannot load model '{empty}'"):
        TransformersReader(model=str(empty), device="cpu")
    broken = tmp_path / "broken"
    shutil.copytree(tiny.folder, broken)
    (broken / "config.json").write_text("{not json")
    with pytest.raises(PagesightError, match=f"cannot load model '{broken}': .*config"):
        TransformersReader(model=str(broken), device="cpu")
    with pytest.raises(PagesightError, match="no adapter folder"):
        TransformersReader(model=str(tiny.folder), device="cpu", adapter=str(tmp_path / "no-adapter"))
    bad_options = [
        ({"device": "gpu"}, "unknown device .gpu.; choose one of auto, cpu, cuda, mps"),
        ({"dtype": "int8"}, "unknown dtype .int8.; choose one of auto, float32, bfloat16, float16"),
        ({"inputs": "pixels"}, "inputs must be"),
        ({"coordinates": "percent"}, "coordinates must be"),
        ({"max_tokens": 0}, "max_tokens must be"),
        ({"max_images": 0}, "max_images must be"),
        ({"max_pixels": 0}, "max_pixels must be positive"),
    ]
    for options, message in bad_options:
        with pytest.raises(PagesightError, match=message):
            TransformersReader(model=str(tiny.folder), **options)
    no_template = ImageOnlyQwen2VLProcessor(tiny.processor.image_processor, tiny.processor.tokenizer)
    with pytest.raises(PagesightError, match="'tiny' has no chat template"):
        TransformersReader.from_objects(tiny.model, no_template, source="tiny")
    tokenizer = copy.deepcopy(tiny.processor.tokenizer)
    tokenizer.chat_template = TEMPLATE
    with pytest.raises(PagesightError, match="'tiny' has no image processor.*inputs='text'"):
        TransformersReader.from_objects(tiny.model, tokenizer, source="tiny")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a CUDA GPU")
def test_cuda_without_a_gpu(tiny):
    with pytest.raises(PagesightError, match="torch sees no CUDA device here"):
        TransformersReader(model=str(tiny.folder), device="cuda")


def test_processor_that_needs_torchvision(tiny, tmp_path):
    """A folder laid out like Qwen2-VL's on the hub: without torchvision its processor cannot load."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision is installed, so Qwen2-VL's own processor loads")
    folder = tmp_path / "hub-layout"
    shutil.copytree(tiny.folder, folder)
    processor_config = json.loads((folder / "processor_config.json").read_text())
    image_config = {**processor_config["image_processor"], "processor_class": "Qwen2VLProcessor"}
    (folder / "preprocessor_config.json").write_text(json.dumps(image_config))
    (folder / "processor_config.json").unlink()
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config["processor_class"] = "Qwen2VLProcessor"
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    with pytest.raises(
        PagesightError, match=f"cannot load model '{folder}': its processor needs torchvision"
    ):
        TransformersReader(model=str(folder), device="cpu")
