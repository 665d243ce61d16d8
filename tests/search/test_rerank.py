"""Rerankers over a real index: the registry, reordering of the first-stage hits with their
scores kept, a cross-encoder from a folder, a visual encoder's reranking, jina-reranker-m0 through
its own code, the VLM yes/no judge through the transformers reader (a tiny Qwen2-VL) and an
OpenAI-compatible server, and the command line's --rerank."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pagesight import Index
from pagesight.answer.reranking import JUDGE_PROMPT, VlmReranker, yes_probability
from pagesight.errors import PagesightError
from pagesight.search.rerank import (
    RERANKERS,
    Candidate,
    make_reranker,
    register,
    reorder,
)
from pagesight.settings import Settings
from tests.answer import test_vlm_reader
from tests.answer.test_openai_reader import ChatServer, Reply, completion
from tests.conftest import cli, make_pdf

tiny = test_vlm_reader.tiny  # the tiny Qwen2-VL reader's fixture

PAGES = [
    ["The Brightmere reservoir holds 42 million cubic metres of water."],
    ["Copper cathodes from the Valmont smelter reached a purity of 99.97 percent."],
    ["The Kirkwall orchestra performed the symphony with 64 musicians."],
    ["Glacier stations near Tromsby recorded a retreat of 27 metres of ice."],
]


class ByLength:
    """A reranker preferring shorter tiles: a deterministic order unlike BM25's."""

    name = "by-length"
    batch_size = 8

    def __init__(self, **options):
        self.last: dict = {}
        self.options = options

    def score(self, query, candidates):
        self.last = {"reranker": self.name, "candidates": len(candidates), "batch_size": 8, "ms": 0.1}
        return [-float(len(c.text)) for c in candidates]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rerank")
    for n, lines in enumerate(PAGES):
        make_pdf(folder / f"doc-{n}.pdf", [lines])
    opened = Index.open(folder / "index", settings=Settings(dense_model=None))
    opened.add(folder, jobs=1)
    yield opened
    opened.close()


@pytest.mark.timeout(10)
def test_reorder_sorts_the_head_and_keeps_the_tail_below():
    run = [(1, 9.0), (2, 8.0), (3, 7.0), (4, 6.0)]
    ranked, head = reorder(run, [0.1, 0.9])
    assert head == [(2, 0.9), (1, 0.1)]
    assert [t for t, _ in ranked] == [2, 1, 3, 4] and ranked[2][1] < 0.1 and ranked[3][1] < ranked[2][1]


@pytest.mark.timeout(10)
def test_unknown_rerankers_and_missing_models_are_refused():
    with pytest.raises(PagesightError, match="unknown reranker 'nope'.*cross-encoder"):
        make_reranker("nope")
    with pytest.raises(PagesightError, match="needs a model"):
        make_reranker("cross-encoder")
    with pytest.raises(PagesightError, match="no such folder"):
        make_reranker("cross-encoder", model="./missing-folder")


@pytest.mark.timeout(30)
def test_search_reranks_the_candidates_and_hits_carry_the_rerank_score(index):
    register("by-length", "tests.search.test_rerank:ByLength")
    try:
        plain = index.search("metres water purity musicians ice", k=4, mode="lexical")
        reranked = index.search(
            "metres water purity musicians ice", k=4, mode="lexical", rerank="by-length", rerank_candidates=3
        )
    finally:
        del RERANKERS["by-length"]
    head = [h.page_id for h in plain[:3]]
    assert {h.page_id for h in reranked[:3]} == set(head)  # only the candidates move
    for hit in reranked[:3]:
        text = "\n".join(span[0] for span in index.catalog.tile_at(hit.doc_id, hit.page, hit.tile).spans)
        assert hit.scores["rerank"] == -len(text)
    assert reranked[3].page_id == plain[3].page_id and "rerank" not in reranked[3].scores
    assert all("rerank" in h.scores and "bm25" in h.scores for h in reranked[:3])
    scores = [h.scores["rerank"] for h in reranked[:3]]
    assert scores == sorted(scores, reverse=True) and reranked[0].score == scores[0]
    assert index.reranker("by-length").last["candidates"] == 3


@pytest.mark.timeout(60)
def test_a_cross_encoder_from_a_folder_reranks_through_the_index(index, tmp_path):
    torch = pytest.importorskip("torch")
    from sentence_transformers.cross_encoder import CrossEncoder
    from transformers import BertConfig, BertForSequenceClassification

    from pagesight.encode.dense import SentenceEncoder

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(tmp_path / "ce")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (tmp_path / "ce" / name).write_bytes((SentenceEncoder().model_dir / name).read_bytes())
    hits = index.search(
        "metres water",
        k=2,
        mode="lexical",
        rerank="cross-encoder",
        rerank_model=str(tmp_path / "ce"),
    )
    model = CrossEncoder(str(tmp_path / "ce"))
    rows = {h.page_id: h for h in hits}
    expected = model.predict([("metres water", " ".join(PAGES[int(h.doc_id[-1])])) for h in hits])
    np.testing.assert_allclose([rows[h.page_id].scores["rerank"] for h in hits], expected, atol=1e-5)
    last = index.reranker("cross-encoder", model=str(tmp_path / "ce")).last
    assert last["reranker"] == "cross-encoder" and last["candidates"] == len(hits) == 2


@pytest.mark.timeout(120)
def test_a_visual_encoder_reranks_tile_images(index, tmp_path):
    pytest.importorskip("torch")
    from tests.encode.visual.conftest import build_clip

    build_clip(tmp_path / "clip")
    reranker = make_reranker("clip", model=str(tmp_path / "clip"), device="cpu")
    hits = index.search("water reservoir", k=3, mode="lexical", rerank=reranker, rerank_candidates=3)
    encoder = reranker.encoder
    query = encoder.encode_queries(["water reservoir"])[0]
    for hit in hits:
        image = index.tile_image(hit.doc_id, hit.page, hit.tile)
        assert hit.scores["rerank"] == pytest.approx(
            float(np.dot(query, encoder.encode_images([image])[0])), abs=1e-5
        )
    assert reranker.last["candidates"] == len(hits)


@pytest.mark.timeout(60)
def test_jina_reranker_m0_scores_tile_images_through_its_own_code(index, tmp_path):
    """jina-reranker-m0 (a tiny one, its code saved beside it) is refused without the index's leave
    to run a model's own code, and with it scores each (query, tile image) by its compute_score."""
    pytest.importorskip("torch")
    from tests.remote_code import modeling_tiny_m0, save

    folder = tmp_path / "tiny-m0"
    model = save(folder, modeling_tiny_m0)
    query = ("metres water", "--index", str(index.root), "--mode", "lexical", "--rerank", "jina-m0")
    refused = cli("search", *query, "--rerank-model", str(folder), check=False)
    assert refused.returncode == 2
    assert f"reranker 'jina-m0': model '{folder}' runs code of its own" in refused.stderr
    assert "--trust-remote-code" in refused.stderr
    with pytest.raises(PagesightError, match="'jinaai/jina-reranker-m0' runs code.*--trust-remote-code"):
        make_reranker("jina-m0")  # the published model, refused before anything is fetched
    with Index.open(index.root, create=False, device="cpu", trust_remote_code=True) as trusted:
        hits = trusted.search("metres water", k=3, mode="lexical", rerank="jina-m0", rerank_model=str(folder))
        for hit in hits:
            image = trusted.tile_image(hit.doc_id, hit.page, hit.tile)
            assert hit.scores["rerank"] == pytest.approx(model.score_pair("metres water", image), abs=1e-6)
        assert trusted.reranker("jina-m0", str(folder)).last["candidates"] == len(hits) == 2
    reranked = cli("search", *query, "--rerank-model", str(folder), "--trust-remote-code")
    assert "reranked 2 candidates with jina-m0" in reranked.stderr


@pytest.mark.timeout(10)
def test_yes_probability_from_first_token_logprobs():
    assert yes_probability(
        {" Yes": math.log(0.6), "no": math.log(0.2), "Maybe": math.log(0.2)}
    ) == pytest.approx(0.75)
    assert yes_probability({"perhaps": -0.1}) == 0.0


@pytest.mark.timeout(30)
def test_the_vlm_judge_through_an_openai_compatible_server(index):
    def judged(yes: float) -> dict:
        body = completion("Yes")
        body["choices"][0]["logprobs"] = {
            "content": [
                {
                    "token": "Yes",
                    "logprob": math.log(yes),
                    "bytes": None,
                    "top_logprobs": [
                        {"token": "Yes", "logprob": math.log(yes), "bytes": None},
                        {"token": "No", "logprob": math.log(1 - yes), "bytes": None},
                    ],
                }
            ],
            "refusal": None,
        }
        return body

    server = ChatServer([Reply(judged(0.2)), Reply(judged(0.9))])
    try:
        reranker = make_reranker("vlm-openai", model="m", base_url=server.base_url, max_retries=0)
        hits = index.search(
            "water reservoir metres", k=2, mode="lexical", rerank=reranker, rerank_candidates=2
        )
    finally:
        server.close()
    assert [round(h.scores["rerank"], 6) for h in hits] == [0.9, 0.2]
    body = server.requests[0]["body"]
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 10
    parts = body["messages"][0]["content"]
    assert parts[0]["type"] == "image_url" and "water reservoir metres" in parts[1]["text"]


@pytest.mark.timeout(120)
def test_the_vlm_judge_through_a_transformers_reader(index, tiny):
    """A tiny random Qwen2-VL judges each tile: its score is P(yes) / (P(yes) + P(no)) of the first
    token, as the reader's own forward pass gives it."""
    from pagesight.answer.vlm import TransformersReader

    reader = TransformersReader.from_objects(tiny.model, tiny.processor, source="tiny")
    reranker = VlmReranker(reader)
    hits = index.search("metres water", k=2, mode="lexical", rerank=reranker, rerank_candidates=2)
    assert len(hits) == 2
    for hit in hits:
        image = index.tile_image(hit.doc_id, hit.page, hit.tile)
        logprobs = reader.first_token_logprobs(JUDGE_PROMPT.format(query="metres water"), [image])
        assert 0 < len(logprobs) <= 10 and all(v <= 0 for v in logprobs.values())
        assert hit.scores["rerank"] == pytest.approx(yes_probability(logprobs))
    assert reranker.last["candidates"] == 2


@pytest.mark.timeout(60)
def test_the_command_line_reranks_and_reports_it(index):
    register("by-length", "tests.search.test_rerank:ByLength")
    try:
        found = cli(
            "search",
            "water metres",
            "--index",
            str(index.root),
            "--mode",
            "lexical",
            "--rerank",
            "by-length",
            "--json",
        )
        refused = cli("search", "water", "--index", str(index.root), "--rerank-model", "x", check=False)
    finally:
        del RERANKERS["by-length"]
    assert "reranked" in found.stderr and "by-length (batch 8)" in found.stderr
    assert refused.returncode == 2 and "rerank_model needs rerank" in refused.stderr


@pytest.mark.timeout(10)
def test_candidates_render_their_image_on_demand():
    calls = []
    candidate = Candidate(1, "d", 1, 0, "text", lambda: calls.append(1) or "image")
    assert calls == [] and candidate.image == "image" and calls == [1]
    with pytest.raises(PagesightError, match="no image"):
        _ = Candidate(1, "d", 1, 0, "text").image
