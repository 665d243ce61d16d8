"""ColQwen2 and ColQwen2.5 through colpali-engine on tiny random-weight models: one 128-dim vector
per real token, MaxSim scores equal to colpali-engine's, LoRA adapters."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from pagesight.encode.visual import check_compatible, make_encoder
from pagesight.errors import PagesightError

from .conftest import (
    QWEN_IDS,
    assert_differ,
    assert_encoder_contract,
    assert_same,
    build_qwen,
    perturbed,
    save_lora,
)

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("colpali_engine") is None:
    pytest.skip("colpali-engine is not installed", allow_module_level=True)

from pagesight.encode.visual.late_interaction import import_colpali  # noqa: E402


@pytest.fixture(scope="module")
def colpali_models():
    return import_colpali()


@pytest.fixture(
    scope="module", params=[("colqwen2", "qwen2-vl", "ColQwen2"), ("colqwen2.5", "qwen2.5-vl", "ColQwen2_5")]
)
def tiny(request, tmp_path_factory, colpali_models):
    name, family, model_class = request.param
    processor_class = {"ColQwen2": "ColQwen2Processor", "ColQwen2_5": "ColQwen2_5_Processor"}[model_class]
    folder = tmp_path_factory.mktemp(f"tiny-{name}")
    model = build_qwen(
        folder, family, getattr(colpali_models, model_class), getattr(colpali_models, processor_class)
    )
    return name, folder, model, make_encoder(name, model=str(folder), device="cpu", batch_size=2)


def maxsim(query: np.ndarray, page: np.ndarray) -> float:
    return float(np.einsum("qd,pd->qp", query, page).max(axis=1).sum())


def test_contract_and_tokens(tiny, pages, queries):
    name, _, model, encoder = tiny
    assert (encoder.name, encoder.multi_vector, encoder.dim) == (name, True, 128)
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
    batch = encoder.processor.process_images(pages)
    with torch.no_grad():
        output = model(**batch)
    page_vectors = encoder.encode_images(pages)
    for vectors, expected, mask in zip(page_vectors, output, batch["attention_mask"].bool()):
        assert np.allclose(vectors, expected[mask].numpy(), atol=1e-5)
    query_vectors = encoder.encode_queries(queries)
    # One page per call: colpali-engine pads the pages of a call with zero vectors, which raise the
    # MaxSim of a shorter page wherever a query token's best real match is negative; dropping the
    # padding (as the encoder does) avoids that.
    queries_t = [torch.from_numpy(q) for q in query_vectors]
    scores = np.concatenate(
        [
            encoder.processor.score_multi_vector(queries_t, [torch.from_numpy(p)], device="cpu").numpy()
            for p in page_vectors
        ],
        axis=1,
    )
    ours = np.array([[maxsim(q, p) for p in page_vectors] for q in query_vectors])
    assert np.allclose(ours, scores, atol=1e-4)
    with perturbed(encoder.model.custom_text_proj.weight):
        assert_differ(encoder.encode_queries(queries), query_vectors)


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
