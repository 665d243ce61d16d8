"""The model calls a server makes, attacked: every route, MCP tool, reranker, reader and the agent
calls the operator's offered endpoint with the operator's key and offered models, and an endpoint
named by the environment receives nothing; a tenant's slow answers hold no index, so another
tenant's searches answer at once, and a tenant's answers in progress are bounded."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.answer.endpoint import Endpoint
from pagesight.serve.offer import ASKS_PER_TENANT, Offer
from tests.answer.test_openai_reader import ChatServer, Reply, completion
from tests.conftest import make_pdf

pytest.importorskip("fastapi")
import httpx  # noqa: E402

from pagesight.serve.app import create_app  # noqa: E402
from pagesight.serve.mcp import http_app  # noqa: E402
from tests.serve.live import LiveServer, until  # noqa: E402
from tests.serve.test_attacks import as_, keys_file  # noqa: E402

OPERATOR = "operator-key-0123456789"
MODEL_KEY = "sk-the-operators-model-key"
ENV_KEY = "sk-a-key-in-the-environment"
TENANTS = {f"{name}-key-0123456789abcdef": name for name in ("red", "blue", "green")}


def judged(text: str = "Owls nest in basalt cliffs.") -> dict:
    """A completion that answers ``text`` and, as a first token's alternatives, judges yes."""
    body = completion(text, logprobs=[("Owls", -0.05)])
    body["choices"][0]["logprobs"]["content"][0]["top_logprobs"] = [
        {"token": "yes", "logprob": -0.1, "bytes": None},
        {"token": "no", "logprob": -2.5, "bytes": None},
    ]
    return body


@pytest.fixture
def owls(tmp_path: Path) -> Index:
    pdf = make_pdf(tmp_path / "owls.pdf", [["zephyrine owls nest in basalt cliffs"]])
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add([pdf], jobs=1).ok
    yield index
    index.close()


@pytest.mark.timeout(180)
def test_every_model_call_goes_to_the_offered_endpoint_and_no_other(owls, tmp_path, monkeypatch):
    offered, elsewhere = ChatServer([Reply(judged())]), ChatServer([Reply(judged())])
    for name in ("OPENAI_BASE_URL", "PAGESIGHT_OPENAI_BASE_URL"):
        monkeypatch.setenv(name, elsewhere.base_url)
    for name in ("OPENAI_API_KEY", "PAGESIGHT_OPENAI_API_KEY"):
        monkeypatch.setenv(name, ENV_KEY)
    monkeypatch.setenv("PAGESIGHT_OPENAI_MODEL", "a-model-in-the-environment")
    calls = []  # the double at the one place model calls pass
    create = Endpoint.create

    def recorded(self, body, timeout, max_retries):
        calls.append((self.base_url, body["model"]))
        return create(self, body, timeout, max_retries)

    monkeypatch.setattr(Endpoint, "create", recorded)
    offer = Offer(
        readers=("openai",), models=("m1", "m2"), base_url=offered.base_url, rerankers=("vlm-openai",),
        api_key=MODEL_KEY,
    )  # fmt: skip
    tools = http_app(Index.open(owls.root, create=False), offer=offer)
    live = LiveServer(create_app(owls, api_key=OPERATOR, readers=2, offer=offer, mcp_app=tools))
    question = {"question": "Where do owls nest?"}
    try:
        with httpx.Client(base_url=live.url, headers=as_(OPERATOR), timeout=60) as client:
            responses = [
                client.get(
                    "/api/search", params={"q": "owls", "rerank": "vlm-openai", "rerank_candidates": 1}
                ),
                client.post("/api/ask", json={**question, "reader": "openai"}),
                client.post("/api/ask", json={**question, "reader": "openai", "model": "m2", "stream": True}),
                client.post("/api/ask", json={**question, "reader": "openai", "agent": True}),
                client.post("/api/ask", json={**question, "reader": "openai", "inputs": "auto"}),
                client.post("/api/ask", json={**question, "rerank": "vlm-openai", "rerank_candidates": 1}),
            ]
            for response in responses:
                assert response.status_code == 200, response.text
                assert '"event": "error"' not in response.text
        through_mcp = _mcp_calls(live.url)
        assert not any(result.is_error for result in through_mcp), through_mcp
    finally:
        live.stop()
        offered.close()
        elsewhere.close()
    assert elsewhere.requests == []  # the environment's endpoint heard nothing, its key went nowhere
    assert len(offered.requests) >= 7 and len(calls) == len(offered.requests)
    assert {base for base, _ in calls} == {offered.base_url}
    assert {sent["headers"]["authorization"] for sent in offered.requests} == {f"Bearer {MODEL_KEY}"}
    assert {sent["body"]["model"] for sent in offered.requests} == {"m1", "m2"}


@pytest.mark.timeout(180)
def test_a_slow_reranked_search_holds_no_tool_of_the_mcp_server(owls):
    delay = 8.0
    slow = ChatServer([Reply(judged(), delay=delay)])
    offer = Offer(readers=("openai",), models=("m1",), base_url=slow.base_url, rerankers=("vlm-openai",))
    live = LiveServer(create_app(owls, api_key=OPERATOR, offer=offer, mcp_app=http_app(owls, offer=offer)))
    rerank = {"rerank": "vlm-openai", "rerank_candidates": 1}
    waiting: list = []
    reranked = threading.Thread(target=lambda: waiting.extend(_mcp_calls(live.url, [("search", rerank)])))
    try:
        reranked.start()
        until(lambda: len(slow.requests) == 1, 30, "the reranked search waiting on the model")
        start = time.perf_counter()
        plain = _mcp_calls(live.url, [("search", {}), ("list_documents", {})])
        took = time.perf_counter() - start
        assert reranked.is_alive() and took < delay / 2, took  # answered while the model judged
        assert not any(result.is_error for result in plain), plain
        reranked.join(timeout=60)
        assert len(waiting) == 1 and not waiting[0].is_error, waiting
        assert waiting[0].structured_content["hits"][0]["scores"]["rerank"] > 0.5
    finally:
        slow.close()
        live.stop()


def _mcp_calls(url: str, calls: list[tuple[str, dict]] | None = None, key: str = OPERATOR) -> list:
    """Tool calls through /mcp with ``key`` (a tool's name and arguments besides a query about
    owls): by default a search and an ask, each reranked by the offered model."""
    httpx2 = pytest.importorskip("httpx2")
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    rerank = {"rerank": "vlm-openai", "rerank_candidates": 1}
    calls = calls or [("search", rerank), ("ask", rerank)]
    query = {"search": {"query": "owls"}, "ask": {"question": "Where do owls nest?"}}

    async def session():
        async with (
            httpx2.AsyncClient(headers=as_(key), timeout=60) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http), read_timeout_seconds=60) as client,
        ):
            return [await client.call_tool(name, {**query.get(name, {}), **more}) for name, more in calls]

    return anyio.run(session)


@pytest.mark.timeout(180)
def test_slow_answers_hold_no_index_and_a_tenants_answers_are_bounded(owls, tmp_path):
    delay = 8.0
    slow = ChatServer([Reply(judged(), delay=delay)])
    keys = keys_file(tmp_path, {key: {"name": name, "where": "type = pdf"} for key, name in TENANTS.items()})
    red, blue, green = list(TENANTS)
    offer = Offer(readers=("openai",), models=("m1",), base_url=slow.base_url, rerankers=("vlm-openai",))
    app = create_app(
        owls, api_key=OPERATOR, keys=keys, readers=2, offer=offer
    )  # each slow one would hold one
    live = LiveServer(app)
    owls_ask = {"question": "Where do owls nest?", "reader": "openai"}
    answers: list[httpx.Response] = []

    def ask(key: str) -> None:
        answers.append(httpx.post(f"{live.url}/api/ask", json=owls_ask, headers=as_(key), timeout=60))

    def reranked(key: str) -> None:  # its model judges the tile while the search waits
        params = {"q": "owls", "rerank": "vlm-openai"}
        answers.append(httpx.get(f"{live.url}/api/search", params=params, headers=as_(key), timeout=60))

    waiting = [threading.Thread(target=ask, args=(red,)) for _ in range(2)]
    waiting += [threading.Thread(target=reranked, args=(blue,)) for _ in range(2)]
    try:
        for thread in waiting:
            thread.start()
        until(lambda: len(slow.requests) == 4, 30, "four answers waiting on the model")
        with httpx.Client(base_url=live.url, headers=as_(red), timeout=60) as client:
            third = client.post("/api/ask", json=owls_ask)  # red's two answers are in progress
            assert third.status_code == 429 and third.headers["retry-after"] == "1", third.text
            assert f"{ASKS_PER_TENANT} answers of this key" in third.json()["error"]
        times = []
        with httpx.Client(base_url=live.url, headers=as_(green), timeout=60) as client:
            for _ in range(20):
                start = time.perf_counter()
                searched = client.get("/api/search", params={"q": "owls"})
                times.append(time.perf_counter() - start)
                assert searched.status_code == 200
        assert sorted(times)[18] < 1.0 and max(times) < 2.0, times  # while the four answers wait
        assert all(thread.is_alive() for thread in waiting)  # they did wait all that time
        for thread in waiting:
            thread.join(timeout=60)
        assert [answer.status_code for answer in answers] == [200] * 4
        bodies = [answer.json() for answer in answers]
        assert sum(body.get("answered", False) for body in bodies) == 2
        searched = [body for body in bodies if "answered" not in body]
        assert len(searched) == 2 and all(body["hits"][0]["scores"]["rerank"] > 0.5 for body in searched)
        assert app.state.served.asks.running() == 0  # each answer gave its slot back
    finally:
        slow.close()
        live.stop()
