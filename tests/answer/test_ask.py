"""`Index.ask` and `pagesight ask`: context, compression, token accounting, strategies, output."""

import inspect
import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.answer import ContextItem, Reading, make_reader
from pagesight.answer.base import Searchable
from pagesight.answer.context import build_context, context_tokens, image_tokens
from pagesight.answer.prompts import parse_bboxes
from pagesight.answer.strategies import Concatenated, choose, run
from pagesight.encode.visual.processors import qwen_resize
from pagesight.errors import PagesightError
from pagesight.render.tiles import downscale
from tests.conftest import ROOT, cli


def test_compression_divides_each_side_by_sqrt_c(sample_index: Index):
    full = sample_index.tile_image("long-infographic", 1, 1)
    for c in (2, 4):
        small = sample_index.tile_image("long-infographic", 1, 1, compression=c)
        assert small.size == (round(full.width / math.sqrt(c)), round(full.height / math.sqrt(c)))
    assert downscale(full, 1) is full
    with pytest.raises(ValueError):
        downscale(full, 0.5)


def test_token_accounting_follows_qwen_and_falls_with_compression(sample_index: Index):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    for height, width in [(1100, 850), (1024, 875), (20, 30), (4000, 3000), (300, 1200)]:
        assert qwen_resize(height, width) == smart_resize(height, width)
    # OpenAI's documented examples for high-detail images
    assert image_tokens(1024, 1024, "openai-high") == 765
    assert image_tokens(2048, 4096, "openai-high") == 1105
    hits = sample_index.search("Warehouse Delta orders", k=3)
    tokens = {c: context_tokens(build_context(sample_index, hits, c)) for c in (1, 2, 4)}
    assert tokens[1] > tokens[2] > tokens[4] > 0
    assert 1.6 < tokens[1] / tokens[2] < 2.4
    # the accounting matches the size of the images really made
    for item in build_context(sample_index, hits, 2):
        assert item.image.size == item.image_size()


def test_parse_bboxes_maps_model_boxes_to_page_pixels(sample_index: Index):
    hits = sample_index.search("Warehouse Delta orders", k=2)
    context = build_context(sample_index, hits, compression=4)  # images at half size
    tile = hits[1].tile_box
    width, height = context[1].image_size()
    text = 'Delta ships 1,200 orders. <bboxes image="2">[[0, 0, 500, 1000], [10, 10, 5, 5]]</bboxes>'
    answer, cited, problems = parse_bboxes(text, context, "norm1000")
    assert answer == "Delta ships 1,200 orders."
    (box,) = cited[1]
    assert box[0] == pytest.approx(tile[0]) and box[1] == pytest.approx(tile[1])
    assert box[2] == pytest.approx(tile[0] + width * 0.5 * 2, abs=1)
    assert box[3] == pytest.approx(tile[1] + height * 2, abs=1)
    assert len(problems) == 1 and "inverted" in problems[0]
    answer, cited, problems = parse_bboxes(
        'x <bboxes image="3">[[1,2,3,4]]</bboxes> <bboxes image=1>nope</bboxes>', context
    )
    assert answer == "x" and cited == {} and len(problems) == 2


class FirstLineReader:
    """A one-image reader for testing the strategies: answers with the first line it is shown and
    is more sure of shorter answers; cites the top-left quarter of its image."""

    name = "first-line"
    inputs = "images"
    max_images = 1

    def __init__(self):
        self.calls: list[list[ContextItem]] = []

    def read(self, question: str, context: Sequence[ContextItem]) -> Reading:
        self.calls.append(list(context))
        (item,) = context
        width, height = item.image_size()
        text = item.spans[0].text if item.spans else ""
        box = item.to_page((0, 0, width / 2, height / 2))
        return Reading(text, {0: [box]}, logprob=-0.1 * len(text), tokens=max(1, len(text.split())))


def test_concatenation_reads_once_and_maps_boxes_back(sample_index: Index):
    hits = sample_index.search("revenue region quarter", k=3)
    context = build_context(sample_index, hits, compression=4)
    reader = FirstLineReader()
    assert choose("auto", reader, len(context)) == "concat"
    reading, shown = run("concat", reader, "q", context)
    (merged,) = shown
    assert isinstance(merged, Concatenated) and len(reader.calls) == 1
    assert merged.image.size == merged.image_size()
    assert merged.image.width == sum(item.image_size()[0] for item in context)
    # the box drawn on the long image (its top-left quarter) lands in the tile under its centre
    width, _ = merged.image_size()
    centre = width / 4
    expected = max(i for i, left in enumerate(merged.offsets) if left <= centre)
    assert list(reading.cited) == [expected]


def test_weighted_selection_weighs_answers_by_retrieval(sample_index: Index):
    hits = sample_index.search("revenue region quarter", k=3)
    context = build_context(sample_index, hits)
    reader = FirstLineReader()
    reading, _ = run("weighted", reader, "q", context)
    assert len(reader.calls) == 3
    scores = [h.score for h in hits]
    prior = [math.exp(s - max(scores)) for s in scores]
    texts = [item.spans[0].text for item in context]
    # VisRAG: the softmax of the retrieval scores times 1 / perplexity (exp of the mean log-probability)
    weights = [
        p / sum(prior) * math.exp(-0.1 * len(text) / max(1, len(text.split())))
        for text, p in zip(texts, prior)
    ]
    best = max(range(3), key=weights.__getitem__)
    assert reading.text == context[best].spans[0].text and list(reading.cited) == [best]
    assert reading.usage["weight"] == pytest.approx(weights[best])


def test_weighted_selection_needs_log_probabilities(sample_index: Index):
    with pytest.raises(PagesightError, match="log-probabilities"):
        sample_index.ask("revenue", make_reader("extractive"), k=2, strategy="weighted")


def test_ask_reports_hits_citations_timings_and_usage(sample_index: Index):
    answer = sample_index.ask("Which supplier replaces Brightmere Supply?", k=4, compression=2)
    assert "Halvorsen Glassworks" in answer.text
    data = answer.to_dict()
    assert data["citations"][0]["page_id"] == "scanned-memo_1"
    assert len(data["hits"]) == 4 and data["reader"] == "extractive"
    assert data["usage"]["image_tokens"] == 0  # a text reader spends no image tokens
    assert set(data["timings"]) == {"search", "context", "read", "total"}
    assert json.loads(answer.to_json())["text"] == answer.text


def test_unknown_reader_and_bad_compression(sample_index: Index):
    with pytest.raises(PagesightError, match="unknown reader 'nope'"):
        sample_index.ask("x", "nope")
    with pytest.raises(PagesightError, match="compression"):
        sample_index.ask("revenue", k=2, compression=0.5)


def test_cli_ask_json_and_html(tmp_path: Path, sample_index: Index):
    index = str(sample_index.root)
    out = cli("ask", "How many orders a day does Warehouse Delta ship?", "--index", index, "--json")
    answer = json.loads(out.stdout)
    assert "1,200" in answer["text"]
    assert answer["citations"][0]["page_id"] == "long-infographic_1"
    page = tmp_path / "answer.html"
    text = cli("ask", "Which lens blank lot was quarantined?", "--index", index, "--html", str(page))
    assert "22K" in text.stdout
    html = page.read_text()
    assert html.count("data:image/png;base64,") == 1 and "field-notes-scan_1" in html
    bad = cli("ask", "x", "--index", index, "--model", "m", check=False)
    assert bad.returncode == 2 and "reader 'extractive' takes none of model" in bad.stderr


def test_cli_ask_with_an_openai_endpoint(sample_index: Index):
    from tests.answer.test_openai_reader import ChatServer, Reply, completion

    server = ChatServer(
        [Reply(completion('Halvorsen Glassworks. <bboxes image="1">[[0, 0, 1000, 500]]</bboxes>'))]
    )
    try:
        out = cli(
            "ask", "Which supplier replaces Brightmere Supply?", "--index", str(sample_index.root), "-k", "2",
            "--reader", "openai", "--base-url", server.base_url, "--model", "tiny-vl", "-c", "4", "--json",
        )  # fmt: skip
    finally:
        server.close()
    answer = json.loads(out.stdout)
    assert answer["text"] == "Halvorsen Glassworks." and answer["reader"] == "openai"
    (request,) = server.requests
    images = [p for p in request["body"]["messages"][1]["content"] if p["type"] == "image_url"]
    assert len(images) == 2 and request["body"]["model"] == "tiny-vl"
    first = answer["hits"][0]
    citation = answer["citations"][0]
    assert citation["page_id"] == first["page_id"]
    x0, y0, x1, y1 = first["tile_box"]
    assert citation["boxes"][0] == pytest.approx([x0, y0, x1, y0 + (y1 - y0) / 2], abs=2)
    assert answer["usage"]["image_tokens"] > 0 and answer["usage"]["compression"] == 4


def test_eval_judges_each_answer_once_at_temperature_zero(tmp_path: Path, sample_index: Index):
    from tests.answer.test_openai_reader import ChatServer, Reply, completion

    server = ChatServer([Reply(completion("NO")), Reply(completion("YES"))])
    try:
        out = cli(
            "eval", str(ROOT / "samples"), "--index", str(sample_index.root), "-m", "lexical", "--reader", "extractive",
            "--judge-model", "judge", "--judge-base-url", server.base_url, "--json",
        )  # fmt: skip
    finally:
        server.close()
    answers = json.loads(out.stdout)["answers"]
    # a greedy verdict is the same every time: one is asked for each answer (a declined one is
    # not judged: lexical search leaves one sample's line at support 0.767, under the threshold)
    answered = answers["n_answers"] - answers["n_declined"]
    assert answered >= 12 and len(server.requests) == answered
    assert all(r["body"]["temperature"] == 0 for r in server.requests)
    # the binary judge by default: the first answer NO, every later one YES
    assert answers["judge"] == pytest.approx((answered - 1) / answers["n_answers"])
    assert answers["grades"]["NO"] == 1 + answers["n_declined"]  # a declined answer is graded NO unasked


@pytest.mark.timeout(60)
def test_an_index_is_what_answering_needs_of_one():
    """``Index`` has every member of ``Searchable`` (what ask, the agent and the context read), each
    method taking the protocol's parameters, so answering runs on any object that has them."""
    for name in ("store", "catalog", "settings"):
        assert name in Searchable.__annotations__ or isinstance(getattr(Searchable, name, None), property)
    assert isinstance(Index.catalog, property) and isinstance(Index.settings, property)
    for name in ("search", "search_image", "tile_image"):
        wanted = inspect.signature(getattr(Searchable, name)).parameters
        held = inspect.signature(getattr(Index, name)).parameters
        assert [p for p in wanted if p != "options" and p not in held] == [], name
