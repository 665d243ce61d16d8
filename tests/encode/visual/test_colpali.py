"""ColPali (PaliGemma) through colpali-engine on a tiny random-weight model: one 128-dim vector per
real token, bidirectional attention over every input whatever its batch (as ColPali was trained),
the tied LM head restored, MaxSim scores equal to colpali-engine's, LoRA adapters."""

from __future__ import annotations

import importlib.util
import json

import pytest

from pagesight.encode.visual import check_compatible, make_encoder
from pagesight.errors import PagesightError
from pagesight.testing.encoder import assert_differ, assert_encoder_contract, assert_same

from .conftest import (
    PALIGEMMA_IMAGE,
    PALIGEMMA_SPECIALS,
    assert_matches_colpali_engine,
    build_colpali,
    save_lora,
)

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("colpali_engine") is None:
    pytest.skip("colpali-engine is not installed", allow_module_level=True)

from pagesight.encode.visual.late_interaction import import_colpali  # noqa: E402

SIDE = PALIGEMMA_IMAGE[0]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    models = import_colpali()
    folder = tmp_path_factory.mktemp("tiny-colpali")
    model = build_colpali(folder, models.ColPali, models.ColPaliProcessor)
    return folder, model, make_encoder("colpali", model=str(folder), device="cpu", batch_size=2)


def test_contract_and_tokens(tiny, pages, queries):
    _, _, encoder = tiny
    assert (encoder.name, encoder.multi_vector, encoder.dim) == ("colpali", True, 128)
    assert (encoder.image_size, encoder.max_pixels) == ((SIDE, SIDE), SIDE * SIDE)
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    batch = encoder.processor.process_images(pages[:1])
    image_tokens = int((batch["input_ids"] == PALIGEMMA_SPECIALS.index("<image>")).sum())
    assert image_tokens == (SIDE // PALIGEMMA_IMAGE[1]) ** 2
    assert page_vectors[0].shape[0] == batch["input_ids"].shape[1] > image_tokens  # image + prompt tokens
    lengths = encoder.processor.process_queries(queries)["attention_mask"].sum(1).tolist()
    assert [v.shape[0] for v in query_vectors] == lengths  # padding dropped
    assert min(lengths) < max(lengths)  # so the batch-size checks above padded some queries


def test_lm_head_is_tied(tiny):
    _, _, encoder = tiny
    inner = encoder.model.model
    assert not inner.lm_head.weight.is_meta
    assert inner.lm_head.weight.data_ptr() == inner.model.language_model.embed_tokens.weight.data_ptr()


def test_attention_is_bidirectional_and_batch_free(tiny, queries):
    """Every token sees the whole input (the first token's vector changes with the last word), and the
    vectors equal colpali-engine's model run under eager attention on each input alone."""
    folder, _, encoder = tiny
    first = [vectors[0] for vectors in encoder.encode_queries(["costs fell", "costs rose"])]
    assert_differ([first[0]], [first[1]])
    models = import_colpali()
    eager = models.ColPali.from_pretrained(str(folder), attn_implementation="eager").eval()
    eager.model.tie_weights()
    expected = []
    with torch.no_grad():
        for query in queries:
            batch = dict(encoder.processor.process_queries([query]))
            batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
            expected.append(eager(**batch)[0].numpy())
    assert_same(encoder.encode_queries(queries), expected)


def test_vectors_are_colpali_engines(tiny, pages, queries):
    """The vectors are the model's own output on the real tokens; scores equal colpali-engine's
    score_multi_vector on the same tensors."""
    _, model, encoder = tiny
    assert not encoder.processor.process_images(pages)["token_type_ids"].any()  # pages are all prefix
    assert_matches_colpali_engine(encoder, model, pages, queries, "custom_text_proj")


def test_fixed_resolution(tiny):
    folder, _, _ = tiny
    with pytest.raises(PagesightError, match=f"resizes every image to {SIDE}x{SIDE}.*max_pixels=1000"):
        make_encoder("colpali", model=str(folder), device="cpu", max_pixels=1000)


def test_lora_and_compatibility(tiny, pages, queries, tmp_path):
    folder, model, encoder = tiny
    merged = save_lora(model, tmp_path / "adapter", ["q_proj", "v_proj"])
    merged.save_pretrained(tmp_path / "merged")
    encoder.processor.save_pretrained(tmp_path / "merged")
    adapted = make_encoder("colpali", model=str(folder), adapter=str(tmp_path / "adapter"), device="cpu")
    reference = make_encoder("colpali", model=str(tmp_path / "merged"), device="cpu")
    assert_same(adapted.encode_images(pages), reference.encode_images(pages))
    assert_same(adapted.encode_queries(queries), reference.encode_queries(queries))
    assert_differ(adapted.encode_queries(queries), encoder.encode_queries(queries))
    with pytest.raises(PagesightError, match=f"adapter {tmp_path / 'adapter'}"):
        check_compatible(adapted.spec(), encoder)


def test_adapter_folder_as_model(tiny, queries, tmp_path):
    """The published vidore/colpali-v1.3 is a LoRA adapter naming its base checkpoint: loaded as the
    model, it gives the base with the adapter merged."""
    folder, model, encoder = tiny
    save_lora(model, tmp_path / "adapter", ["q_proj", "v_proj"])
    config_path = tmp_path / "adapter" / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "base_model_name_or_path": str(folder)}))
    encoder.processor.save_pretrained(tmp_path / "adapter")
    published = make_encoder("colpali", model=str(tmp_path / "adapter"), device="cpu")
    merged = make_encoder("colpali", model=str(folder), adapter=str(tmp_path / "adapter"), device="cpu")
    assert_same(published.encode_queries(queries), merged.encode_queries(queries))
    assert_differ(published.encode_queries(queries), encoder.encode_queries(queries))
