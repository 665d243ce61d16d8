"""Contrastive training end to end on tiny random-weight models and on the packaged MiniLM: the
loss falls, gradient caching computes the same loss, saved models and adapters load where the
index and the rerankers look for them, and they change the vectors."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from pagesight.encode.dense import SentenceEncoder
from pagesight.search.rerank import PASSAGE_FILE, Candidate, make_reranker
from pagesight.train.contrastive import (
    Example,
    Options,
    _batches,
    candidate_metrics,
    lora_targets,
    rank_metrics,
    train_cross_encoder,
    train_dense,
    train_visual,
)

from .conftest import PAGES

torch = pytest.importorskip("torch")

QUERIES = [
    "How much water does the reservoir hold?",
    "What purity did the copper cathodes reach?",
    "How many musicians played the symphony?",
    "How far did the glacier retreat?",
    "How many tonnes of apples were harvested?",
    "How much track did the railway replace?",
]
PASSAGES = [" ".join(lines) for lines in PAGES]
DISTRACTORS = [
    f"The {place} town council published its budget, staff numbers and meeting dates for the year."
    for place in ("Brenner", "Siena", "Tarbes", "Aalborg", "Calderon", "Ostrava")
]
EXAMPLES = [Example(q, PASSAGES[n], [DISTRACTORS[n]]) for n, q in enumerate(QUERIES)]


def falls(losses: list[float]) -> bool:
    return sum(losses[-3:]) / 3 < 0.7 * sum(losses[:3]) / 3


def infonce(model_dir, examples: list[Example]) -> float:
    """The InfoNCE loss of the sentence-transformers model in ``model_dir`` on ``examples``, in eval
    mode (no dropout): the training objective, measured without its noise."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from pagesight.train.contrastive import load_sentence_model

    model = load_sentence_model(model_dir).eval()
    columns = [
        [e.query for e in examples],
        [e.positive for e in examples],
        [e.negatives[0] for e in examples],
    ]
    with torch.no_grad():
        return float(MultipleNegativesRankingLoss(model)([model.preprocess(c) for c in columns], None))


@pytest.mark.timeout(60)
def test_the_dense_loss_falls_on_a_tiny_model_and_the_model_is_saved(tiny_bert, tmp_path):
    options = Options(batch_size=6, epochs=100, max_steps=15, learning_rate=2e-3, warmup=0.0)
    report = train_dense(tiny_bert["sentence"], EXAMPLES, tmp_path, options)
    assert report.steps == 15 and len(report.losses) == 15
    assert falls(report.losses), report.losses
    assert (tmp_path / "dense" / "model.safetensors").is_file()
    assert report.to_dict()["loss_last_steps"] < report.to_dict()["loss_first_steps"]


@pytest.mark.timeout(60)
def test_gradient_caching_gives_the_loss_of_the_whole_batch(tiny_bert, tmp_path):
    """CachedMultipleNegativesRankingLoss over mini-batches of 2 is InfoNCE over all 6 at once."""
    # float32 on every machine: bfloat16, where the CPU has it, rounds the two sums apart.
    exact = {"batch_size": 6, "max_steps": 1, "bf16": False}
    whole = train_dense(tiny_bert["sentence"], EXAMPLES, tmp_path / "a", Options(**exact))
    cached = train_dense(tiny_bert["sentence"], EXAMPLES, tmp_path / "b", Options(**exact, cache_batch=2))
    assert cached.losses[0] == pytest.approx(whole.losses[0], rel=1e-4)


@pytest.mark.timeout(120)
def test_minilm_trained_with_lora_loads_as_adapter_and_as_merged_model(tmp_path):
    """The real packaged MiniLM: a few LoRA steps, then the dense retriever's loader takes the
    adapter folder (merged on load) and the merged folder alike, and both move the vectors."""
    short = [Example(e.query, e.positive[:200], [n[:200] for n in e.negatives]) for e in EXAMPLES]
    options = Options(batch_size=6, epochs=10, max_steps=4, learning_rate=1e-3, lora=True, lora_rank=4)
    train_dense(SentenceEncoder().model_dir, short, tmp_path, options)
    assert (tmp_path / "dense-adapter" / "adapter_config.json").is_file()
    texts = ["How much water does the reservoir hold?", "copper purity"]
    base = SentenceEncoder().encode(texts)
    adapted = SentenceEncoder(trained=tmp_path / "dense-adapter")
    merged = SentenceEncoder(trained=tmp_path / "dense")
    assert adapted.adapter is not None and merged.adapter is None
    np.testing.assert_allclose(adapted.encode(texts), merged.encode(texts), atol=1e-5)
    assert np.abs(adapted.encode(texts) - base).max() > 1e-3
    # the ONNX query export is cached per model: a trained model never reuses the packaged one's
    assert len({SentenceEncoder()._export_path(), adapted._export_path(), merged._export_path()}) == 3
    assert infonce(tmp_path / "dense", short) < infonce(SentenceEncoder().model_dir, short)


@pytest.mark.timeout(120)
def test_full_fine_tuning_of_minilm_lowers_its_loss(tmp_path):
    short = [Example(e.query, e.positive[:160], [n[:160] for n in e.negatives]) for e in EXAMPLES]
    options = Options(batch_size=6, epochs=10, max_steps=5, learning_rate=1e-4, warmup=0.0)
    report = train_dense(SentenceEncoder().model_dir, short, tmp_path, options)
    assert infonce(tmp_path / "dense", short) < 0.8 * infonce(SentenceEncoder().model_dir, short)
    assert report.peak_rss_mb > 0 and report.steps_per_second > 0


@pytest.mark.timeout(120)
def test_a_cross_encoder_from_minilm_learns_and_reranks_with_its_passage_size(tmp_path):
    """From the packaged MiniLM's weights (a new relevance head), as pagesight train does."""
    short = [Example(e.query, e.positive[:120], [n[:120] for n in e.negatives]) for e in EXAMPLES]
    options = Options(batch_size=6, epochs=100, max_steps=6, learning_rate=3e-4, warmup=0.0)
    report = train_cross_encoder(SentenceEncoder().model_dir, short, tmp_path, options, passage=(40, 8))
    assert falls(report.losses), report.losses
    folder = tmp_path / "cross-encoder"
    assert json.loads((folder / PASSAGE_FILE).read_text()) == {"passage_words": 40, "passage_overlap": 8}
    reranker = make_reranker("cross-encoder", model=str(folder), batch_size=4)
    assert reranker.passage == (40, 8)
    candidates = [Candidate(n, f"topic-{n}", 1, 0, text) for n, text in enumerate(PASSAGES)]
    scores = reranker.score(QUERIES[1], candidates)
    assert len(scores) == 6 and int(np.argmax(scores)) == 1
    assert reranker.last["candidates"] == 6 and reranker.last["batch_size"] == 4 and reranker.last["ms"] > 0


@pytest.mark.timeout(30)
def test_no_batch_holds_a_false_in_batch_negative():
    """Two queries of one tile, or one query's positive as another's hard negative, never share a batch."""
    examples = [
        Example("a", "", [], tile_id=1, negative_ids=[2]),
        Example("a again", "", [], tile_id=1, negative_ids=[3]),
        Example("b", "", [], tile_id=2, negative_ids=[4]),
        Example("c", "", [], tile_id=5, negative_ids=[6]),
    ]
    sizes = []
    for batch in _batches(examples, Options(batch_size=4, epochs=5)):
        positives = [e.tile_id for e in batch]
        assert len(set(positives)) == len(positives)
        assert not {i for e in batch for i in e.negative_ids} & set(positives)
        sizes.append(len(batch))
    assert len(sizes) == 5 and min(sizes) >= 1 and max(sizes) == 3  # {a again, b, c} is the largest


@pytest.mark.timeout(30)
def test_held_out_metrics():
    vectors = {"q0": [1, 0], "q1": [0, 1], "p0": [0.9, 0.1], "p1": [0.8, 0.2], "n": [0.95, 0.05]}
    examples = [Example("q0", "p0", ["n"]), Example("q1", "p1", ["n"])]

    def encode(texts):
        return np.array([vectors[t] for t in texts], dtype=np.float32)

    pool = rank_metrics(encode, encode, examples)
    assert pool == {"pool": 3, "queries": 2, "recall@1": 0.5, "recall@5": 1.0, "mrr": 0.75}
    own = candidate_metrics(lambda q, passages: (encode([q]) @ encode(passages).T)[0], examples)
    assert own == {"candidates": 2, "queries": 2, "recall@1": 0.5, "mrr": 0.75}


@pytest.mark.timeout(180)
def test_a_visual_lora_adapter_learns_loads_and_changes_the_vectors(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from pagesight.encode.visual import make_encoder
    from tests.encode.visual.conftest import PAGE_LINES, PAGE_SIZES, build_qwen, render_page

    build_qwen(
        tmp_path / "dse",
        "qwen2-vl",
        transformers.Qwen2VLForConditionalGeneration,
        transformers.Qwen2VLProcessor,
    )
    pages = [render_page(size, lines, n) for n, (size, lines) in enumerate(zip(PAGE_SIZES, PAGE_LINES))]
    encoder = make_encoder("dse", model=str(tmp_path / "dse"), device="cpu", batch_size=3)
    assert all("visual" not in name for name in lora_targets(encoder.model, vision=False))
    assert any("visual" in name for name in lora_targets(encoder.model, vision=True))
    before = encoder.encode_queries(["revenue growth"])[0]
    examples = [
        Example("revenue growth in 2023", "", [], 0, [1]),
        Example("how many staff", "", [], 1, [2]),
        Example("appendix table", "", [], 2, [0]),
    ]
    options = Options(batch_size=3, epochs=100, max_steps=11, learning_rate=5e-3, lora=True, warmup=0.0)
    report = train_visual(encoder, examples, lambda i: pages[i], tmp_path, options)
    assert falls(report.losses), report.losses
    adapted = make_encoder(
        "dse", model=str(tmp_path / "dse"), device="cpu", adapter=str(tmp_path / "visual-adapter")
    )
    assert np.abs(adapted.encode_queries(["revenue growth"])[0] - before).max() > 1e-3
    assert adapted.spec()["adapter"] == str((tmp_path / "visual-adapter").resolve())

    # Gradient checkpointing recomputes the same activations: the same losses step for step, and
    # the layers really ran again in backward (a module inside a layer runs twice: transformers
    # checkpoints the layer's forward).
    checkpointed = make_encoder("dse", model=str(tmp_path / "dse"), device="cpu", batch_size=3)
    inner = next(
        m
        for name, m in checkpointed.model.named_modules()
        if name.endswith("layers.0.input_layernorm") and "visual" not in name
    )
    calls = []
    inner.register_forward_hook(lambda *args: calls.append(1))
    again = train_visual(
        checkpointed,
        examples,
        lambda i: pages[i],
        tmp_path / "checkpointed",
        replace(options, gradient_checkpointing=True),
    )
    assert again.losses == pytest.approx(report.losses, rel=1e-4)
    assert len(calls) == 2 * 2 * 11  # forward and recompute, of queries and pages, every step
    assert not checkpointed.model.is_activation_checkpointing
