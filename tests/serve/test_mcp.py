"""`pagesight mcp`: the index's tools driven by the MCP SDK's own client, over stdio against a real
`python -m pagesight mcp` process, and over streamable HTTP mounted in a FastAPI app as
`pagesight serve` mounts it."""

from __future__ import annotations

import base64
import io
import json
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from PIL import Image

from pagesight import Index
from pagesight.render.tiles import scaled_size
from tests.conftest import SAMPLES

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402

from pagesight.serve.mcp import http_app  # noqa: E402

TOOLS = {"search", "ask", "get_page", "list_documents"}


@pytest.fixture
def index_dir(lexical_samples) -> Path:
    return lexical_samples.root


def over_stdio(index_dir: Path, session) -> object:
    """Run ``session(client)`` against `python -m pagesight mcp --index DIR`, a subprocess."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pagesight", "mcp", "--index", str(index_dir)],
        # the ONNX query encoder of this run, and the source it tests (a worktree's, when on PYTHONPATH)
        env={key: os.environ[key] for key in ("PAGESIGHT_CACHE", "PYTHONPATH") if key in os.environ},
    )

    async def main():
        async with Client(server, read_timeout_seconds=120) as client:
            return await session(client)

    return anyio.run(main)


def payload(result) -> dict:
    """The JSON of a tool result's first content block, checked equal to its structured content."""
    assert not result.is_error, result.content
    data = json.loads(result.content[0].text)
    assert data == result.structured_content
    return data


def picture(block) -> Image.Image:
    assert block.type == "image" and block.mime_type == "image/png"
    with Image.open(io.BytesIO(base64.b64decode(block.data))) as image:
        assert image.format == "PNG"
        return image.copy()


@pytest.mark.timeout(120)
def test_tools_are_listed_and_search_returns_hits_with_images(index_dir):
    async def session(client):
        listed = await client.list_tools()
        plain = await client.call_tool("search", {"query": "West region revenue", "k": 3})
        shown = await client.call_tool("search", {"query": "West region revenue", "k": 2, "images": True})
        only = await client.call_tool("search", {"query": "revenue", "doc_ids": ["retrieval-primer"]})
        return listed, plain, shown, only

    listed, plain, shown, only = over_stdio(index_dir, session)
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == TOOLS
    assert {"query", "k", "doc_ids", "images", "compression"} <= set(
        tools["search"].input_schema["properties"]
    )
    assert "required" not in tools["search"].input_schema  # a query, an image or both

    hits = payload(plain)["hits"]
    assert len(hits) == 2 and len(plain.content) == 1  # only two tiles have the words; no images unasked
    first = hits[0]
    assert (first["page_id"], first["doc_id"], first["page"], first["tile"]) == (
        "quarterly-report_1",
        "quarterly-report",
        1,
        0,
    )
    assert "West" in first["snippet"] and first["boxes"] and len(first["boxes"][0]) == 4
    assert hits == sorted(hits, key=lambda hit: -hit["score"])

    hits = payload(shown)["hits"]
    assert [block.type for block in shown.content] == ["text", "text", "image", "text", "image"]
    with Index.open(index_dir, create=False) as index:
        for hit, label, image in zip(hits, shown.content[1::2], shown.content[2::2]):
            assert label.text == f"Hit {hits.index(hit) + 1}: {hit['page_id']} tile {hit['tile']}"
            x0, y0, x1, y1 = hit["tile_box"]
            assert picture(image).size == scaled_size(round(x1 - x0), round(y1 - y0), 4.0)  # default c=4
            expected = index.tile_image(hit["doc_id"], hit["page"], hit["tile"], 4.0)
            assert picture(image).tobytes() == expected.convert("RGB").tobytes()
    assert {hit["doc_id"] for hit in payload(only)["hits"]} == {"retrieval-primer"}


@pytest.mark.timeout(120)
def test_get_page_and_list_documents(index_dir):
    async def session(client):
        documents = await client.call_tool("list_documents", {})
        page = await client.call_tool("get_page", {"doc_id": "quarterly-report", "page": 2})
        tile = await client.call_tool(
            "get_page", {"doc_id": "long-infographic", "page": 1, "tile": 1, "compression": 4}
        )
        return documents, page, tile

    documents, page, tile = over_stdio(index_dir, session)
    listed = payload(documents)["documents"]
    assert [d["id"] for d in listed] == sorted(path.stem for path in SAMPLES.iterdir())
    assert {d["id"]: d["pages"] for d in listed}["retrieval-primer"] == 3
    with Index.open(index_dir, create=False) as index:
        full = index.page_image("quarterly-report", 2)
        small = index.tile_image("long-infographic", 1, 1, 4)
    note, image = page.content
    assert note.text == f"quarterly-report page 2: {full.width}x{full.height} pixels (compression 1)"
    assert picture(image).tobytes() == full.convert("RGB").tobytes()
    note, image = tile.content
    assert note.text.startswith("long-infographic page 1 tile 1:")
    assert picture(image).size == small.size and picture(image).tobytes() == small.convert("RGB").tobytes()


@pytest.mark.timeout(180)
def test_errors_are_tool_errors_and_ask_cites_boxes(index_dir, questions):
    (asked,) = [q for q in questions if q["doc_id"] == "quarterly-report" and "West" in q["question"]][:1]

    async def session(client):
        missing = await client.call_tool("get_page", {"doc_id": "no-such-doc", "page": 1})
        beyond = await client.call_tool("get_page", {"doc_id": "quarterly-report", "page": 99})
        bad_k = await client.call_tool("search", {"query": "revenue", "k": 0})
        unknown = await client.call_tool("delete", {"doc_id": "quarterly-report"})
        answer = await client.call_tool("ask", {"question": asked["question"], "k": 3})
        declined = await client.call_tool("ask", {"question": "What did Quorlan Industries earn?", "k": 3})
        still = await client.call_tool("list_documents", {})  # the server lives on
        return missing, beyond, bad_k, unknown, answer, declined, still

    missing, beyond, bad_k, unknown, answer, declined, still = over_stdio(index_dir, session)
    for result, words in (
        (missing, "no document 'no-such-doc'"),
        (beyond, "page 99 out of range"),
        (bad_k, "k"),
        (unknown, "delete"),
    ):
        assert result.is_error and words in result.content[0].text, result.content
    data = payload(answer)
    assert asked["answer"] in data["text"]
    (citation,) = data["citations"]
    assert citation["page_id"] == f"{asked['doc_id']}_{asked['page']}" and citation["boxes"]
    assert data["reader"] == "extractive" and data["answered"] is True and data["reason"] is None
    refused = payload(declined)  # issue 40: not answered, with the reason
    assert refused["answered"] is False and "Quorlan" in refused["reason"] and refused["text"] == ""
    assert len(payload(still)["documents"]) == 5


@pytest.mark.timeout(120)
def test_streamable_http_mounted_in_a_fastapi_app(lexical_samples):
    """The mount `pagesight serve` uses: the app at /mcp, its lifespan entered from the host's."""
    fastapi = pytest.importorskip("fastapi")
    from tests.serve.live import LiveServer

    tools = http_app(lexical_samples)

    @asynccontextmanager
    async def lifespan(app):
        async with tools.router.lifespan_context(tools):
            yield

    app = fastapi.FastAPI(lifespan=lifespan)
    app.mount("/mcp", tools)
    live = LiveServer(app)

    async def main():
        async with Client(f"{live.url}/mcp", read_timeout_seconds=60) as client:
            listed = await client.list_tools()
            found = await client.call_tool("search", {"query": "BM25 length normalisation", "k": 1})
            return listed, found

    try:
        listed, found = anyio.run(main)
    finally:
        live.stop()
    assert {tool.name for tool in listed.tools} == TOOLS
    assert payload(found)["hits"][0]["doc_id"] == "retrieval-primer"


@pytest.mark.timeout(120)
def test_the_readers_the_tools_keep_are_bounded(tmp_path):
    """Issue 60: the ask tool kept a reader for each distinct min_support, without a bound."""
    import gc

    import anyio
    from mcp import Client

    from pagesight import Index
    from pagesight.answer.extractive import ExtractiveReader
    from pagesight.serve.mcp import build_server
    from pagesight.serve.offer import KEPT_READERS
    from tests.conftest import make_pdf

    pdf = make_pdf(tmp_path / "owls.pdf", [["zephyrine owls nest in basalt cliffs"]])
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add([pdf], jobs=1).ok

    gc.collect()
    before = {id(o) for o in gc.get_objects() if type(o) is ExtractiveReader}  # other tests' readers

    async def asked():
        async with Client(build_server(index), read_timeout_seconds=120) as client:
            for n in range(2 * KEPT_READERS):
                said = await client.call_tool(
                    "ask", {"question": "Where do owls nest?", "min_support": n / 100}
                )
                assert not said.is_error, said

    anyio.run(asked)
    gc.collect()
    assert sum(type(o) is ExtractiveReader and id(o) not in before for o in gc.get_objects()) <= KEPT_READERS
    index.close()
