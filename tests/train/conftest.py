"""Tiny models and a small corpus for the training tests.

``tiny_bert`` is a two-layer, 32-wide BERT with random weights and the packaged MiniLM's tokenizer,
saved as a sentence-transformers model (mean pooling, normalised) and as a bare transformer (what a
cross-encoder starts from), so training runs in seconds. ``PAGES`` are prose pages of distinct
topics, each sentence a line or two, from which the offline query writer makes questions.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import make_pdf

torch = pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")

PAGES = [
    [
        "The Brightmere reservoir holds 42 million cubic metres of water after the",
        "spring floods. Engineers raised the northern dam by 3 metres in the last",
        "renovation, which cost the county council nearly 18 million euros.",
    ],
    [
        "Copper cathodes from the Valmont smelter reached a purity of 99.97 percent",
        "during the trial run. The furnace operators credited the new oxygen lances",
        "for the gain and for cutting slag volumes by a quarter.",
    ],
    [
        "The orchestra of Kirkwall performed the symphony with 64 musicians and a",
        "choir of forty singers. Critics praised the brass section for its warm",
        "tone and the conductor for unusually brisk tempos in the finale.",
    ],
    [
        "Glacier monitoring stations near Tromsby recorded a retreat of 27 metres",
        "over the summer season. Researchers attribute the loss mainly to warmer",
        "autumn rain rather than to higher midsummer temperatures.",
    ],
    [
        "The Lisieux cooperative harvested 310 tonnes of cider apples this year.",
        "Its members replanted older orchards with disease resistant rootstocks",
        "and sold most of the juice to distilleries across Normandy.",
    ],
    [
        "Railway engineers in Zadar replaced 12 kilometres of track with welded",
        "rails to reduce noise for residents. Night trains now run at reduced speed",
        "through the old town until the new signalling system is installed.",
    ],
]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    """A folder of six one-page PDFs, one topic each."""
    folder = tmp_path_factory.mktemp("train-corpus")
    for number, lines in enumerate(PAGES):
        make_pdf(folder / f"topic-{number}.pdf", [lines])
    return folder


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> dict[str, Path]:
    """{"transformer": a bare tiny BERT folder, "sentence": the same as a sentence-transformers model}."""
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel

    from pagesight.encode.dense import SentenceEncoder

    root = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,  # deterministic losses: gradient caching is compared with one pass
        attention_probs_dropout_prob=0.0,
    )
    transformer = root / "transformer"
    BertModel(config).save_pretrained(transformer)
    packaged = SentenceEncoder().model_dir
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(packaged / name, transformer / name)
    word = models.Transformer(str(transformer), max_seq_length=96)
    sentence = SentenceTransformer(
        modules=[word, models.Pooling(32, "mean"), models.Normalize()], device="cpu"
    )
    sentence.save(str(root / "sentence"))
    return {"transformer": transformer, "sentence": root / "sentence"}
