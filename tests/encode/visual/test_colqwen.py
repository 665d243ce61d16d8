"""The ColQwen family (ColQwen2, ColQwen2.5, ColQwen3, ColQwen3.5) through colpali-engine on tiny
random-weight models: one vector per real token (128 dimensions, 320 for ColQwen3 and the ColQwen3.5
checkpoints), MaxSim scores equal to colpali-engine's, LoRA adapters."""

from __future__ import annotations

import importlib.util

import pytest

from pagesight.encode.visual import check_compatible, make_encoder
from pagesight.errors import PagesightError
from pagesight.testing.encoder import assert_differ, assert_encoder_contract, assert_same

from .conftest import QWEN_IDS, assert_matches_colpali_engine, build_qwen, save_lora

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("colpali_engine") is None:
    pytest.skip("colpali-engine is not installed", allow_module_level=True)

from pagesight.encode.visual.late_interaction import import_colpali  # noqa: E402


@pytest.fixture(scope="module")
def colpali_models():
    return import_colpali()


FAMILIES = [
    ("colqwen2", "qwen2-vl", "ColQwen2", "ColQwen2Processor", 128),
    ("colqwen2.5", "qwen2.5-vl", "ColQwen2_5", "ColQwen2_5_Processor", 128),
    ("colqwen3", "qwen3-vl", "ColQwen3", "ColQwen3Processor", 320),
    ("colqwen3.5", "qwen3.5", "ColQwen3_5", "ColQwen3_5Processor", 320),
]


@pytest.fixture(scope="module", params=FAMILIES, ids=[family[0] for family in FAMILIES])
def tiny(request, tmp_path_factory, colpali_models):
    name, family, model_class, processor_class, _ = request.param
    folder = tmp_path_factory.mktemp(f"tiny-{name}")
    model = build_qwen(
        folder, family, getattr(colpali_models, model_class), getattr(colpali_models, processor_class)
    )
    return name, folder, model, make_encoder(name, model=str(folder), device="cpu", batch_size=2)


def test_contract_and_tokens(tiny, pages, queries):
    name, _, model, encoder = tiny
    dim = next(family[-1] for family in FAMILIES if family[0] == name)
    assert (encoder.name, encoder.multi_vector, encoder.dim) == (name, True, dim)
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    processor = encoder.processor
    batch = processor.process_images(pages[:1])
    image_tokens = int((batch["input_ids"] == QWEN_IDS["<|image_pad|>"]).sum())
    assert page_vectors[0].shape[0] == batch["input_ids"].shape[1] > image_tokens > 1  # all real tokens
    query_batch = processor.process_queries(queries)
    lengths = query_batch["attention_mask"].sum(1).tolist()
    assert [v.shape[0] for v in query_vectors] == lengths  # padding dropped
    assert min(lengths) < max(lengths)


def test_vectors_are_colpali_engines(tiny, pages, queries):
    """The vectors are the model's own output on the real tokens; scores equal colpali-engine's
    score_multi_vector on the same tensors."""
    _, _, model, encoder = tiny
    assert_matches_colpali_engine(encoder, model, pages, queries, "custom_text_proj")


def test_max_pixels(tiny, pages):
    name, folder, _, encoder = tiny
    small = make_encoder(name, model=str(folder), device="cpu", max_pixels=28 * 28 * 2)
    assert small.max_pixels == 28 * 28 * 2
    assert small.encode_images(pages[:1])[0].shape[0] < encoder.encode_images(pages[:1])[0].shape[0]


def test_lora_and_compatibility(tiny, pages, queries, tmp_path):
    name, folder, model, encoder = tiny
    merged = save_lora(model, tmp_path / "adapter", ["q_proj", "v_proj"])
    merged.save_pretrained(tmp_path / "merged")
    encoder.processor.save_pretrained(tmp_path / "merged")
    adapted = make_encoder(name, model=str(folder), adapter=str(tmp_path / "adapter"), device="cpu")
    reference = make_encoder(name, model=str(tmp_path / "merged"), device="cpu")
    assert_same(adapted.encode_images(pages), reference.encode_images(pages))
    assert_differ(adapted.encode_queries(queries), encoder.encode_queries(queries))
    with pytest.raises(PagesightError, match=f"adapter {tmp_path / 'adapter'}"):
        check_compatible(adapted.spec(), encoder)


def test_a_backbone_this_transformers_lacks_is_named_in_one_line(tmp_path):
    """A family whose backbone the installed transformers does not hold is refused before anything
    loads, naming the encoder, the backbone and the installed version."""
    from pagesight.encode.visual.colqwen import ColQwen35Encoder

    class Later(ColQwen35Encoder):
        name = "colqwen9"
        backbone = "qwen9_vl"  # no transformers holds it

    with pytest.raises(PagesightError, match=r"^visual encoder 'colqwen9' needs transformers' qwen9_vl backbone, "
                       r"which transformers \S+ lacks: pip install -U transformers$"):  # fmt: skip
        Later(model=str(tmp_path), device="cpu")
