"""ColSmol (Idefics3) and ColModernVBert (ModernVBERT) through colpali-engine on tiny random-weight
models: both use Idefics3's processor (pages cut into tiles plus a global view), one 128-dim vector
per real token, MaxSim scores equal to colpali-engine's, LoRA adapters."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from PIL import Image

from pagesight.encode.visual import check_compatible, make_encoder
from pagesight.errors import PagesightError
from pagesight.testing.encoder import assert_differ, assert_encoder_contract, assert_same

from .conftest import (
    IDEFICS3_IMAGE,
    IDEFICS3_SPECIALS,
    assert_matches_colpali_engine,
    build_idefics3,
    render_page,
    save_lora,
)

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("colpali_engine") is None:
    pytest.skip("colpali-engine is not installed", allow_module_level=True)

from pagesight.encode.visual.late_interaction import import_colpali  # noqa: E402

TILE, _, LONGEST = IDEFICS3_IMAGE
IMAGE_TOKEN = IDEFICS3_SPECIALS.index("<image>")
# name, family, model class, processor class, projection layer, LoRA targets
FAMILIES = [
    ("colsmol", "idefics3", "ColIdefics3", "ColIdefics3Processor", "linear", ["q_proj", "v_proj"]),
    (
        "colmodernvbert",
        "modernvbert",
        "ColModernVBert",
        "ColModernVBertProcessor",
        "custom_text_proj",
        ["Wqkv", "q_proj"],
    ),
]


@pytest.fixture(scope="module", params=FAMILIES, ids=[family[0] for family in FAMILIES])
def tiny(request, tmp_path_factory):
    name, family, model_class, processor_class, projection, targets = request.param
    models = import_colpali()
    folder = tmp_path_factory.mktemp(f"tiny-{name}")
    model = build_idefics3(folder, family, getattr(models, model_class), getattr(models, processor_class))
    encoder = make_encoder(name, model=str(folder), device="cpu", batch_size=2)
    return name, folder, model, encoder, projection, targets


def image_tokens(processor, images: list[Image.Image]) -> list[int]:
    return (processor.process_images(images)["input_ids"] == IMAGE_TOKEN).sum(1).tolist()


def test_contract_and_tokens(tiny, pages, queries):
    name, _, _, encoder, _, _ = tiny
    assert (encoder.name, encoder.multi_vector, encoder.dim) == (name, True, 128)
    assert (encoder.image_size, encoder.max_pixels) == (None, LONGEST * LONGEST)
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    batch = encoder.processor.process_images(pages[:1])
    assert image_tokens(encoder.processor, pages[:1]) == [4 * (2 * 2 + 1)]  # 2x2 tiles and the global view
    assert page_vectors[0].shape[0] == batch["input_ids"].shape[1]  # image and prompt tokens, no padding
    lengths = encoder.processor.process_queries(queries)["attention_mask"].sum(1).tolist()
    assert [v.shape[0] for v in query_vectors] == lengths  # padding dropped
    assert min(lengths) < max(lengths)  # so the batch-size checks above padded some queries


def test_pages_of_different_tilings_batch_together(tiny, pages):
    """A wide strip is one row of tiles: its batch is padded (tokens and tile images), and each page's
    vectors are still those it gets alone."""
    _, _, _, encoder, _, _ = tiny
    mixed = [render_page((112, 30), ["Strip"]), pages[0]]
    assert image_tokens(encoder.processor, mixed[:1]) == [4 * (1 * 2 + 1)]
    together = encoder.encode_images(mixed)
    assert together[0].shape[0] < together[1].shape[0]
    assert_same(together, encoder.encode_images(mixed[:1]) + encoder.encode_images(mixed[1:]))


def test_vectors_are_colpali_engines(tiny, pages, queries):
    """The vectors are the model's own output on the real tokens; scores equal colpali-engine's
    score_multi_vector on the same tensors."""
    _, _, model, encoder, projection, _ = tiny
    assert_matches_colpali_engine(encoder, model, pages, queries, projection)


def test_max_pixels(tiny, pages):
    name, folder, _, encoder, _, _ = tiny
    small = make_encoder(name, model=str(folder), device="cpu", max_pixels=TILE * TILE + 100)
    assert small.max_pixels == TILE * TILE  # whole tiles only
    assert image_tokens(small.processor, pages[:1]) == [4]  # one tile: no split, no global view
    assert small.encode_images(pages[:1])[0].shape[0] < encoder.encode_images(pages[:1])[0].shape[0]


def test_lora_and_compatibility(tiny, pages, queries, tmp_path):
    name, folder, model, encoder, _, targets = tiny
    merged = save_lora(model, tmp_path / "adapter", targets)
    merged.save_pretrained(tmp_path / "merged")
    encoder.processor.save_pretrained(tmp_path / "merged")
    adapted = make_encoder(name, model=str(folder), adapter=str(tmp_path / "adapter"), device="cpu")
    reference = make_encoder(name, model=str(tmp_path / "merged"), device="cpu")
    assert_same(adapted.encode_images(pages), reference.encode_images(pages))
    assert_same(adapted.encode_queries(queries), reference.encode_queries(queries))
    assert_differ(adapted.encode_queries(queries), encoder.encode_queries(queries))
    with pytest.raises(PagesightError, match=f"adapter {tmp_path / 'adapter'}"):
        check_compatible(adapted.spec(), encoder)


def test_a_similarity_map_puts_each_tile_s_tokens_in_their_place(tiny, pages):
    """The connector's pixel shuffle lays each tile's tokens out in raster order, the prompt the
    tiles in raster order; the map is the page's tiles side by side, the global view left out."""
    name, folder, model, encoder, _, _ = tiny
    patches_per_side = TILE // model.config.vision_config.patch_size  # 4 patches a side, merged 2x2
    ids = torch.arange(patches_per_side**2, dtype=torch.float32).view(1, -1, 1)
    shuffled = model.model.connector.pixel_shuffle(ids, 2)[0]  # (tokens, 4 patch ids each)
    for token, merged in enumerate(shuffled.long().tolist()):
        assert {(p // patches_per_side // 2, p % patches_per_side // 2) for p in merged} == {divmod(token, 2)}

    grid = encoder.patch_similarity(pages[0], "quarterly revenue")
    assert grid.shape == (4, 4)  # 2x2 tiles of 2x2 tokens
    small = make_encoder(name, model=str(folder), device="cpu", max_pixels=TILE * TILE + 100)
    assert small.patch_similarity(pages[0], "quarterly revenue").shape == (2, 2)  # the global view alone
    if name == "colsmol":  # causal: a token changes only with the tokens before it
        page = Image.new("RGB", (LONGEST, LONGEST), "white")  # exactly 2x2 tiles
        marked = page.copy()
        marked.paste((0, 0, 0), (LONGEST // 2 + 8, LONGEST // 2 + 8, LONGEST - 8, LONGEST - 8))
        changed = ~np.isclose(
            encoder.patch_similarity(page, "quarterly revenue"),
            encoder.patch_similarity(marked, "quarterly revenue"),
            atol=1e-6,
        )
        assert changed[2:, 2:].all() and not changed[:2].any() and not changed[:, :2].any()
