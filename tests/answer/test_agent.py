"""Agentic search in `ask` through the openai reader, against a real local HTTP server speaking the
OpenAI chat API whose replies script the model's turns (tool calls, then an answer); the HTTP, the
tool-call parsing, the searches on a real index and the citations are pagesight's own."""

from __future__ import annotations

import base64
import io
import json

import pytest
from PIL import Image

from pagesight import Index
from pagesight.answer import make_reader
from pagesight.answer.context import image_tokens
from pagesight.errors import PagesightError
from tests.answer import test_openai_reader as chat
from tests.answer.test_openai_reader import MODEL, ChatServer, Reply, completion, reader_for
from tests.conftest import cli

serve = chat.serve  # the fixture starting a scripted chat server

QUESTION = "What was the West region's revenue in Q3?"


@pytest.fixture
def index(lexical_samples) -> Index:
    return lexical_samples


def calls(*arguments: dict | str, content: str | None = None, name: str = "search") -> Reply:
    """A reply calling the tool once per ``arguments`` (a string is sent as written)."""
    body = completion(content, finish_reason="tool_calls")
    body["choices"][0]["message"]["tool_calls"] = [
        {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": name, "arguments": a if isinstance(a, str) else json.dumps(a)},
        }
        for n, a in enumerate(arguments, 1)
    ]
    return Reply(body)


def answer(text: str) -> Reply:
    return Reply(completion(text))


def sent(server: ChatServer, n: int) -> list[dict]:
    """The messages of the ``n``-th request the server received."""
    return server.requests[n]["body"]["messages"]


def images_of(message: dict) -> list[Image.Image]:
    images = []
    for part in message["content"]:
        if part["type"] == "image_url":
            header, data = part["image_url"]["url"].split(",", 1)
            assert header == "data:image/png;base64"
            images.append(Image.open(io.BytesIO(base64.b64decode(data))))
    return images


@pytest.mark.timeout(60)
def test_the_model_searches_by_text_then_by_a_region_and_cites_a_tile(index, serve):
    server = serve(
        calls({"query": "West region revenue", "k": 2}),
        calls({"image": 1, "region": [0, 0, 1000, 300]}),
        answer('West: 4,870 thousand euros. <bboxes image="1">[[100, 250, 900, 300]]</bboxes>'),
    )
    result = index.ask(QUESTION, reader_for(server), agent=True, compression=2)

    assert len(server.requests) == 3
    first = server.requests[0]["body"]
    assert [tool["function"]["name"] for tool in first["tools"]] == ["search"]
    assert first["tool_choice"] == "auto"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "search" in first["messages"][0]["content"] and QUESTION in first["messages"][1]["content"]

    # the first search's result: hits by page id, then the tiles as images
    messages = sent(server, 1)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assistant, tool, shown = messages[2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "search" and assistant["content"] is None
    assert tool["tool_call_id"] == "call_1"
    assert "Image 1: quarterly-report page 1 tile 0" in tool["content"]
    assert "Image 2: retrieval-primer page 2 tile 0" in tool["content"]
    first_tiles = images_of(shown)
    expected = [index.tile_image("quarterly-report", 1, 0, 2), index.tile_image("retrieval-primer", 2, 0, 2)]
    assert [image.size for image in first_tiles] == [image.size for image in expected]
    assert first_tiles[0].convert("RGB").tobytes() == expected[0].convert("RGB").tobytes()
    labels = [part["text"] for part in shown["content"] if part["type"] == "text"]
    assert (
        labels[0]
        == f"Image 1: quarterly-report page 1 tile 0 ({expected[0].width}x{expected[0].height} pixels)"
    )

    # the top of image 1 (the revenue table's title and head) searched by its text finds its own tile
    tools = [m for m in sent(server, 2) if m["role"] == "tool"]
    assert len(tools) == 2 and "Image 1: quarterly-report page 1 tile 0" in tools[1]["content"]

    usage = result.usage
    made = usage["searches"]
    assert [s.get("query") for s in made] == ["West region revenue", None]
    assert made[1]["image"] == 1 and made[1]["region"] == [0, 0, 1000, 300]
    assert made[0]["hits"] == [
        {"page_id": "quarterly-report_1", "tile": 0},
        {"page_id": "retrieval-primer_2", "tile": 0},
    ]
    assert usage["tiles_read"] == len(result.hits) >= 2 and usage["turns"] == 3
    assert usage["image_tokens"] == sum(
        image_tokens(*index.tile_image(h.doc_id, h.page, h.tile, 2).size) for h in result.hits
    )
    assert usage["prompt_tokens"] == 3 * 812  # as each of the server's replies reports

    assert result.text == "West: 4,870 thousand euros."
    (citation,) = result.citations
    assert (citation.page_id, citation.tile) == ("quarterly-report_1", 0)
    x0, y0, x1, y1 = result.hits[0].tile_box
    width, height = x1 - x0, y1 - y0
    (box,) = citation.boxes
    assert box == pytest.approx(
        (x0 + 0.1 * width, y0 + 0.25 * height, x0 + 0.9 * width, y0 + 0.3 * height), abs=2
    )


@pytest.mark.timeout(60)
def test_the_bound_cuts_off_a_model_that_keeps_searching(index, serve):
    """Two calls a turn and a bound of three: the fourth call is refused, the next turn is forced to
    answer (tool_choice none), and a call made there anyway is ignored."""
    server = serve(
        calls(
            {"query": "revenue"},
            {"query": "BM25"},
            content='Still looking. <bboxes image="1">[[0, 0, 500, 500]]</bboxes>',
        )
    )
    result = index.ask(QUESTION, reader_for(server), agent=True, max_searches=3, k=1)

    assert len(server.requests) == 3  # two turns that searched, one forced answer
    assert [r["body"]["tool_choice"] for r in server.requests] == ["auto", "auto", "none"]
    last = sent(server, 2)
    tools = [m["content"] for m in last if m["role"] == "tool"]
    assert len(tools) == 4 and tools[3] == "Not searched: the 3 searches allowed are spent."
    assert last[-1] == {
        "role": "user",
        "content": "You have made the 3 searches allowed. Answer now from the tiles you have read, citing them.",
    }
    assert len(result.usage["searches"]) == 3 and result.usage["turns"] == 3
    assert result.text == "Still looking."
    assert [c.page_id for c in result.citations] == [result.hits[0].page_id]
    assert any("after its last search" in w for w in result.usage["warnings"])


@pytest.mark.timeout(60)
def test_malformed_calls_get_error_messages(index, serve):
    server = serve(
        calls("{not json"),
        calls({"query": 5}),
        calls({"image": 7}),
        calls({"image": 0}),
        calls({"query": "revenue", "color": "red"}),
        calls({"query": "revenue"}, name="browse"),
        calls({"image": 1, "region": [10, 10]}),
        calls({"query": "revenue", "doc_ids": ["retrieval-primer"]}),
        answer("It cannot be found in the given pages."),
    )
    allowed = ["quarterly-report", "scanned-memo"]
    result = index.ask(QUESTION, reader_for(server), agent=True, max_searches=8, doc_ids=allowed)

    last = sent(server, 8)
    errors = [m["content"] for m in last if m["role"] == "tool"]
    assert errors == [
        "Error: the arguments are not JSON: '{not json'",
        "Error: query must be a string",
        "Error: no image 7: you have read 0 tiles",
        "Error: there is no question image (image 0)",
        "Error: unknown arguments: color",
        "Error: there is no tool 'browse'; the one tool is search",
        "Error: region must be [x0, y0, x1, y1], got [10, 10]",
        "Error: the search is restricted to the documents quarterly-report, scanned-memo",
    ]
    assert all("error" in made for made in result.usage["searches"])
    assert (
        result.text == "It cannot be found in the given pages."
        and result.citations == []
        and result.hits == []
    )
    assert result.usage["image_tokens"] == 0


@pytest.mark.timeout(60)
def test_a_region_of_the_question_image_needs_image_vectors(index, serve):
    server = serve(calls({"image": 0, "region": [0, 0, 500, 500]}), answer("No idea."))
    question_image = index.page_image("quarterly-report", 1)
    result = index.ask(QUESTION, reader_for(server), agent=True, image=question_image)
    opening = sent(server, 0)[1]["content"]
    assert (
        opening[0]["text"]
        == f"Question image (image 0, {question_image.width}x{question_image.height} pixels):"
    )
    assert len(images_of(sent(server, 0)[1])) == 1
    (tool,) = [m for m in sent(server, 1) if m["role"] == "tool"]
    assert tool["content"].startswith("Error: this index has no image vectors")
    assert result.usage["image_tokens"] == image_tokens(question_image.width, question_image.height)


@pytest.mark.timeout(60)
def test_readers_that_cannot_call_tools_are_refused(index):
    with pytest.raises(PagesightError, match="cannot call tools"):
        index.ask(QUESTION, make_reader("extractive", dense=False), agent=True)
    # without the agent the question's image is searched by (this index has no visual run) and shown
    # to a reader that reads images; the extractive reader answers from the tiles and says what it did
    answered = index.ask(QUESTION, make_reader("extractive", dense=False), image=Image.new("RGB", (8, 8)))
    assert answered.hits and answered.usage["warnings"] == [
        "reader 'extractive' reads text: it did not look at the question image",
        "the tiles were searched by the question alone: the search has no visual run",
    ]
    result = cli("ask", QUESTION, "--index", str(index.root), "--agent", check=False)
    assert result.returncode == 2 and "cannot call tools" in result.stderr


@pytest.mark.timeout(60)
def test_the_command_line_reports_the_searches(index, serve):
    script = [
        calls({"query": "West region revenue"}),
        answer('4,870 <bboxes image="1">[[0, 0, 1000, 1000]]</bboxes>'),
    ]
    server = serve(*script, *script)  # two runs
    arguments = ["ask", QUESTION, "--index", str(index.root), "--reader", "openai", "--model", MODEL]
    arguments += ["--base-url", server.base_url, "--agent", "--max-searches", "1"]
    printed = cli(*arguments, "--json")
    data = json.loads(printed.stdout)
    assert data["text"] == "4,870" and data["citations"][0]["page_id"] == "quarterly-report_1"
    assert [s["query"] for s in data["usage"]["searches"]] == ["West region revenue"]
    assert server.requests[1]["body"]["tool_choice"] == "none"  # one search allowed, then answer
    shown = cli(*arguments)
    assert shown.stdout.startswith("4,870")
    assert 'search 1: {"query": "West region revenue"}:' in shown.stderr
