"""One request model under every front-end: the bundled samples' questions give the same hits,
in the same order with the same scores, through the library, the command line, the HTTP API, the
MCP tools and eval, with the defaults and with options set, and the options each front-end offers
are the request's fields."""

from __future__ import annotations

import dataclasses
import json

import anyio
import pytest

from pagesight.eval.dataset import Dataset
from pagesight.eval.harness import Config, evaluate
from pagesight.request import AskRequest, SearchRequest, label, spec
from tests.conftest import SAMPLES, cli

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402
from mcp import Client  # noqa: E402

from pagesight.serve.app import create_app  # noqa: E402
from pagesight.serve.mcp import build_server  # noqa: E402

K = 4
# An eval configuration's name, and the same options as request fields.
VARIANTS = {
    "hybrid": {},
    "rsf:0.6/doc:0": {"alpha": 0.6, "document_weight": 0.0},
    "rrf/alpha:0.3/nprobe:4": {"fusion": "rrf", "alpha": 0.3, "nprobe": 4},  # weighted RRF
}


def ranked(hits: list[dict]) -> list[tuple[str, int, float]]:
    return [(hit["page_id"], hit["tile"], round(hit["score"], 5)) for hit in hits]


@pytest.mark.timeout(300)
def test_the_samples_give_the_same_hits_through_every_front_end(sample_index):
    dataset = Dataset.load(SAMPLES.parent)
    queries = dict(list(dataset.queries.items())[:6])
    app = TestClient(create_app(sample_index, readers=1))
    server = build_server(sample_index)
    seen = []
    for name, options in VARIANTS.items():
        expected = {
            qid: ranked([hit.to_dict() for hit in sample_index.search(SearchRequest(text, k=K, **options))])
            for qid, text in queries.items()
        }
        assert all(expected.values())
        seen.append(expected)
        flags = [f"--{key.replace('_', '-')}={value}" for key, value in options.items()]
        for qid, text in list(queries.items())[:2]:  # a process each: two are enough to show the flags
            shown = cli("search", text, "--index", str(sample_index.root), "-k", str(K), *flags, "--json")
            assert ranked(json.loads(shown.stdout)) == expected[qid], (name, "cli", text)
        for qid, text in queries.items():
            answered = app.get("/api/search", params={"q": text, "k": K, **options})
            assert answered.status_code == 200, answered.text
            assert ranked(answered.json()["hits"]) == expected[qid], (name, "http", text)

        async def over_mcp(given: dict):
            async with Client(server) as client:
                found = {}
                for qid, text in queries.items():
                    result = await client.call_tool("search", {"query": text, "k": K, **given})
                    assert not result.is_error, result.content
                    found[qid] = ranked(result.structured_content["hits"])
                return found

        assert anyio.run(over_mcp, options) == expected, (name, "mcp")
        only = Dataset(dataset.root, dataset.documents, queries, {qid: dataset.qrels[qid] for qid in queries})
        (result,) = evaluate(sample_index, only, [Config.parse(name)], depth=K)
        for qid, pages in result.run.items():
            in_order = list(dict.fromkeys(page for page, _, _ in expected[qid]))
            assert [page for page, _ in pages] == in_order, (name, "eval", queries[qid])
    # the options change the hits, so each front-end was shown to pass them on
    assert seen[0] != seen[1] and seen[2] not in seen[:2]


@pytest.mark.timeout(120)
def test_every_front_end_offers_the_request_fields(sample_index):
    """A field added to a request reaches the CLI's options, the HTTP API's parameters and the MCP
    tools' parameters with nothing else to change: each is derived from the fields."""
    schema = TestClient(create_app(sample_index, readers=1)).get("/openapi.json").json()
    http_search = {p["name"] for p in schema["paths"]["/api/search"]["get"]["parameters"]}
    ask_body = schema["paths"]["/api/ask"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    http_ask = set(schema["components"]["schemas"][ask_body["$ref"].rsplit("/", 1)[1]]["properties"])

    async def tool_parameters():
        async with Client(build_server(sample_index)) as client:
            return {
                tool.name: set(tool.input_schema["properties"]) for tool in (await client.list_tools()).tools
            }

    tools = anyio.run(tool_parameters)
    search_help = cli("search", "--help").stdout
    ask_help = cli("ask", "--help").stdout
    for kind, http, tool, shown in (
        (SearchRequest, http_search, tools["search"], search_help),
        (AskRequest, http_ask, tools["ask"], ask_help),
    ):
        for f in dataclasses.fields(kind):
            rules = spec(f)
            if f.name != "query":
                flag = (rules.flags or (f"--{label(f).replace('_', '-')}",))[0]
                assert all(name in shown for name in flag.split("/")), f.name  # --on/--off: both
            if rules.served:
                assert (rules.http or label(f)) in http, (kind.__name__, f.name)
                if f.name not in ("reader", "model", "max_tokens", "inputs"):  # the server's reader
                    assert label(f) in tool, (kind.__name__, f.name)
            else:
                assert label(f) not in http | tool, (kind.__name__, f.name)  # a server picks its models
