"""Qwen3-VL-Embedding, VisRAG-Ret (over Qwen2-VL) and jina-embeddings-v4 (over Qwen2.5-VL) on tiny
random-weight models: each family's prompts and pooling, recomputed here from the backbone. (The
published VisRAG-Ret and jina-embeddings-v4 run their own code: test_remote_code.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from pagesight.encode.visual import ENCODERS, check_compatible, joint_queries, make_encoder
from pagesight.encode.visual.pooling import span_mask
from pagesight.errors import PagesightError
from pagesight.testing.encoder import assert_differ, assert_encoder_contract

from .conftest import QWEN_IDS, build_qwen, perturbed, unit

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"


def backbone_hidden(backbone, processor, text: str, image=None):
    """The backbone's last hidden states and input ids for one unpadded input."""
    inputs = processor(text=[text], images=[image] if image is not None else None, return_tensors="pt")
    with torch.no_grad():
        return backbone(**inputs).last_hidden_state[0], inputs["input_ids"][0]


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-qwen3-vl")
    model = build_qwen(
        folder, "qwen3-vl", transformers.Qwen3VLForConditionalGeneration, transformers.Qwen3VLProcessor
    )
    return folder, model, make_encoder("qwen3-vl-embedding", model=str(folder), device="cpu", batch_size=2)


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-qwen2-vl")
    model = build_qwen(
        folder, "qwen2-vl", transformers.Qwen2VLForConditionalGeneration, transformers.Qwen2VLProcessor
    )
    return folder, model, make_encoder("visrag-ret", model=str(folder), device="cpu", batch_size=2)


@pytest.fixture(scope="module")
def qwen25(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-qwen2.5-vl")
    model = build_qwen(
        folder,
        "qwen2.5-vl",
        transformers.Qwen2_5_VLForConditionalGeneration,
        transformers.Qwen2_5_VLProcessor,
    )
    return folder, model, make_encoder("jina-v4", model=str(folder), device="cpu", batch_size=2)


def test_qwen3_vl_embedding(qwen3, pages, queries):
    _, model, encoder = qwen3
    assert (encoder.dim, encoder.multi_vector) == (64, False)
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    system = "<|im_start|>system\n{}<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
    page_prompt = system.format("Represent the user's input.", IMAGE)
    hidden, ids = backbone_hidden(model.model, encoder.processor, page_prompt, pages[1])
    assert int((ids == QWEN_IDS["<|image_pad|>"]).sum()) > 1
    assert np.allclose(page_vectors[1], unit(hidden[-1]), atol=1e-5)  # the last token: "\n" after assistant
    query_prompt = system.format("Retrieve images or text relevant to the user's query.", queries[2])
    hidden, _ = backbone_hidden(model.model, encoder.processor, query_prompt)
    assert np.allclose(query_vectors[2], unit(hidden[-1]), atol=1e-5)
    crop = pages[0].crop((0, 0, 64, 64))
    hidden, _ = backbone_hidden(
        model.model, encoder.processor, system.format(*query_prompt_parts(IMAGE)), crop
    )
    assert np.allclose(encoder.encode_image_queries([crop])[0], unit(hidden[-1]), atol=1e-5)
    assert encoder.spec()["options"]["query_instruction"].startswith("Retrieve images")
    with perturbed(encoder.model.language_model.layers[0].self_attn.q_proj.weight):
        assert_differ(encoder.encode_images(pages), page_vectors)


def test_qwen3_vl_embedding_embeds_a_question_with_its_picture(qwen3, pages, queries):
    """One chat message holds the picture, then the question, under the query instruction."""
    folder, model, encoder = qwen3
    system = "<|im_start|>system\n{}<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
    crop = pages[1].crop((0, 0, 84, 56))
    joint = encoder.encode_image_text_queries([crop, pages[0]], [queries[1], queries[0]])
    hidden, ids = backbone_hidden(
        model.model, encoder.processor, system.format(*query_prompt_parts(IMAGE + queries[1])), crop
    )
    assert int((ids == QWEN_IDS["<|image_pad|>"]).sum()) > 1
    assert np.allclose(joint[0], unit(hidden[-1]), atol=1e-5)
    assert joint_queries(encoder)
    assert_differ(joint[:1], encoder.encode_image_queries([crop]))  # the question is read too
    with pytest.raises(PagesightError, match="2 query images for 1 texts"):
        encoder.encode_image_text_queries([crop, crop], [queries[0]])


def test_the_other_embedders_embed_a_query_image_alone(qwen2, qwen25):
    assert not joint_queries(qwen2[2]) and not joint_queries(qwen25[2])
    assert {name for name in ENCODERS if joint_queries(ENCODERS.load(name))} == {"dse", "qwen3-vl-embedding"}


def query_prompt_parts(user: str) -> tuple[str, str]:
    return "Retrieve images or text relevant to the user's query.", user


def test_visrag_position_weighted_mean(qwen2, pages, queries):
    _, model, encoder = qwen2
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    hidden, ids = backbone_hidden(model.model, encoder.processor, IMAGE, pages[0])
    n = hidden.shape[0]
    weights = torch.arange(1, n + 1, dtype=torch.float32) / (n * (n + 1) / 2)
    assert np.allclose(page_vectors[0], unit((weights[:, None] * hidden).sum(0)), atol=1e-5)
    assert not np.allclose(page_vectors[0], unit(hidden.mean(0)), atol=1e-3)  # not a plain mean
    text = "Represent this query for retrieving relevant documents: " + queries[1]
    hidden, _ = backbone_hidden(model.model, encoder.processor, text)
    n = hidden.shape[0]
    weights = torch.arange(1, n + 1, dtype=torch.float32)
    assert np.allclose(query_vectors[1], unit((weights[:, None] * hidden).sum(0)), atol=1e-5)
    with perturbed(encoder.model.visual.blocks[0].mlp.fc1.weight):
        assert_differ(encoder.encode_images(pages), page_vectors)
        assert np.allclose(
            encoder.encode_queries(queries), query_vectors, atol=1e-6
        )  # text path has no vision


def test_jina_v4_mean_pooling(qwen25, pages, queries):
    _, model, encoder = qwen25
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    prompt = f"<|im_start|>user\n{IMAGE}Describe the image.<|im_end|>\n"
    hidden, ids = backbone_hidden(model.model, encoder.processor, prompt, pages[2])
    start = int((ids == QWEN_IDS["<|vision_start|>"]).nonzero()[0])
    end = int((ids == QWEN_IDS["<|vision_end|>"]).nonzero()[0])
    assert 0 < start < end < len(ids) - 1
    assert np.allclose(page_vectors[2], unit(hidden[start : end + 1].mean(0)), atol=1e-5)
    hidden, _ = backbone_hidden(model.model, encoder.processor, "Query: " + queries[0])
    assert np.allclose(query_vectors[0], unit(hidden.mean(0)), atol=1e-5)
    truncated = make_encoder("jina-v4", model=str(qwen25[0]), device="cpu", truncate_dim=32)
    assert np.allclose(truncated.encode_queries(queries[:1])[0], unit(hidden.mean(0)[:32]), atol=1e-5)


def test_span_mask():
    ids = torch.tensor([[0, 0, 9, 3, 5, 5, 4, 8], [9, 3, 5, 4, 8, 3, 5, 4]])
    assert span_mask(ids, 3, 4).tolist() == [[0, 0, 0, 1, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0, 0, 0]]


def test_spec_names_the_encoder(qwen2, qwen25):
    visrag, jina = qwen2[2], qwen25[2]
    check_compatible(visrag.spec(), visrag)
    with pytest.raises(
        PagesightError, match="built with visual encoder 'jina-v4'.*this search uses 'visrag-ret'"
    ):
        check_compatible(jina.spec(), visrag)


def test_wrong_architecture_is_refused(qwen2):
    """A Qwen2-VL checkpoint loaded as a Qwen2.5-VL backbone would leave weights random: refused."""
    with pytest.raises(PagesightError, match=f"cannot load the model from '{qwen2[0]}'"):
        make_encoder("jina-v4", model=str(qwen2[0]), device="cpu")


def test_a_native_checkpoint_runs_the_recipe_here(qwen2, qwen25):
    """visrag-ret and jina-v4 load the published checkpoints through their own code
    (test_remote_code.py), and a transformers-native checkpoint through these recipes, no leave needed."""
    assert (type(qwen2[2]).__name__, type(qwen25[2]).__name__) == ("VisRAGRetEncoder", "JinaV4Encoder")
