"""DSE on a tiny random-weight Qwen2-VL: last-token pooling over the card's prompts, MRL truncation,
LoRA adapters, and loading errors."""

from __future__ import annotations

import numpy as np
import pytest

from pagesight.encode.visual import make_encoder
from pagesight.errors import PagesightError
from pagesight.testing.encoder import assert_differ, assert_encoder_contract, assert_same

from .conftest import QWEN_IDS, build_qwen, perturbed, save_lora, unit

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PAGE = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|vision_start|><|image_pad|><|vision_end|>What is shown in this image?<|im_end|>\n"
    "<|im_start|>assistant\n<|endoftext|>"
)
QUERY = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|vision_start|><|image_pad|><|vision_end|>Query: {}<|im_end|>\n<|im_start|>assistant\n<|endoftext|>"
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-dse")
    model = build_qwen(
        folder, "qwen2-vl", transformers.Qwen2VLForConditionalGeneration, transformers.Qwen2VLProcessor
    )
    return folder, model


@pytest.fixture(scope="module")
def encoder(tiny):
    return make_encoder("dse", model=str(tiny[0]), device="cpu", batch_size=2)


def test_contract(encoder, pages, queries):
    assert (encoder.name, encoder.multi_vector, encoder.dim, encoder.image_size) == ("dse", False, 64, None)
    assert encoder.device == "cpu" and encoder.model.dtype == torch.float32
    assert_encoder_contract(encoder, pages, queries)


def test_a_question_with_its_picture_takes_the_dummys_place(encoder, tiny, pages, queries):
    """The query prompt with the picture, at the processor's own size, where a text query has its
    blank 56-pixel image."""
    backbone, processor = tiny[1].model, encoder.processor
    (joint,) = encoder.encode_image_text_queries([pages[2]], [queries[1]])
    inputs = processor(text=[QUERY.format(queries[1])], images=[pages[2]], return_tensors="pt")
    assert int((inputs["input_ids"] == QWEN_IDS["<|image_pad|>"]).sum()) > 4
    with torch.no_grad():
        hidden = backbone(**inputs).last_hidden_state
    assert np.allclose(joint, unit(hidden[0, -1]), atol=1e-5)
    assert_differ([joint], encoder.encode_queries(queries[1:2]))  # the picture is read too


def test_weights_are_the_checkpoints(encoder, tiny):
    built = tiny[1].model.state_dict()
    loaded = encoder.model.state_dict()
    assert built.keys() == loaded.keys()
    assert all(torch.equal(built[name], loaded[name]) for name in built)


def test_last_token_of_the_card_prompts(encoder, tiny, pages, queries):
    """Each vector is the backbone's final hidden state at the closing <|endoftext|>, computed here
    on one unpadded input with the prompts written out; queries carry a 4-token dummy image."""
    backbone, processor = tiny[1].model, encoder.processor
    page_vectors = encoder.encode_images(pages)
    query_vectors = encoder.encode_queries(queries)
    for page, vector in zip(pages, page_vectors):
        inputs = processor(text=[PAGE], images=[page], return_tensors="pt")
        assert inputs["input_ids"][0, -1] == QWEN_IDS["<|endoftext|>"]
        with torch.no_grad():
            hidden = backbone(**inputs).last_hidden_state
        assert np.allclose(vector, unit(hidden[0, -1]), atol=1e-5)
    dummy = transformers.image_utils.load_image(pages[0]).resize((56, 56)).point(lambda _: 0)
    inputs = processor(
        text=[QUERY.format(queries[0])],
        images=[dummy],
        return_tensors="pt",
        size={"shortest_edge": 3136, "longest_edge": 3136},
    )
    assert int((inputs["input_ids"] == QWEN_IDS["<|image_pad|>"]).sum()) == 4
    with torch.no_grad():
        hidden = backbone(**inputs).last_hidden_state
    assert np.allclose(query_vectors[0], unit(hidden[0, -1]), atol=1e-5)


def test_scores_come_from_the_model(encoder, pages, queries):
    before = encoder.encode_images(pages)
    query_before = encoder.encode_queries(queries)
    with perturbed(encoder.model.language_model.layers[1].mlp.down_proj.weight):
        assert_differ(encoder.encode_images(pages), before)
        assert_differ(encoder.encode_queries(queries), query_before)
    assert_same(encoder.encode_images(pages), before, atol=0)
    scores = np.stack(query_before) @ np.stack(before).T
    assert scores.shape == (3, 3) and np.abs(scores).max() <= 1 + 1e-5


def test_max_pixels_and_truncation(tiny, encoder, pages):
    small = make_encoder("dse", model=str(tiny[0]), device="cpu", max_pixels=28 * 28 * 4, truncate_dim=16)
    assert small.max_pixels == 28 * 28 * 4 and small.dim == 16
    assert small.spec()["options"] == {"truncate_dim": 16} and small.spec()["dim"] == 16
    vectors = small.encode_images(pages)
    assert all(v.shape == (16,) for v in vectors)
    assert np.allclose(np.linalg.norm(np.stack(vectors), axis=1), 1, atol=1e-5)
    tokens = small.processor(text=[PAGE], images=[pages[0]], return_tensors="pt")["input_ids"]
    assert int((tokens == QWEN_IDS["<|image_pad|>"]).sum()) <= 4  # max_pixels took effect
    with pytest.raises(PagesightError, match="truncate_dim must be between 1 and 64"):
        make_encoder("dse", model=str(tiny[0]), device="cpu", truncate_dim=65)


def test_lora_adapter_equals_merging(tiny, encoder, pages, queries, tmp_path):
    folder, model = tiny
    merged = save_lora(model, tmp_path / "adapter", ["q_proj", "v_proj"])
    merged.save_pretrained(tmp_path / "merged")
    encoder.processor.save_pretrained(tmp_path / "merged")
    adapted = make_encoder("dse", model=str(folder), adapter=str(tmp_path / "adapter"), device="cpu")
    reference = make_encoder("dse", model=str(tmp_path / "merged"), device="cpu")
    assert_same(adapted.encode_images(pages), reference.encode_images(pages))
    assert_same(adapted.encode_queries(queries), reference.encode_queries(queries))
    assert_differ(adapted.encode_images(pages), encoder.encode_images(pages))
    assert adapted.spec()["adapter"] == str((tmp_path / "adapter").resolve())


def test_loading_errors(tiny, tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(PagesightError, match=f"cannot load the processor from '{missing}': no such folder"):
        make_encoder("dse", model=str(missing), device="cpu")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PagesightError, match=f"cannot load the processor from '{empty}'"):
        make_encoder("dse", model=str(empty), device="cpu")
    with pytest.raises(PagesightError, match=f"cannot load the adapter from '{tmp_path / 'none'}'"):
        make_encoder("dse", model=str(tiny[0]), adapter=str(tmp_path / "none"), device="cpu")
    with pytest.raises(PagesightError, match="batch_size must be at least 1"):
        make_encoder("dse", model=str(tiny[0]), device="cpu", batch_size=0)
