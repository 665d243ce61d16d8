"""The boxes model readers cite and how their images are numbered: each scale (pixels, norm1000,
norm1) maps a known box back to the same page pixels, images and passages numbered from 0 or from
1, an endpoint's default scale, and the two options reaching the reader from the library, the
command line, the HTTP API, the MCP tools and eval (the model's replies come from a real local
server speaking the OpenAI chat API, scripted)."""

from __future__ import annotations

import json

import anyio
import pytest

from pagesight import Index
from pagesight.answer.base import ContextItem, Readers
from pagesight.answer.prompts import instructions, parse_bboxes, parse_lines
from pagesight.errors import PagesightError
from pagesight.records import Hit, Span
from pagesight.request import AskRequest
from tests.answer import test_openai_reader as chat
from tests.answer.test_openai_reader import Page, Reply, completion, reader_for, user_parts
from tests.conftest import ROOT, cli

serve = chat.serve  # the fixture starting a scripted chat server

TILE_BOX = (100.0, 400.0, 500.0, 700.0)  # a 400 x 300 tile; at compression 4 its image is 200 x 150
PAGE_BOX = (150.0, 460.0, 350.0, 610.0)  # the region cited, in pixels of the page
QUESTION = "By how much did revenue grow?"


def tile(tile_box=TILE_BOX, compression: float = 4.0) -> ContextItem:
    hit = Hit("report", 2, 1, 1.0, {}, "", [], (600, 800), tile_box)
    return ContextItem(hit=hit, spans=[Span("Revenue grew 12%", PAGE_BOX, "pdf")], compression=compression)


@pytest.mark.parametrize(
    "coordinates, box, seen",
    [
        ("pixels", [25, 30, 125, 105], None),  # pixels of the 200 x 150 image
        ("pixels", [50, 60, 250, 210], [(400, 300)]),  # of the image as the processor doubled it
        ("norm1000", [125, 200, 625, 700], None),
        ("norm1000", [125, 200, 625, 700], [(400, 300)]),  # a grid is the same on any size
        ("norm1", [0.125, 0.2, 0.625, 0.7], None),
    ],
)
@pytest.mark.parametrize("number_from", [0, 1])
def test_each_scale_maps_a_box_back_to_the_same_page_pixels(coordinates, box, seen, number_from):
    text = f'Revenue grew 12%. <bboxes image="{number_from}">{json.dumps([box])}</bboxes>'
    answer, cited, problems = parse_bboxes(text, [tile()], coordinates, seen, number_from)
    assert answer == "Revenue grew 12%." and problems == []
    assert list(cited) == [0] and len(cited[0]) == 1
    assert cited[0][0] == pytest.approx(PAGE_BOX)


def test_numbering_from_zero_maps_image_zero_to_the_first_item():
    first, second = tile(), tile((0.0, 0.0, 400.0, 300.0), compression=1.0)
    text = (
        '<bboxes image="0">[[0, 0, 500, 500]]</bboxes> <bboxes image="1">[[500, 500, 1000, 1000]]</bboxes>'
        ' <bboxes image="2">[[0, 0, 10, 10]]</bboxes>'
    )
    _, cited, problems = parse_bboxes(text, [first, second], "norm1000", number_from=0)
    assert cited == {0: [(100.0, 400.0, 300.0, 550.0)], 1: [(200.0, 150.0, 400.0, 300.0)]}
    assert problems == ["a tag for image 2, but images 0 to 1 were given"]
    _, cited, problems = parse_bboxes(text, [first, second], "norm1000")  # from 1: image 1 is the first
    assert cited == {0: [(300.0, 550.0, 500.0, 700.0)], 1: [(0.0, 0.0, 4.0, 3.0)]}
    assert problems == ["a tag for image 0, but images 1 to 2 were given"]
    answer, cited, quotes, problems = parse_lines('It grew. <lines passage="0">[1]</lines>', [first], 0)
    assert (answer, cited, quotes, problems) == ("It grew.", {0: [PAGE_BOX]}, {0: "Revenue grew 12%"}, [])


def test_the_instructions_say_the_scale_and_the_first_number():
    boxes = instructions("images", "norm1", number_from=0)
    assert "numbered from 0" in boxes and "from 0 to 1 (decimal fractions)" in boxes
    assert "numbered from 1" in instructions("images", "pixels") and "in pixels" in instructions(
        "images", "pixels"
    )
    assert "passages numbered from 0" in instructions("text", "norm1000", number_from=0)


def test_the_request_checks_the_options_and_gives_them_to_the_reader():
    request = AskRequest(QUESTION, reader="openai", coordinates="norm1", number_from=0)
    assert request.reader_options() == {"coordinates": "norm1", "number_from": 0}
    assert AskRequest(QUESTION).reader_options() == {}  # unset: the reader's (its model family's) own
    with pytest.raises(PagesightError, match="coordinates must be one of pixels, norm1000, norm1"):
        AskRequest(QUESTION, coordinates="percent")
    with pytest.raises(PagesightError, match="number_from must be from 0 to 1, got 2"):
        AskRequest(QUESTION, number_from=2)
    with pytest.raises(PagesightError, match="an agent numbers the tiles it reads from 1"):
        AskRequest(QUESTION, agent=True, number_from=0)
    with pytest.raises(PagesightError, match="reader 'extractive' takes none of coordinates"):
        Readers().get(AskRequest(QUESTION, coordinates="pixels"))


def test_an_endpoint_reads_on_the_grid_unless_told_and_numbers_as_asked(serve):
    server = serve(Reply(completion('It grew 12%. <bboxes image="0">[[0.25, 0.5, 0.75, 1.0]]</bboxes>')))
    assert reader_for(server).coordinates == "norm1000"
    reader = reader_for(server, coordinates="norm1", number_from=0)
    reading = reader.read(QUESTION, [Page("report", ["Revenue grew 12%"]).item()])
    assert reading.text == "It grew 12%." and reading.cited == {0: [(100.0, 150.0, 300.0, 300.0)]}
    (request,) = server.requests
    system = request["body"]["messages"][0]["content"]
    assert "numbered from 0" in system and "from 0 to 1" in system
    assert user_parts(request)[0]["text"] == "Image 0: report page 1 tile 0"
    with pytest.raises(PagesightError, match="number_from must be 0 or 1"):
        reader_for(server, number_from=2)


def sent_prompts(server) -> list[str]:
    return [request["body"]["messages"][0]["content"] for request in server.requests]


def top_half(hit: dict) -> list[float]:
    x0, y0, x1, y1 = hit["tile_box"]
    return [x0, y0, x1, y0 + (y1 - y0) / 2]


NORM1_FROM_0 = 'Halvorsen Glassworks. <bboxes image="0">[[0, 0, 1, 0.5]]</bboxes>'
ASKED = "Which supplier replaces Brightmere Supply?"


@pytest.mark.timeout(120)
def test_the_options_reach_the_reader_from_the_cli_http_and_mcp(lexical_samples, serve):
    from fastapi.testclient import TestClient
    from mcp import Client

    from pagesight.serve.app import create_app
    from pagesight.serve.mcp import build_server
    from pagesight.serve.offer import Offer

    server = serve(Reply(completion(NORM1_FROM_0)))
    chosen = {"coordinates": "norm1", "number_from": 0}
    shown = cli(
        "ask", ASKED, "--index", str(lexical_samples.root), "-k", "1", "--reader", "openai",
        "--base-url", server.base_url, "--model", "tiny-vl", "--coordinates", "norm1", "--number-from", "0",
        "--json",
    )  # fmt: skip
    answers = {"cli": json.loads(shown.stdout)}
    offer = Offer(readers=("openai",), models=("tiny-vl",), base_url=server.base_url)
    with TestClient(create_app(lexical_samples, readers=1, offer=offer)) as client:
        posted = client.post("/api/ask", json={"question": ASKED, "k": 1, "reader": "openai", **chosen})
    assert posted.status_code == 200, posted.text
    answers["http"] = posted.json()

    async def over_mcp(reader, arguments: dict):
        async with Client(build_server(lexical_samples, reader)) as client:
            return await client.call_tool("ask", {"question": ASKED, "k": 1, **arguments})

    named = Readers("openai", {"base_url": server.base_url, "model": "tiny-vl"})
    result = anyio.run(over_mcp, named, chosen)
    assert not result.is_error, result.content
    answers["mcp"] = result.structured_content
    for front, answer in answers.items():
        assert answer["text"] == "Halvorsen Glassworks.", front
        (citation,) = answer["citations"]
        first = lexical_samples.search(ASKED, k=1)[0].to_dict()
        assert citation["page_id"] == first["page_id"], front
        assert citation["boxes"][0] == pytest.approx(top_half(first), abs=1), front
    assert len(server.requests) == 3
    assert all("numbered from 0" in prompt and "from 0 to 1" in prompt for prompt in sent_prompts(server))
    built = anyio.run(over_mcp, reader_for(server), chosen)  # a reader given built keeps its own options
    assert built.is_error and "given built" in built.content[0].text


@pytest.mark.timeout(180)
def test_eval_asks_every_question_with_the_options(sample_index: Index, serve):
    server = serve(Reply(completion(NORM1_FROM_0)))
    shown = cli(
        "eval", str(ROOT / "samples"), "--index", str(sample_index.root), "-m", "lexical", "--reader", "openai",
        "--base-url", server.base_url, "--model", "tiny-vl", "--coordinates", "norm1", "--number-from", "0",
        "--answer-k", "1", "--json",
    )  # fmt: skip
    answers = json.loads(shown.stdout)["answers"]
    assert answers["n_answers"] == len(server.requests) > 0
    assert all("numbered from 0" in prompt and "from 0 to 1" in prompt for prompt in sent_prompts(server))
    assert answers["cites_relevant"] > 0  # the boxes cited on image 0 are citations of the first tile
    refused = cli("eval", str(ROOT / "samples"), "--index", str(sample_index.root), "--coordinates", "norm1",
                  check=False)  # fmt: skip
    assert refused.returncode == 2 and "need --answers" in refused.stderr
