"""Tiny random-weight models of every visual encoder family, built from a config and saved to a folder.

Each builder saves what a hub checkpoint holds (weights, config, tokenizer, image processor) with
``save_pretrained``, so the encoders load it through their own ``model=<folder>`` path. Tokenizers
are byte-level BPEs trained here on a few words plus the family's special tokens; image processors
are transformers' PIL ones (no torchvision here). The pixel budgets are tiny so a page is a handful
of vision tokens and the whole folder runs in seconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from pagesight.testing.encoder import assert_differ

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

QWEN_SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
QWEN_IDS = dict(zip(QWEN_SPECIALS, range(len(QWEN_SPECIALS))))
WORDS = [
    "Annual report 2023: revenue grew 12% in 2023.",
    "Outlook: costs fell by 4%. Staff: 120.",
    "Describe the image. What is shown in this image? Query: Passage: ",
    "Represent the user's input. Retrieve images or text relevant to the user's query.",
    "Represent this query for retrieving relevant documents: ",
    "system user assistant Question: Answer:",
]
QUERIES = ["revenue growth in 2023", "how many staff", "costs fell"]
PAGE_LINES = [
    ["Annual report", "Revenue +12%"],
    ["Outlook", "Costs -4%", "Staff 120"],
    ["Appendix", "Table 3"],
]
PAGE_SIZES = [(84, 112), (112, 84), (56, 84)]  # (width, height)
QWEN_PIXELS = (28 * 28 * 2, 28 * 28 * 12)  # min and max pixels saved in the Qwen image processors


def train_tokenizer(
    specials: list[str], vocab_size: int = 300, **kwargs
) -> transformers.PreTrainedTokenizerFast:
    """A byte-level BPE over ``WORDS`` whose first ids are ``specials``, in order."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(WORDS + QUERIES + [" ".join(lines) for lines in PAGE_LINES], trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, **kwargs)
    assert tokenizer.convert_tokens_to_ids(specials) == list(range(len(specials)))
    return tokenizer


def qwen_tokenizer() -> transformers.PreTrainedTokenizerFast:
    return train_tokenizer(
        QWEN_SPECIALS,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=QWEN_SPECIALS[1:],
    )


def render_page(size: tuple[int, int], lines: list[str], seed: int = 0) -> Image.Image:
    """A white page with black text lines and a grey box, like a rendered tile."""
    page = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(page)
    for row, line in enumerate(lines):
        draw.text((4, 4 + 14 * row), line, fill="black")
    draw.rectangle((4 + seed * 3, size[1] - 20, size[0] // 2, size[1] - 6), fill=(120, 120, 120))
    return page


@pytest.fixture(scope="session")
def pages() -> list[Image.Image]:
    return [render_page(size, lines, seed) for seed, (size, lines) in enumerate(zip(PAGE_SIZES, PAGE_LINES))]


@pytest.fixture(scope="session")
def queries() -> list[str]:
    return list(QUERIES)


def qwen_text_config(**overrides) -> dict:
    config = {
        "vocab_size": 320,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0},
        "bos_token_id": 0,
        "eos_token_id": QWEN_IDS["<|im_end|>"],
        "pad_token_id": 0,
    }
    return {**config, **overrides}


QWEN_TOKEN_IDS = {
    "image_token_id": QWEN_IDS["<|image_pad|>"],
    "video_token_id": QWEN_IDS["<|video_pad|>"],
    "vision_start_token_id": QWEN_IDS["<|vision_start|>"],
    "vision_end_token_id": QWEN_IDS["<|vision_end|>"],
}


QWEN3_VISION = {
    "depth": 2,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_heads": 2,
    "out_hidden_size": 64,
    "num_position_embeddings": 64,
    "patch_size": 16,
}
QWEN3_ROPE = {
    "rope_type": "default",
    "mrope_section": [2, 3, 3],
    "mrope_interleaved": True,
    "rope_theta": 10000.0,
}


def qwen_config(family: str):
    """A two-layer config of ``family``: "qwen2-vl", "qwen2.5-vl", "qwen3-vl" or "qwen3.5" (one Gated
    DeltaNet layer, one full-attention layer; a ColQwen3.5 projection of 320 dimensions, as the
    published checkpoints' ``dim``)."""
    if family == "qwen2-vl":
        vision = {"depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "patch_size": 14}
        return transformers.Qwen2VLConfig(
            text_config=qwen_text_config(), vision_config=vision, **QWEN_TOKEN_IDS
        )
    if family == "qwen2.5-vl":
        vision = {
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 64,
            "window_size": 56,
            "fullatt_block_indexes": [0],
            "patch_size": 14,
        }
        return transformers.Qwen2_5_VLConfig(
            text_config=qwen_text_config(), vision_config=vision, **QWEN_TOKEN_IDS
        )
    if family == "qwen3-vl":
        vision = {**QWEN3_VISION, "deepstack_visual_indexes": [0]}
        text = qwen_text_config(head_dim=16, rope_parameters=QWEN3_ROPE)
        return transformers.Qwen3VLConfig(text_config=text, vision_config=vision, **QWEN_TOKEN_IDS)
    if family == "qwen3.5":
        vision = {**QWEN3_VISION, "depth": 1}
        text = qwen_text_config(
            head_dim=32,  # half of it rotated (Qwen3.5 rotates a quarter of its 256)
            layer_types=["linear_attention", "full_attention"],
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            rope_parameters={**QWEN3_ROPE, "partial_rotary_factor": 0.5},
        )
        config = transformers.Qwen3_5Config(text_config=text, vision_config=vision, **QWEN_TOKEN_IDS)
        config.dim = 320
        return config
    raise ValueError(family)


def save_qwen_processor(folder: Path, family: str, processor_class: type) -> object:
    """Save a Qwen-family processor (image-only: no torchvision for a video processor) to ``folder``."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from pagesight.encode.visual.processors import image_only

    patch = 16 if family in ("qwen3-vl", "qwen3.5") else 14
    factor = (patch * 2) ** 2 / 28**2
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch,
        min_pixels=int(QWEN_PIXELS[0] * factor),
        max_pixels=int(QWEN_PIXELS[1] * factor),
    )
    processor = image_only(processor_class)(image_processor=image_processor, tokenizer=qwen_tokenizer())
    processor.save_pretrained(folder)
    return processor


def build_qwen(folder: Path, family: str, model_class: type, processor_class: type, seed: int = 0):
    """A random-weight ``model_class`` of ``family`` and its processor, saved to ``folder``."""
    torch.manual_seed(seed)
    model = model_class(qwen_config(family)).eval()
    model.save_pretrained(folder)
    save_qwen_processor(folder, family, processor_class)
    return model


PALIGEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<image>"]
PALIGEMMA_IMAGE = (56, 14)  # image side and patch: 16 image tokens per page


def build_colpali(folder: Path, model_class: type, processor_class: type, seed: int = 0):
    """A random-weight ColPali (two-layer PaliGemma) and its processor, saved to ``folder``. The
    tokenizer pads on the right, as the published ColPali checkpoints do; the processor adds
    PaliGemma's 1,152 location and segmentation tokens to it, hence the vocabulary of 1,536."""
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    side, patch = PALIGEMMA_IMAGE
    tokenizer = train_tokenizer(
        PALIGEMMA_SPECIALS,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        padding_side="right",
    )
    image_processor = SiglipImageProcessorPil(
        size={"height": side, "width": side}, image_seq_length=(side // patch) ** 2
    )
    processor = processor_class(image_processor=image_processor, tokenizer=tokenizer)
    config = transformers.PaliGemmaConfig(
        text_config={
            "model_type": "gemma",
            "vocab_size": 1536,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "pad_token_id": 0,
            "eos_token_id": 1,
            "bos_token_id": 2,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": side,
            "patch_size": patch,
        },
        image_token_id=PALIGEMMA_SPECIALS.index("<image>"),
        projection_dim=64,
        hidden_size=64,
    )
    torch.manual_seed(seed)
    model = model_class(config).eval()
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return model


IDEFICS3_SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|begin_of_text|>",
    "<end_of_utterance>",
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
] + [f"<row_{row}_col_{col}>" for row in range(1, 7) for col in range(1, 7)]
IDEFICS3_IMAGE = (56, 14, 112)  # tile side, patch, longest edge: 4 vectors per tile, up to 2x2 tiles


def build_idefics3(folder: Path, family: str, model_class: type, processor_class: type, seed: int = 0):
    """A random-weight ColSmol (``family`` "idefics3": SigLIP + Llama) or ColModernVBert
    ("modernvbert": SigLIP + ModernBERT) and its Idefics3 processor, saved to ``folder``. The
    vision tower sees 56-pixel tiles of 14-pixel patches, merged 2x2: 4 vectors per tile."""
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    tile, patch, longest = IDEFICS3_IMAGE
    bos = "<|im_start|>" if family == "idefics3" else "<|begin_of_text|>"
    tokenizer = train_tokenizer(
        IDEFICS3_SPECIALS,
        pad_token="<|endoftext|>",
        bos_token=bos,
        eos_token="<end_of_utterance>",
        extra_special_tokens=IDEFICS3_SPECIALS[1:],
    )
    image_processor = Idefics3ImageProcessorPil(
        size={"longest_edge": longest}, max_image_size={"longest_edge": tile}
    )
    processor = processor_class(image_processor=image_processor, tokenizer=tokenizer, image_seq_len=4)
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": tile,
        "patch_size": patch,
    }
    image_token_id = IDEFICS3_SPECIALS.index("<image>")
    text = {
        "vocab_size": 320,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "pad_token_id": 0,
    }
    if family == "idefics3":
        config = transformers.Idefics3Config(
            vision_config=vision,
            text_config={**text, "model_type": "llama", "num_key_value_heads": 2},
            image_token_id=image_token_id,
            scale_factor=2,
            pad_token_id=0,
        )
    elif family == "modernvbert":
        config = transformers.ModernVBertConfig(
            vision_config={**vision, "model_type": "siglip_vision_model"},
            text_config={
                **text,
                "model_type": "modernbert",
                "bos_token_id": 2,
                "eos_token_id": 3,
                "cls_token_id": 2,
                "sep_token_id": 3,
                "local_attention": 16,
                "layer_types": ["full_attention", "sliding_attention"],
            },
            image_token_id=image_token_id,
            pixel_shuffle_factor=2,
        )
    else:
        raise ValueError(family)
    torch.manual_seed(seed)
    model = model_class(config).eval()
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return model


def unit(vector) -> object:
    """``vector`` (a torch tensor) as a float32 numpy array of unit norm."""
    array = vector.detach().float().cpu().numpy()
    return (array / np.linalg.norm(array, axis=-1, keepdims=True)).astype(np.float32)


class perturbed:
    """Within the block, ``parameter`` (of a loaded encoder's model) has random noise added."""

    def __init__(self, parameter, scale: float = 0.5):
        self.parameter, self.scale = parameter, scale

    def __enter__(self):
        self.saved = self.parameter.detach().clone()
        generator = torch.Generator().manual_seed(7)
        with torch.no_grad():
            noise = torch.randn(self.parameter.shape, generator=generator, dtype=self.parameter.dtype)
            self.parameter.add_(self.scale * noise)
        return self

    def __exit__(self, *exc):
        with torch.no_grad():
            self.parameter.copy_(self.saved)


def save_lora(model, folder: Path, target_modules: list[str], seed: int = 3):
    """A random (non-identity) LoRA on ``model``'s ``target_modules``, saved to ``folder``; returns
    the adapted model with the adapter merged, to compare with."""
    import copy

    peft = pytest.importorskip("peft")
    torch.manual_seed(seed)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=target_modules, init_lora_weights=False)
    tuned = peft.get_peft_model(copy.deepcopy(model), config)
    tuned.save_pretrained(folder)
    return tuned.merge_and_unload()


# A CLIP or SigLIP tower: two layers, 32 wide.
TOWER = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}


def clip_tokenizer(start: str | None, end: str, pad: str):
    """A CLIP-style tokenizer: ``start`` (if any) and ``end`` wrap every text, ``pad`` pads it."""
    specials = [token for token in (start, end, pad) if token]
    specials = list(dict.fromkeys(specials))
    tok = train_tokenizer(specials, eos_token=end, pad_token=pad, **({"bos_token": start} if start else {}))
    template = f"{start} $A {end}" if start else f"$A {end}"
    ids = [(token, tok.convert_tokens_to_ids(token)) for token in specials]
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(single=template, special_tokens=ids)
    return tok


def build_clip(folder: Path, seed: int = 0):
    """A random-weight CLIP and its processor (56-pixel images), saved to ``folder``."""
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    tok = clip_tokenizer("<|startoftext|>", "<|endoftext|>", "<|endoftext|>")
    text = {
        **TOWER,
        "vocab_size": 320,
        "max_position_embeddings": 64,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 1,
    }
    vision = {**TOWER, "image_size": 56, "patch_size": 14}
    torch.manual_seed(seed)
    model = transformers.CLIPModel(
        transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
    )
    model.eval().save_pretrained(folder)
    images = CLIPImageProcessorPil(size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56})
    transformers.CLIPProcessor(image_processor=images, tokenizer=tok).save_pretrained(folder)
    return model


def build_siglip(folder: Path, seed: int = 0):
    """A random-weight SigLIP and its processor (56-pixel images), saved to ``folder``."""
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    tok = clip_tokenizer(None, "</s>", "<pad>")
    text = {
        **TOWER,
        "vocab_size": 320,
        "max_position_embeddings": 64,
        "bos_token_id": 0,
        "eos_token_id": 0,
        "pad_token_id": 1,
    }
    vision = {**TOWER, "image_size": 56, "patch_size": 14}
    torch.manual_seed(seed)
    model = transformers.SiglipModel(transformers.SiglipConfig(text_config=text, vision_config=vision))
    model.eval().save_pretrained(folder)
    images = SiglipImageProcessorPil(size={"height": 56, "width": 56})
    transformers.SiglipProcessor(image_processor=images, tokenizer=tok).save_pretrained(folder)
    return model


def maxsim(query, page) -> float:
    """MaxSim of one query's vectors against one page's, written out."""
    return float(np.einsum("qd,pd->qp", query, page).max(axis=1).sum())


def assert_matches_colpali_engine(encoder, model, pages: list, queries: list[str], projection: str) -> None:
    """The encoder's page vectors are the model's own output on the real tokens; its MaxSim equals
    colpali-engine's ``score_multi_vector`` on the same tensors; the query vectors come from the
    model's ``projection`` layer."""
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
    with perturbed(getattr(encoder.model, projection).weight):
        assert_differ(encoder.encode_queries(queries), query_vectors)


def clip_report_and_memo(root: Path):
    """A random-weight CLIP in ``root/clip`` and two PDFs beside it, a report of two coloured pages
    and a one-page memo: the settings of an index made with that CLIP."""
    from pagesight.settings import Settings
    from tests.conftest import make_pdf

    build_clip(root / "clip")
    make_pdf(root / "report.pdf", [["Quarterly revenue"], ["Warehouse Delta"]],
             blocks=[(72, 300, 460, 300, (0.1, 0.2, 0.8)), (300, 60, 250, 500, (0.9, 0.1, 0.1))])  # fmt: skip
    make_pdf(root / "memo.pdf", [["Supplier change"]], blocks=[(60, 60, 200, 200, (0.1, 0.7, 0.2))])
    return Settings(dense_model=None, visual_encoder="clip", visual_model=str(root / "clip"))
