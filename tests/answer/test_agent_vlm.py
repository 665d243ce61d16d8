"""Agentic search where torch is needed: the transformers reader on the tiny random-weight Qwen2-VL of
``test_vlm_reader`` (the transcript renders as a Qwen chat with the search tool, tool calls are read
from generated text, the loop ends within its bound whatever the model writes), and a search by a
region of the question's image on the tiny-CLIP index of ``test_visual_index``."""

from __future__ import annotations

import copy

import pytest
from PIL import Image

from pagesight.answer.agent import SEARCH_TOOL, Message, ToolCall

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from pagesight.answer.vlm import TransformersReader, tool_calls  # noqa: E402
from tests import test_visual_index as visual  # noqa: E402
from tests.answer import test_agent as agent  # noqa: E402
from tests.answer import test_vlm_reader as vlm  # noqa: E402

tiny, reader = vlm.tiny, vlm.reader  # the tiny model's fixtures
corpus, clip_folder, clip_index = visual.corpus, visual.clip_folder, visual.clip_index
serve = agent.serve

pytestmark = pytest.mark.timeout(120)

QUESTION = "What was the West region's revenue in Q3?"


def transcript() -> list[Message]:
    """A conversation after one search that found one tile."""
    call = '<tool_call>\n{"name": "search", "arguments": {"query": "West revenue"}}\n</tool_call>'
    return [
        Message("system", ["Answer from the pages."]),
        Message("user", [f"Question: {QUESTION}"]),
        Message("assistant", [call], calls=tool_calls(call)),
        Message("tool", ["1 tiles found (1 not read before):\nImage 1: report page 1 tile 0: West 4,870"]),
        Message(
            "user", ["Image 1: report page 1 tile 0 (120x90 pixels)", Image.new("RGB", (120, 90), "white")]
        ),
    ]


def test_tool_calls_are_read_from_generated_text():
    text = (
        'Let me look. <tool_call>\n{"name": "search", "arguments": {"query": "West revenue", "k": 2}}\n'
        '</tool_call><tool_call>{"name": "search", "arguments": {"image": 1, "region": [0, 0, 500, 500]}}'
    )  # the second is cut short by max_tokens, but whole
    assert tool_calls(text) == [
        ToolCall("call_1", "search", {"query": "West revenue", "k": 2}),
        ToolCall("call_2", "search", {"image": 1, "region": [0, 0, 500, 500]}),
    ]
    assert tool_calls("no calls here") == []
    garbage = tool_calls(
        '<tool_call>{"name": 3}</tool_call> <tool_call>search("x")</tool_call> <tool_call>{"na'
    )
    assert [call.name for call in garbage] == ["", "", ""]
    assert all(
        call.problem.startswith('a tool call must be {"name": ..., "arguments": {...}}') for call in garbage
    )


def test_the_transcript_renders_as_a_qwen_chat(reader):
    """Qwen2-VL's template renders no tools, so Qwen2.5's tool prompt goes into the system message."""
    messages, images = reader.agent_messages(transcript(), [SEARCH_TOOL])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "user"]
    system = messages[0]["content"]
    assert system.startswith("Answer from the pages.\n\n# Tools\n") and '"name": "search"' in system
    assert "<tool_call>\n{" in system
    assert messages[2]["content"].startswith("<tool_call>")
    assert messages[3]["content"] == (
        "<tool_response>\n1 tiles found (1 not read before):\nImage 1: report page 1 tile 0: West 4,870\n"
        "</tool_response>"
    )
    assert [part["type"] for part in messages[4]["content"]] == ["text", "image"] and len(images) == 1

    turn = reader.turn(transcript(), [SEARCH_TOOL], final=False)
    assert isinstance(turn.text, str) and turn.usage["completion_tokens"] <= reader.max_tokens
    assert turn.usage["prompt_tokens"] > 0 and turn.seen_sizes is not None and len(turn.seen_sizes) == 1


def test_a_template_that_renders_tools_gets_them(tiny):
    processor = copy.copy(tiny.processor)
    processor.chat_template = (
        "{% if tools %}<|im_start|>system\n<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}"
        "</tools><|im_end|>\n{% endif %}" + vlm.TEMPLATE
    )
    reader = TransformersReader.from_objects(tiny.model, processor, max_tokens=4)
    messages, _ = reader.agent_messages(transcript(), [SEARCH_TOOL])
    assert messages[0]["content"] == "Answer from the pages."  # the template shows the tools itself
    assert reader.turn(transcript(), [SEARCH_TOOL], final=True).usage["completion_tokens"] <= 4


def test_the_loop_ends_within_its_bound_on_garbage(reader, lexical_samples):
    answer = lexical_samples.ask(QUESTION, reader, agent=True, max_searches=2, compression=4)
    usage = answer.usage
    assert isinstance(answer.text, str)
    assert len(usage["searches"]) <= 2 and usage["turns"] <= 3
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] <= 3 * reader.max_tokens
    assert usage["tiles_read"] == len(answer.hits)


def test_a_region_of_the_question_image_is_searched_by_image_vectors(clip_index, serve):
    server = serve(agent.calls({"image": 0, "region": [0, 0, 500, 250], "k": 2}), agent.answer("Done."))
    question_image = clip_index.page_image("report", 2)
    answer = clip_index.ask(QUESTION, agent.reader_for(server), agent=True, image=question_image)
    width, height = question_image.size
    expected = clip_index.search_image(question_image, 2, region=(0, 0, width / 2, height / 4))
    (made,) = answer.usage["searches"]
    assert made["hits"] == [{"page_id": hit.page_id, "tile": hit.tile} for hit in expected]
    assert [hit.score for hit in answer.hits] == pytest.approx([hit.score for hit in expected])  # that region
    (tool,) = [m for m in agent.sent(server, 1) if m["role"] == "tool"]
    assert tool["content"].startswith("2 tiles found (2 not read before):")
