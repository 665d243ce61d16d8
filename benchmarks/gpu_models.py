"""Random-weight models at the public checkpoints' sizes, built from their configurations with no
download, saved with ``save_pretrained`` to folders pagesight loads as ``model=<folder>``.

    colqwen2.5  ColQwen2.5 (colpali-engine's ColQwen2_5) on Qwen2.5-VL-3B-Instruct's config,
                768 visual tokens a page at most, as vidore/colqwen2.5-v0.2's processor
    colpali     ColPali (colpali-engine's ColPali) on PaliGemma-3B at 448 px (vidore/colpali-v1.3)
    dse         DSE's backbone, Qwen2-VL-2B-Instruct's config (MrLight/dse-qwen2-2b-mrl-v1)
    reader      Qwen2.5-VL-3B-Instruct (Qwen2_5_VLForConditionalGeneration), the transformers reader

Random weights cost the FLOPs and the memory trained ones do, so times and memory are real and
rankings and answers are not. Tokenizers are byte-level BPEs trained here on a few sentences, their
special tokens first (as tests/encode/visual/conftest.py does), so their ids are small while each
embedding keeps the real vocabulary. ``tiny`` builds the same families at toy size (seconds on a CPU).
Without torchvision (a CPU install) the Qwen processors are saved without their video processor
(``encode.visual.processors.image_only``), which pagesight's encoders load either way; the reader's
is then registered with ``AutoProcessor`` under its image-only class (``register_image_only``).
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from pagesight.encode.visual.late_interaction import import_colpali
from pagesight.encode.visual.processors import image_only

MODELS = ("colqwen2.5", "colpali", "dse", "reader")
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>"]  # fmt: skip
QWEN_IDS = dict(zip(QWEN_SPECIALS, range(len(QWEN_SPECIALS))))
PALIGEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<image>"]
SENTENCES = [
    "Describe the image. What is shown in this image? Query: Passage: system user assistant",
    "Answer the question from the images. Cite regions as bboxes image page tile Question:",
    "retrieval query expansion dense sparse BM25 nDCG recall precision revenue report table figure",
    "You are a helpful assistant. Represent this query for retrieving relevant documents:",
]
# Qwen2-VL's chat template (images and text), what the reader's processor formats its prompts with
TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}"
    "{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOKEN_IDS = {
    "image_token_id": QWEN_IDS["<|image_pad|>"],
    "video_token_id": QWEN_IDS["<|video_pad|>"],
    "vision_start_token_id": QWEN_IDS["<|vision_start|>"],
    "vision_end_token_id": QWEN_IDS["<|vision_end|>"],
}
TINY_TEXT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "vocab_size": 4096}  # fmt: skip


def tokenizer(specials: list[str], vocab: int, **kwargs) -> transformers.PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(SENTENCES, trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, **kwargs)


def qwen_tokenizer(vocab: int):
    return tokenizer(QWEN_SPECIALS, vocab, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                     extra_special_tokens=QWEN_SPECIALS[1:])  # fmt: skip


def qwen_text(tiny: bool, full: dict) -> dict:
    """A Qwen text config: ``full`` (the public one), or toy sizes of the same kind."""
    text = {**TINY_TEXT, "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3],
                                             "rope_theta": 1e6}} if tiny else full  # fmt: skip
    return {**text, "rms_norm_eps": 1e-6, "hidden_act": "silu", "bos_token_id": 0, "pad_token_id": 0,
            "eos_token_id": QWEN_IDS["<|im_end|>"], "tie_word_embeddings": True}  # fmt: skip


def qwen25_config(tiny: bool) -> transformers.Qwen2_5_VLConfig:
    """Qwen2.5-VL-3B-Instruct's configuration (its config.json), or a toy one."""
    rope = {"rope_type": "default", "mrope_section": [16, 24, 24], "rope_theta": 1e6}
    text = qwen_text(tiny, {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 11008,
                            "num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 2,
                            "max_position_embeddings": 128000, "rope_parameters": rope})  # fmt: skip
    vision = (
        {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64,
         "window_size": 112, "fullatt_block_indexes": [1]}
        if tiny
        else {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
              "out_hidden_size": 2048, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]}
    )  # fmt: skip
    vision.update(patch_size=14, spatial_merge_size=2, temporal_patch_size=2, hidden_act="silu")
    return transformers.Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True,
                                         **TOKEN_IDS)  # fmt: skip


def qwen2_config(tiny: bool) -> transformers.Qwen2VLConfig:
    """Qwen2-VL-2B-Instruct's configuration (DSE's backbone), or a toy one."""
    rope = {"rope_type": "default", "mrope_section": [16, 24, 24], "rope_theta": 1e6}
    text = qwen_text(tiny, {"vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
                            "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
                            "max_position_embeddings": 32768, "rope_parameters": rope})  # fmt: skip
    vision = (
        {"depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2}
        if tiny
        else {"depth": 32, "embed_dim": 1280, "hidden_size": 1536, "num_heads": 16, "mlp_ratio": 4}
    )
    vision.update(patch_size=14, spatial_merge_size=2, temporal_patch_size=2)
    return transformers.Qwen2VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True,
                                      **TOKEN_IDS)  # fmt: skip


def paligemma_config(tiny: bool, vocab: int) -> transformers.PaliGemmaConfig:
    """PaliGemma-3B at 448 px (google/paligemma-3b-mix-448's configuration), or a toy one."""
    side = 56 if tiny else 448
    if tiny:
        text = {**TINY_TEXT, "vocab_size": vocab + 1152, "num_key_value_heads": 1, "head_dim": 16}
        vision = {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
        }
    else:
        text = {"vocab_size": 257216, "hidden_size": 2048, "intermediate_size": 16384, "num_hidden_layers": 18,
                "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256}  # fmt: skip
        vision = {
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_hidden_layers": 27,
            "num_attention_heads": 16,
        }
    return transformers.PaliGemmaConfig(
        text_config={**text, "model_type": "gemma", "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2},
        vision_config={**vision, "image_size": side, "patch_size": 14, "projection_dim": text["hidden_size"]},
        image_token_id=PALIGEMMA_SPECIALS.index("<image>"),
        projection_dim=text["hidden_size"],
        hidden_size=text["hidden_size"],
    )


def qwen_processor(processor_class: type, pixels: tuple[int, int], vocab: int, template: str | None = None):
    """A Qwen processor with the checkpoint's pixel bounds, without its video processor."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    images = Qwen2VLImageProcessorPil(min_pixels=pixels[0], max_pixels=pixels[1], patch_size=14, merge_size=2)
    return image_only(processor_class)(image_processor=images, tokenizer=qwen_tokenizer(vocab),
                                       chat_template=template)  # fmt: skip


def made(model_class: type, config, device: str):
    """``model_class(config)`` made on ``device`` (bfloat16 there on CUDA, float32 elsewhere)."""
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            return model_class(config).eval()
    finally:
        torch.set_default_dtype(before)


def build(which: str, folder: Path, tiny: bool, device: str) -> dict:
    """Model ``which`` of ``MODELS`` saved to ``folder``: its parameters and the seconds it took."""
    start = time.perf_counter()
    vocab = 512 if tiny else 4000
    pages = (4 * 28 * 28, 16 * 28 * 28) if tiny else (4 * 28 * 28, 768 * 28 * 28)
    if which == "colqwen2.5":
        engine = import_colpali()
        model = made(engine.ColQwen2_5, qwen25_config(tiny), device)
        processor = qwen_processor(engine.ColQwen2_5_Processor, pages, vocab)
    elif which == "dse":
        pixels = pages if tiny else (3136, 2560 * 28 * 28)  # DSE's card: up to 2,560 tokens a page
        model = made(transformers.Qwen2VLForConditionalGeneration, qwen2_config(tiny), device)
        processor = qwen_processor(transformers.Qwen2VLProcessor, pixels, vocab, TEMPLATE)
    elif which == "reader":
        pixels = pages if tiny else (3136, 12845056)  # Qwen2.5-VL's own bounds
        model = made(transformers.Qwen2_5_VLForConditionalGeneration, qwen25_config(tiny), device)
        processor = qwen_processor(transformers.Qwen2_5_VLProcessor, pixels, vocab, TEMPLATE)
    elif which == "colpali":
        from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

        engine = import_colpali()
        side = 56 if tiny else 448
        words = tokenizer(PALIGEMMA_SPECIALS, vocab, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>",
                          unk_token="<unk>", padding_side="right")  # fmt: skip
        images = SiglipImageProcessorPil(
            size={"height": side, "width": side}, image_seq_length=(side // 14) ** 2
        )
        processor = engine.ColPaliProcessor(image_processor=images, tokenizer=words)
        model = made(engine.ColPali, paligemma_config(tiny, vocab), device)
    else:
        raise ValueError(f"unknown model {which}; choose from {', '.join(MODELS)}")
    parameters = sum(p.numel() for p in model.parameters())
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"parameters": parameters, "build_s": round(time.perf_counter() - start, 2)}


class _ImageOnly(transformers.PretrainedConfig):
    model_type = "pagesight_benchmark_image_only"


def register_image_only() -> None:
    """Without torchvision, ``AutoProcessor`` cannot build a Qwen processor's video half: let it
    find the reader's image-only processor class by the name it was saved under."""
    if importlib.util.find_spec("torchvision") is None:
        transformers.AutoProcessor.register(
            _ImageOnly, image_only(transformers.Qwen2_5_VLProcessor), exist_ok=True
        )
