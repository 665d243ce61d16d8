"""CLIP and SigLIP on tiny random-weight dual encoders: projected image and text features, CLIP's
pooling at the end-of-text token, SigLIP's text padded to its full length."""

from __future__ import annotations

import numpy as np
import pytest

from pagesight.encode.visual import check_compatible, make_encoder
from pagesight.errors import PagesightError
from pagesight.testing.encoder import assert_differ, assert_encoder_contract

from .conftest import build_clip, build_siglip, perturbed, unit

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-clip")
    model = build_clip(folder)
    return folder, model, make_encoder("clip", model=str(folder), device="cpu")


@pytest.fixture(scope="module")
def siglip(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-siglip")
    model = build_siglip(folder)
    return folder, model, make_encoder("siglip", model=str(folder), device="cpu")


def test_clip(clip, pages, queries):
    _, model, encoder = clip
    assert (encoder.dim, encoder.image_size, encoder.max_pixels) == (16, (56, 56), 56 * 56)
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    tokens = encoder.processor.tokenizer([queries[0]], return_tensors="pt")
    ids = tokens["input_ids"][0]
    assert ids[0] == 0 and ids[-1] == 1  # <|startoftext|> ... <|endoftext|>
    with torch.no_grad():
        hidden = model.text_model(**tokens).last_hidden_state[0]
        expected = model.text_projection(hidden[-1])  # pooled at the end-of-text token
        pixels = encoder.processor.image_processor(images=[pages[1]], return_tensors="pt")["pixel_values"]
        image = model.visual_projection(model.vision_model(pixel_values=pixels).pooler_output[0])
    assert np.allclose(query_vectors[0], unit(expected), atol=1e-5)
    assert np.allclose(page_vectors[1], unit(image), atol=1e-5)
    with perturbed(encoder.model.visual_projection.weight):
        assert_differ(encoder.encode_images(pages), page_vectors)


def test_siglip(siglip, clip, pages, queries):
    _, model, encoder = siglip
    assert (encoder.dim, encoder.image_size) == (32, (56, 56))
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    tokens = encoder.processor.tokenizer(
        [queries[1]], padding="max_length", max_length=64, truncation=True, return_tensors="pt"
    )
    with torch.no_grad():
        expected = model.text_model(input_ids=tokens["input_ids"]).pooler_output[0]
    assert np.allclose(query_vectors[1], unit(expected), atol=1e-5)
    with pytest.raises(PagesightError, match="'clip'.*'siglip'"):
        check_compatible(clip[2].spec(), encoder)
