"""The model code on an accelerator: every torch model family pagesight runs (visual encoders, the
transformers reader, the rerankers, contrastive training) on the device ``PAGESIGHT_TEST_DEVICE``
names (default ``cpu``; ``cuda`` or ``cuda:N`` on a GPU machine), in float32 and in bfloat16,
checked against the same tiny random-weight model in float32 on the CPU.

On the CPU (CI) this is the bfloat16 path alone: bfloat16 weights, bfloat16 activations turned
into float32 numpy vectors (float32 there would compare the reference with itself). On a GPU it is
the ``device="cuda"`` path users run::

    PAGESIGHT_TEST_DEVICE=cuda python -m pytest tests/test_on_device.py --noconftest -p no:cacheprovider

(``--noconftest``: this module needs none of the suite's fixtures, and the top-level conftest
imports the indexing stack, which a GPU machine may not have.) Tolerances: float32 on a GPU runs
convolutions in TF32, and bfloat16 keeps 8 bits of mantissa, so vectors are compared by cosine.
"""

from __future__ import annotations

import gc
import importlib.util
import math
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pagesight.testing.encoder import assert_unit_vectors

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

from tests.encode.visual.conftest import (  # noqa: E402
    PAGE_LINES,
    PAGE_SIZES,
    QUERIES,
    WORDS,
    build_clip,
    build_colpali,
    build_idefics3,
    build_qwen,
    build_siglip,
    render_page,
    save_lora,
)

DEVICE = os.environ.get("PAGESIGHT_TEST_DEVICE", "cpu")
KIND = DEVICE.split(":", 1)[0]
if KIND == "cuda" and not torch.cuda.is_available():
    pytest.skip(f"PAGESIGHT_TEST_DEVICE={DEVICE}, but torch sees no CUDA device", allow_module_level=True)
COLPALI = importlib.util.find_spec("colpali_engine") is not None
# The least cosine between a vector here and the float32 CPU one, by dtype.
AGREE = {"float32": 0.999, "bfloat16": 0.97}
# On the CPU the float32 reference is the model itself: only bfloat16 is compared there.
DTYPES = ["bfloat16"] if KIND == "cpu" else ["float32", "bfloat16"]
DEVICE_DTYPE = "bfloat16" if KIND == "cpu" else "auto"  # the device's side of a comparison, where one dtype


def colpali_models():
    if not COLPALI:
        pytest.skip("colpali-engine is not installed")
    from pagesight.encode.visual.late_interaction import import_colpali

    return import_colpali()


def qwen(family: str, model_class: str, processor_class: str):
    return lambda folder: build_qwen(
        folder, family, getattr(transformers, model_class), getattr(transformers, processor_class)
    )


def col(build, model_class: str, processor_class: str, *args):
    def built(folder):
        models = colpali_models()
        if build is build_qwen:
            return build_qwen(folder, *args, getattr(models, model_class), getattr(models, processor_class))
        if build is build_idefics3:
            return build_idefics3(
                folder, *args, getattr(models, model_class), getattr(models, processor_class)
            )
        return build(folder, getattr(models, model_class), getattr(models, processor_class))

    return built


def remote(module: str, **config):
    """A tiny model of the ``tests/remote_code`` module ``module``, its code saved beside it."""

    def built(folder):
        import importlib

        from tests.encode.visual.conftest import qwen_tokenizer
        from tests.remote_code import save

        code = importlib.import_module(f"tests.remote_code.{module}")
        if module == "modeling_tiny_visrag":
            tokenizer = qwen_tokenizer()
            return save(folder, code, tokenizer=tokenizer, vocab_size=len(tokenizer))
        return save(folder, code, **config)

    return built


BUILDERS = {
    "dse": qwen("qwen2-vl", "Qwen2VLForConditionalGeneration", "Qwen2VLProcessor"),
    "visrag-ret": qwen("qwen2-vl", "Qwen2VLForConditionalGeneration", "Qwen2VLProcessor"),
    "jina-v4": qwen("qwen2.5-vl", "Qwen2_5_VLForConditionalGeneration", "Qwen2_5_VLProcessor"),
    "qwen3-vl-embedding": qwen("qwen3-vl", "Qwen3VLForConditionalGeneration", "Qwen3VLProcessor"),
    "clip": build_clip,
    "siglip": build_siglip,
    "colqwen2": col(build_qwen, "ColQwen2", "ColQwen2Processor", "qwen2-vl"),
    "colqwen2.5": col(build_qwen, "ColQwen2_5", "ColQwen2_5_Processor", "qwen2.5-vl"),
    "colqwen3": col(build_qwen, "ColQwen3", "ColQwen3Processor", "qwen3-vl"),
    "colqwen3.5": col(build_qwen, "ColQwen3_5", "ColQwen3_5Processor", "qwen3.5"),
    "colpali": col(build_colpali, "ColPali", "ColPaliProcessor"),
    "colsmol": col(build_idefics3, "ColIdefics3", "ColIdefics3Processor", "idefics3"),
    "colmodernvbert": col(build_idefics3, "ColModernVBert", "ColModernVBertProcessor", "modernvbert"),
    # Checkpoints that run their own code (tiny stand-ins of the published ones), by encoder name.
    "visrag-ret:own-code": remote("modeling_tiny_visrag"),
    "jina-v4:own-code": remote("modeling_tiny_jina", seed=1),
    "nemotron-colembed": remote("modeling_tiny_colembed", seed=2),
}
OWN_CODE = {"visrag-ret:own-code", "jina-v4:own-code", "nemotron-colembed"}


def make(name: str, folder, **options):
    """The encoder of ``BUILDERS[name]``'s model in ``folder``, with leave to run its code if it has some."""
    from pagesight.encode.visual import make_encoder

    trust = name in OWN_CODE
    return make_encoder(name.split(":")[0], model=str(folder), trust_remote_code=trust, **options)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``built(name)``: the folder of a tiny random-weight model of encoder ``name``, built once."""
    folders: dict[str, tuple[Path, object]] = {}

    def get(name: str) -> tuple[Path, object]:
        if name not in folders:
            folder = tmp_path_factory.mktemp(f"tiny-{name}")
            folders[name] = folder, BUILDERS[name](folder)
        return folders[name]

    return get


@pytest.fixture(scope="module")
def pages() -> list[Image.Image]:
    return [render_page(size, lines, seed) for seed, (size, lines) in enumerate(zip(PAGE_SIZES, PAGE_LINES))]


def agree(got: list[np.ndarray], expected: list[np.ndarray], dtype: str) -> None:
    """Each vector (each token's, for a multi-vector model) within ``AGREE[dtype]`` of cosine of
    the float32 CPU one."""
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.shape == b.shape and a.dtype == np.float32
        cosine = float(np.min(np.sum(a * b, axis=-1)))
        assert cosine >= AGREE[dtype], cosine


def on_device(model, dtype: str | None = None) -> None:
    parameter = next(model.parameters())
    assert parameter.device.type == KIND
    if dtype is not None:
        assert parameter.dtype == getattr(torch, dtype)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_visual_encoder_on_the_device(name, dtype, built, pages):
    """Pages, queries, image queries (and a question with its picture, similarity maps, where the
    encoder has them) on the device agree with float32 on the CPU, whatever the batch."""
    from pagesight.encode.visual import joint_queries

    folder = built(name)[0]
    encoder = make(name, folder, device=DEVICE, dtype=dtype, batch_size=2)
    reference = make(name, folder, device="cpu", dtype="float32", batch_size=2)
    on_device(encoder.model, dtype)
    assert encoder.device == DEVICE
    corner = [pages[0].crop((0, 0, 56, 56))]
    for encode, inputs in (
        ("encode_images", pages),
        ("encode_queries", QUERIES),
        ("encode_image_queries", corner),
    ):
        vectors = getattr(encoder, encode)(inputs)
        assert_unit_vectors(vectors, len(inputs), encoder.dim, encoder.multi_vector)
        agree(vectors, getattr(reference, encode)(inputs), dtype)
        encoder.batch_size = 1
        agree(getattr(encoder, encode)(inputs), vectors, dtype)
        encoder.batch_size = 2
    if joint_queries(encoder):
        agree(
            encoder.encode_image_text_queries(pages[:2], QUERIES[:2]),
            reference.encode_image_text_queries(pages[:2], QUERIES[:2]),
            dtype,
        )
    if hasattr(encoder, "patch_similarity"):
        if importlib.util.find_spec("faiss") is None:  # pagesight.vectors, a core dependency, needs it
            pytest.skip("similarity maps need faiss-cpu, which is not installed here")
        grid = encoder.patch_similarity(pages[1], QUERIES[0])
        expected = reference.patch_similarity(pages[1], QUERIES[0])
        assert grid.shape == expected.shape and grid.dtype == np.float32
        assert np.abs(grid - expected).max() < 2 * (1 - AGREE[dtype]) ** 0.5


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["colqwen2.5", "dse", "clip"])
def test_a_batch_prepared_ahead_is_pinned_on_cuda_and_encodes_as_its_images(name, built, pages):
    """Ingestion's two halves of an encoder call (``prepare_images`` in a thread of its own,
    ``encode_prepared`` on the device): the inputs in pinned memory on CUDA, so their copy to the
    device does not wait (nowhere else: pinning needs CUDA), and the vectors of ``encode_images``."""
    encoder = make(name, built(name)[0], device=DEVICE, dtype="float32", batch_size=4)
    prepared = encoder.prepare_images(pages)
    tensors = [value for value in prepared.values() if isinstance(value, torch.Tensor)]
    assert tensors and all(tensor.is_pinned() == (KIND == "cuda") for tensor in tensors)
    agree(encoder.encode_prepared(prepared), encoder.encode_images(pages), "float32")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["dse", "colqwen2"])
def test_an_adapter_is_merged_on_the_device(name, built, pages, tmp_path):
    from pagesight.encode.visual import make_encoder

    folder, model = built(name)
    save_lora(model, tmp_path / "adapter", ["q_proj", "v_proj"])
    adapter = str(tmp_path / "adapter")
    adapted = make_encoder(name, model=str(folder), adapter=adapter, device=DEVICE, dtype=DEVICE_DTYPE)
    reference = make_encoder(name, model=str(folder), adapter=adapter, device="cpu", dtype="float32")
    on_device(adapted.model)
    dtype = "bfloat16" if adapted.dtype == torch.bfloat16 else "float32"
    agree(adapted.encode_images(pages), reference.encode_images(pages), dtype)


@pytest.mark.timeout(120)
def test_an_encoder_gives_its_memory_back(built, pages):
    """An encoder dropped after encoding leaves no tensors on the GPU (none kept by pagesight)."""
    if KIND != "cuda":
        pytest.skip("measures GPU memory")
    from pagesight.encode.visual import make_encoder

    folder = str(built("dse")[0])
    gc.collect()
    before = torch.cuda.memory_allocated(DEVICE)
    encoder = make_encoder("dse", model=folder, device=DEVICE, batch_size=2)
    encoder.encode_images(pages)
    encoder.encode_queries(QUERIES)
    assert torch.cuda.memory_allocated(DEVICE) > before
    del encoder
    gc.collect()
    assert torch.cuda.memory_allocated(DEVICE) == before


# The transformers reader and the rerankers ---------------------------------------------------


@pytest.fixture(scope="module")
def reader_folder(tmp_path_factory):
    """A tiny Qwen2-VL reader (the reader tests' model) saved to a folder, with a LoRA adapter."""
    pytest.importorskip("accelerate")
    from tests.answer import test_vlm_reader as tvr
    from tests.encode.visual.conftest import qwen_config, qwen_tokenizer

    transformers.AutoProcessor.register(tvr._ImageOnlyConfig, tvr.ImageOnlyQwen2VLProcessor, exist_ok=True)
    image_processor = tvr.Qwen2VLImageProcessorPil(
        min_pixels=tvr.SAVED_PIXELS[0], max_pixels=tvr.SAVED_PIXELS[1]
    )
    processor = tvr.ImageOnlyQwen2VLProcessor(image_processor, qwen_tokenizer(), chat_template=tvr.TEMPLATE)
    torch.manual_seed(0)
    model = transformers.Qwen2VLForConditionalGeneration(qwen_config("qwen2-vl")).eval()
    folder = tmp_path_factory.mktemp("tiny-reader")
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    save_lora(model, folder / "adapter", ["q_proj", "v_proj"])
    return folder


def reader_context():
    from tests.answer import test_vlm_reader as tvr

    return [tvr._item(*page) for page in tvr.PAGES]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_transformers_reader_on_the_device(dtype, reader_folder, pages):
    """A reading with two tiles and a question image, a chat, the first-token log-probabilities the
    vlm reranker uses, and a reader with an adapter, on the device; the first-token
    log-probabilities agree with float32 on the CPU."""
    from pagesight.answer.reranking import JUDGE_PROMPT, VlmReranker
    from pagesight.answer.vlm import TransformersReader
    from pagesight.search.rerank import Candidate
    from tests.answer.test_vlm_reader import QUESTION

    reader = TransformersReader(
        model=str(reader_folder), device=DEVICE, dtype=dtype, max_tokens=6, logprobs=True
    )  # log-probabilities are kept only when asked
    on_device(reader.model, dtype)
    reading = reader.read(QUESTION, reader_context(), image=pages[2])
    assert isinstance(reading.text, str) and 1 <= reading.usage["completion_tokens"] <= 6
    assert math.isfinite(reading.logprob) and reading.logprob <= 0
    assert isinstance(reader.chat("Describe the page.", [pages[0]]), str)

    reference = TransformersReader(model=str(reader_folder), device="cpu", dtype="float32", max_tokens=6)
    prompt = JUDGE_PROMPT.format(query=QUERIES[0])
    got = reader.first_token_logprobs(prompt, [pages[0]])
    expected = reference.first_token_logprobs(prompt, [pages[0]])
    assert all(math.isfinite(value) and value <= 0 for value in got.values())
    common = got.keys() & expected.keys()
    assert len(common) >= 5
    tolerance = 1e-2 if dtype == "float32" else 0.25
    assert max(abs(got[token] - expected[token]) for token in common) < tolerance

    candidates = [
        Candidate(n, "doc", 1, n, "", load_image=lambda page=page: page) for n, page in enumerate(pages)
    ]
    scores = VlmReranker(reader).score(QUERIES[0], candidates)
    assert len(scores) == 3 and all(0 <= score <= 1 for score in scores)

    adapted = TransformersReader(
        model=str(reader_folder),
        device=DEVICE,
        dtype=dtype,
        max_tokens=3,
        adapter=str(reader_folder / "adapter"),
        logprobs=True,
    )
    on_device(adapted.model, dtype)
    assert math.isfinite(adapted.read(QUESTION, reader_context()).logprob)


# Text models: a tiny BERT, a dense model and a cross-encoder ---------------------------------

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> dict[str, Path]:
    """A two-layer, 32-wide BERT with a WordPiece vocabulary of the test words: a bare transformer
    folder, the same as a sentence-transformers model, and a one-logit cross-encoder."""
    from sentence_transformers import SentenceTransformer, models

    root = tmp_path_factory.mktemp("tiny-bert")
    words = sorted({word for text in WORDS + QUERIES + TRAIN_TEXTS for word in text.lower().split()})
    characters = sorted({c for text in WORDS + QUERIES + TRAIN_TEXTS for c in text.lower()} - {" "})
    vocab = BERT_SPECIALS + characters + [f"##{c}" for c in characters] + words
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(root / "vocab.txt"), do_lower_case=True)
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
    )
    torch.manual_seed(0)
    folders = {"transformer": root / "transformer", "cross": root / "cross"}
    transformers.BertModel(config).save_pretrained(folders["transformer"])
    transformers.BertForSequenceClassification(config).save_pretrained(folders["cross"])
    for folder in folders.values():
        tokenizer.save_pretrained(folder)
    word = models.Transformer(str(folders["transformer"]), max_seq_length=64)
    sentence = SentenceTransformer(
        modules=[word, models.Pooling(32, "mean"), models.Normalize()], device="cpu"
    )
    folders["sentence"] = root / "sentence"
    sentence.save(str(folders["sentence"]))
    return folders


TRAIN_TEXTS = [
    "the reservoir holds 42 million cubic metres of water",
    "copper cathodes reached a purity of 99.97 percent",
    "the orchestra played the symphony with 64 musicians",
    "the glacier retreated 27 metres over the summer",
    "how much water does the reservoir hold",
    "what purity did the copper reach",
    "how many musicians played",
    "how far did the glacier retreat",
    "the council published its budget",
]


def text_examples():
    from pagesight.train.contrastive import Example

    return [Example(TRAIN_TEXTS[4 + n], TRAIN_TEXTS[n], [TRAIN_TEXTS[8]]) for n in range(4)]


@pytest.mark.timeout(120)
def test_a_cross_encoder_reranks_on_the_device(tiny_bert):
    from pagesight.search.rerank import Candidate, make_reranker

    candidates = [Candidate(n, "doc", 1, 0, text) for n, text in enumerate(TRAIN_TEXTS[:4])]
    reranker = make_reranker("cross-encoder", model=str(tiny_bert["cross"]), device=DEVICE, batch_size=2)
    assert reranker.model.model.device.type == KIND
    if KIND == "cpu":  # the float32 reference is this model: compare its bfloat16 weights with it
        reranker.model.model.to(torch.bfloat16)
    scores = reranker.score(TRAIN_TEXTS[4], candidates)
    reference = make_reranker("cross-encoder", model=str(tiny_bert["cross"]), device="cpu")
    expected = reference.score(TRAIN_TEXTS[4], candidates)
    np.testing.assert_allclose(scores, expected, atol=1e-3 if KIND != "cpu" else 2e-2)
    assert KIND != "cpu" or not np.array_equal(scores, expected)  # bfloat16's own scores, not the reference's


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["colqwen2", "dse"])
def test_a_visual_encoder_reranks_on_the_device(name, built, pages):
    """Tile images through a visual encoder on the device: MaxSim or cosine, as on the CPU."""
    pytest.importorskip("faiss", reason="pagesight.vectors (MaxSim) needs faiss-cpu, a core dependency")
    from pagesight.search.rerank import Candidate, make_reranker

    folder = str(built(name)[0])
    candidates = [
        Candidate(n, "doc", 1, n, "", load_image=lambda page=page: page) for n, page in enumerate(pages)
    ]
    reranker = make_reranker(name, model=folder, device=DEVICE, batch_size=2, dtype=DEVICE_DTYPE)
    on_device(reranker.encoder.model)
    scores = reranker.score(QUERIES[0], candidates)
    reference = make_reranker(name, model=folder, device="cpu", batch_size=2, dtype="float32")
    reference = reference.score(QUERIES[0], candidates)
    dtype = "bfloat16" if reranker.encoder.dtype == torch.bfloat16 else "float32"
    tokens = 10 if name == "colqwen2" else 1  # MaxSim sums a query token's best cosines
    np.testing.assert_allclose(scores, reference, atol=tokens * 2 * (1 - AGREE[dtype]) ** 0.5)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_dense_training_on_the_device(lora, tiny_bert, tmp_path):
    from pagesight.train.contrastive import Options, load_sentence_model, train_dense

    options = Options(
        batch_size=4, epochs=10, max_steps=3, learning_rate=1e-3, warmup=0.0, lora=lora, lora_rank=4
    )
    report = train_dense(tiny_bert["sentence"], text_examples(), tmp_path, options, device=DEVICE)
    assert report.steps == 3 and all(math.isfinite(loss) for loss in report.losses)
    model = load_sentence_model(tmp_path / "dense", device=DEVICE)
    vectors = model.encode(TRAIN_TEXTS[:2], convert_to_numpy=True, normalize_embeddings=True)
    assert vectors.shape == (2, 32) and np.isfinite(vectors).all()


@pytest.mark.timeout(180)
def test_cross_encoder_training_on_the_device(tiny_bert, tmp_path):
    from pagesight.search.rerank import Candidate, make_reranker
    from pagesight.train.contrastive import Options, train_cross_encoder

    options = Options(batch_size=4, epochs=10, max_steps=3, learning_rate=1e-3, warmup=0.0)
    report = train_cross_encoder(tiny_bert["transformer"], text_examples(), tmp_path, options, device=DEVICE)
    assert report.steps == 3 and all(math.isfinite(loss) for loss in report.losses)
    reranker = make_reranker("cross-encoder", model=str(tmp_path / "cross-encoder"), device=DEVICE)
    candidates = [Candidate(n, "doc", 1, 0, text) for n, text in enumerate(TRAIN_TEXTS[:4])]
    assert all(math.isfinite(score) for score in reranker.score(TRAIN_TEXTS[4], candidates))


# Visual training -----------------------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointed"])
@pytest.mark.parametrize("dtype", ["auto", "float32" if KIND != "cpu" else "bfloat16"])
@pytest.mark.parametrize("name", ["dse", "colqwen2"])
def test_visual_lora_training_on_the_device(name, dtype, checkpointing, built, pages, tmp_path):
    """LoRA steps on a visual encoder loaded as ``pagesight train`` loads it (``dtype`` auto:
    bfloat16 weights on a GPU) and in the other dtype, the vision tower adapted too: finite losses,
    an adapter that loads on the device and moves the vectors."""
    from pagesight.encode.visual import make_encoder
    from pagesight.train.contrastive import Example, Options, train_visual

    folder = str(built(name)[0])
    encoder = make_encoder(name, model=folder, device=DEVICE, dtype=dtype, batch_size=3)
    before = encoder.encode_queries(QUERIES[:1])
    examples = [Example(QUERIES[n], "", [], n, [(n + 1) % 3]) for n in range(3)]
    options = Options(
        batch_size=3,
        epochs=10,
        max_steps=3,
        learning_rate=5e-3,
        warmup=0.0,
        lora=True,
        lora_rank=4,
        lora_vision=True,
        gradient_checkpointing=checkpointing,
    )
    # Pages of one size: colpali-engine's ColQwen2 normalises its padding positions' vectors too,
    # and a tiny model's are zero (a zero pad embedding, a zero-initialised projection bias), whose
    # norm's gradient is NaN; trained checkpoints have neither.
    tiles = [render_page(PAGE_SIZES[0], lines, n) for n, lines in enumerate(PAGE_LINES)]
    report = train_visual(encoder, examples, lambda i: tiles[i], tmp_path, options)
    assert report.steps == 3 and all(math.isfinite(loss) for loss in report.losses), report.losses
    on_device(encoder.model)
    adapted = make_encoder(
        name, model=folder, device=DEVICE, dtype=dtype, adapter=str(tmp_path / "visual-adapter")
    )
    after = adapted.encode_queries(QUERIES[:1])
    assert np.abs(after[0] - before[0]).max() > 1e-3
    assert_unit_vectors(encoder.encode_images(pages), 3, encoder.dim, encoder.multi_vector)
