"""Visual encoders that run a model's own code (VisRAG-Ret, jina-embeddings-v4, Nemotron ColEmbed), on
tiny models whose code is saved beside their weights (``tests/remote_code``): refused in one line
naming the model and the flag without ``trust_remote_code``, loaded through transformers with it,
and their vectors those of the model's documented API; an index made with one needs the leave
again at every opening that encodes, and never stores it."""

from __future__ import annotations

import numpy as np
import pytest

from pagesight import Index
from pagesight.encode.visual import make_encoder
from pagesight.encode.visual.jina_v4 import JinaV4RemoteEncoder
from pagesight.encode.visual.visrag import QUERY_INSTRUCTION, VisRAGRetRemoteEncoder
from pagesight.errors import PagesightError
from pagesight.testing.encoder import assert_encoder_contract, assert_same
from tests.conftest import cli, make_pdf
from tests.remote_code import modeling_tiny_colembed, modeling_tiny_jina, modeling_tiny_visrag, save

from .conftest import qwen_tokenizer, unit

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def visrag(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-visrag")
    tokenizer = qwen_tokenizer()
    model = save(folder, modeling_tiny_visrag, tokenizer=tokenizer, vocab_size=len(tokenizer))
    return folder, model, tokenizer


@pytest.fixture(scope="module")
def jina(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-jina")
    return folder, save(folder, modeling_tiny_jina, seed=1)


@pytest.fixture(scope="module")
def colembed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-colembed")
    return folder, save(folder, modeling_tiny_colembed, seed=2)


def test_without_leave_each_is_refused_naming_the_model_and_the_flag(visrag, jina, colembed):
    for name, folder in (("visrag-ret", visrag[0]), ("jina-v4", jina[0]), ("nemotron-colembed", colembed[0])):
        with pytest.raises(
            PagesightError, match=f"'{name}': model '{folder}' runs code of its own"
        ) as refused:
            make_encoder(name, model=str(folder), device="cpu")
        assert "--trust-remote-code" in str(refused.value) and "\n" not in str(refused.value)
    # the published checkpoints are the defaults, refused before anything is fetched
    for name, model in (
        ("visrag-ret", "openbmb/VisRAG-Ret"),
        ("jina-v4", "jinaai/jina-embeddings-v4"),
        ("nemotron-colembed", "nvidia/llama-nemoretriever-colembed-3b-v1"),
    ):
        with pytest.raises(PagesightError, match=f"'{name}': model '{model}' runs code.*--trust-remote-code"):
            make_encoder(name, device="cpu")


def test_visrag_ret_pools_its_forward_pass(visrag, pages, queries):
    folder, model, tokenizer = visrag
    encoder = make_encoder(
        "visrag-ret", model=str(folder), device="cpu", batch_size=2, trust_remote_code=True
    )
    assert isinstance(encoder, VisRAGRetRemoteEncoder)
    assert (encoder.dim, encoder.multi_vector) == (32, False)
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    with torch.no_grad():  # a page: the image with empty text; a query: the instruction, no image
        hidden = model(text=[""], image=[pages[1]], tokenizer=tokenizer).last_hidden_state[0]
        n = len(hidden)
        weights = torch.arange(1, n + 1, dtype=torch.float32)[:, None]  # the i-th state weighs i
        assert np.allclose(page_vectors[1], unit((weights * hidden).sum(0)), atol=1e-5)
        assert not np.allclose(page_vectors[1], unit(hidden.mean(0)), atol=1e-3)
        text = QUERY_INSTRUCTION + queries[2]
        hidden = model(text=[text], image=[None], tokenizer=tokenizer).last_hidden_state[0]
        weights = torch.arange(1, len(hidden) + 1, dtype=torch.float32)[:, None]
        assert np.allclose(query_vectors[2], unit((weights * hidden).sum(0)), atol=1e-5)
    assert encoder.spec()["model"] == str(folder)


def test_jina_v4_calls_encode_image_and_encode_text(jina, pages, queries):
    folder, model = jina
    encoder = make_encoder("jina-v4", model=str(folder), device="cpu", batch_size=2, trust_remote_code=True)
    assert isinstance(encoder, JinaV4RemoteEncoder) and encoder.dim == 32
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    with torch.no_grad():
        assert_same(page_vectors, [v.numpy() for v in model.encode_image(pages, task="retrieval")])
        expected = model.encode_text(queries, task="retrieval", prompt_name="query")
        assert_same(query_vectors, [v.numpy() for v in expected])
        passages = model.encode_text(queries, task="retrieval", prompt_name="passage")
        assert not np.allclose(query_vectors[0], passages[0].numpy(), atol=1e-3)  # "Query: ", not "Passage: "
    truncated = make_encoder(
        "jina-v4", model=str(folder), device="cpu", truncate_dim=8, trust_remote_code=True
    )
    assert truncated.dim == 8 and truncated.spec()["options"] == {"truncate_dim": 8}
    assert np.allclose(truncated.encode_queries(queries[:1])[0], unit(expected[0][:8]), atol=1e-5)
    with pytest.raises(
        PagesightError,
        match=r"'jina-v4': model '.*' cannot encode a query with \{'truncate_dim': 5\}: Invalid truncate_dim",
    ):
        make_encoder("jina-v4", model=str(folder), device="cpu", truncate_dim=5, trust_remote_code=True)


def test_nemotron_colembed_keeps_each_inputs_real_tokens(colembed, pages, queries):
    folder, model = colembed
    encoder = make_encoder(
        "nemotron-colembed", model=str(folder), device="cpu", batch_size=3, trust_remote_code=True
    )
    assert (encoder.dim, encoder.multi_vector) == (32, True)
    page_vectors, query_vectors = assert_encoder_contract(encoder, pages, queries)
    prompt = len(b"passage: ")
    patches = [(width // 28) * (height // 28) for width, height in (page.size for page in pages)]
    assert [len(v) for v in page_vectors] == [prompt + n for n in patches]  # no padding row kept
    assert len({len(v) for v in page_vectors}) > 1  # the batch was padded, and the padding dropped
    with torch.no_grad():
        alone = model.forward_queries([queries[1]])[0]
    assert np.allclose(query_vectors[1], alone.numpy(), atol=1e-6)
    assert len(query_vectors[1]) == len(f"query: {queries[1]}".encode())


def test_an_index_made_with_one_asks_for_the_leave_at_every_opening(jina, tmp_path):
    folder, _ = jina
    pdf = make_pdf(tmp_path / "reservoir.pdf", [["The Brightmere reservoir holds 42 million cubic metres."]])
    made = tmp_path / "index"
    options = ("--encoder", "jina-v4", "--encoder-model", str(folder), "--no-dense")
    refused = cli("ingest", str(pdf), "--index", str(made), *options, check=False)
    assert refused.returncode == 2 and f"model '{folder}' runs code of its own" in refused.stderr
    assert "--trust-remote-code" in refused.stderr and not made.exists()  # no index left behind
    cli("ingest", str(pdf), "--index", str(made), *options, "--trust-remote-code")
    with Index.open(made, create=False) as index:
        assert "trust_remote_code" not in index.settings.to_dict() and index.trust_remote_code is False
        assert index.catalog.visual_spec()["name"] == "jina-v4"
        assert index.search("reservoir", mode="lexical")  # no model, no leave needed
    query = ("search", "reservoir water", "--index", str(made), "--mode", "visual", "--json")
    again = cli(*query, check=False)
    assert (
        again.returncode == 2
        and "runs code of its own" in again.stderr
        and "--trust-remote-code" in again.stderr
    )
    found = cli(*query, "--trust-remote-code")
    assert '"doc_id": "reservoir"' in found.stdout
    with Index.open(made, create=False, trust_remote_code=True) as index:
        (hit,) = index.search("reservoir water", mode="visual", k=1)
        assert hit.doc_id == "reservoir"


@pytest.mark.timeout(300)
def test_training_asks_for_the_leave_and_refuses_a_model_it_cannot_train(jina, tmp_path):
    """``train`` opens the index's visual encoder only with ``--trust-remote-code``; with it, a
    model run through its own inference API (no gradients) is refused in one line, not trained."""
    pytest.importorskip("peft")
    from tests.train.conftest import PAGES

    folder, _ = jina
    docs = tmp_path / "docs"
    docs.mkdir()
    for number, lines in enumerate(PAGES):
        make_pdf(docs / f"topic-{number}.pdf", [lines])
    made = tmp_path / "index"
    options = ("--encoder", "jina-v4", "--encoder-model", str(folder), "--no-dense", "--trust-remote-code")
    cli("ingest", str(docs), "--index", str(made), *options)
    train = ("train", "--index", str(made), "--out", str(tmp_path / "out"), "--visual", "--no-dense")
    train += ("--negatives-from", "lexical", "--max-steps", "1", "--batch-size", "2")
    refused = cli(*train, check=False)
    assert refused.returncode == 2 and "--trust-remote-code" in refused.stderr
    untrainable = cli(*train, "--trust-remote-code", check=False)
    assert untrainable.returncode == 2 and "computes no gradients" in untrainable.stderr
    assert "--trust-remote-code" not in untrainable.stderr
