"""Tenants (``serve --keys``): a key sees and writes only its documents. Every way a client could
reach another tenant's document is tried: its id, its pages and tiles, a search for its words, an
ask, its jobs, an upload under its file name, the MCP tools; each gets 404, 403 or nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.errors import PagesightError
from pagesight.serve.tenants import load_keys
from tests.conftest import cli, make_pdf

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from pagesight.serve.app import create_app  # noqa: E402

OPERATOR = "operator-key-0123456789"
RED = "red-key-0123456789abcdef"
BLUE = "blue-key-0123456789abcdef"
SECRET = "zephyrine owls nest in basalt cliffs"


@pytest.fixture
def served(tmp_path: Path):
    red = make_pdf(tmp_path / "red.pdf", [[SECRET], ["the red team's second page"]])
    blue = make_pdf(tmp_path / "blue.pdf", [["glacier moraine survey of the blue team"]])
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add([red], jobs=1, meta={"tenant": "red"}).ok
    assert index.add([blue], jobs=1, meta={"tenant": "blue"}).ok
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({RED: {"name": "red"}, BLUE: {"name": "blue", "write": True}}))
    app = create_app(index, api_key=OPERATOR, keys=load_keys(keys), readers=1)
    with TestClient(app) as client:
        yield client, index
    index.close()


def as_(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.timeout(120)
def test_another_tenants_document_cannot_be_reached_any_way(served):
    client, index = served
    blue = as_(BLUE)
    assert [d["id"] for d in client.get("/api/documents", headers=blue).json()["documents"]] == ["blue"]
    for path in ("/api/documents/red", "/api/page?doc=red&page=1", "/api/tile?doc=red&page=1&tile=0"):
        answer = client.get(path, headers=blue)
        assert answer.status_code == 404 and "basalt" not in answer.text, path
    found = client.get("/api/search", params={"q": SECRET, "k": 10}, headers=blue).json()["hits"]
    assert all(hit["doc_id"] == "blue" for hit in found)
    assert client.get("/api/search", params={"q": "owls", "doc": "red"}, headers=blue).status_code == 404
    narrowed = client.get("/api/search", params={"q": SECRET, "where": "tenant = red"}, headers=blue)
    assert narrowed.json()["hits"] == []  # a caller's filter narrows, never widens
    for stream in (False, True):
        asked = client.post(
            "/api/ask", json={"question": "Where do zephyrine owls nest?", "stream": stream}, headers=blue
        )
        assert asked.status_code == 200 and "basalt" not in asked.text and "red_" not in asked.text
    assert client.get("/api/status", headers=blue).json()["index"] == {"documents": 1, "pages": 1}
    assert client.delete("/api/documents/red", headers=blue).status_code == 404
    assert client.get("/api/documents/red", headers=as_(OPERATOR)).status_code == 200  # still there
    red_sees = client.get("/api/search", params={"q": SECRET}, headers=as_(RED)).json()["hits"]
    assert red_sees[0]["doc_id"] == "red"


@pytest.mark.timeout(120)
def test_an_upload_stays_its_tenants_and_never_replaces_anothers(served, tmp_path: Path):
    client, index = served
    before = index.catalog.document("red").sha256
    (tmp_path / "upload").mkdir()
    other = make_pdf(tmp_path / "upload" / "red.pdf", [["blue's own red notes"]])
    sent = client.post(
        "/api/documents",
        files={"files": ("red.pdf", other.read_bytes(), "application/pdf")},
        headers=as_(BLUE),
    )
    assert sent.status_code == 202, sent.text
    job = sent.json()["job"]["id"]
    deadline = time.monotonic() + 60
    while client.get(f"/api/jobs/{job}", headers=as_(BLUE)).json()["state"] not in ("done", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    done = client.get(f"/api/jobs/{job}", headers=as_(BLUE)).json()
    assert done["state"] == "done" and done["added"] == ["blue--red"]
    assert index.catalog.document("red").sha256 == before  # red's document untouched
    assert client.get(f"/api/jobs/{job}", headers=as_(RED)).status_code == 404
    assert client.get("/api/jobs", headers=as_(RED)).json()["jobs"] == []
    red_ids = [d["id"] for d in client.get("/api/documents", headers=as_(RED)).json()["documents"]]
    assert red_ids == ["red"]
    blue_ids = [d["id"] for d in client.get("/api/documents", headers=as_(BLUE)).json()["documents"]]
    assert blue_ids == ["blue", "blue--red"]


@pytest.mark.timeout(60)
def test_keys_may_read_write_or_neither(served):
    client, _ = served
    assert client.get("/api/documents", headers=as_("not-a-key-of-anyone-here")).status_code == 401
    assert client.get("/api/documents").status_code == 401
    refused = client.post(
        "/api/documents", files={"files": ("a.pdf", b"%PDF-1.4", "application/pdf")}, headers=as_(RED)
    )
    assert refused.status_code == 403 and "may not write" in refused.text
    assert client.post("/mcp", json={}, headers=as_("not-a-key-of-anyone-here")).status_code == 401


@pytest.mark.timeout(120)
def test_the_mcp_tools_see_what_the_key_sees(tmp_path: Path):
    httpx2 = pytest.importorskip("httpx2")
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from pagesight.serve.mcp import http_app
    from tests.serve.live import LiveServer

    red = make_pdf(tmp_path / "red.pdf", [[SECRET]])
    blue = make_pdf(tmp_path / "blue.pdf", [["glacier moraine survey of the blue team"]])
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert (
        index.add([red], jobs=1, meta={"tenant": "red"}).ok
        and index.add([blue], jobs=1, meta={"tenant": "blue"}).ok
    )
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({BLUE: {"name": "blue"}}))
    tools = http_app(Index.open(tmp_path / "ix", create=False))
    live = LiveServer(create_app(index, api_key=OPERATOR, keys=load_keys(keys), readers=1, mcp_app=tools))

    async def session(key: str):
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http,
            Client(
                streamable_http_client(f"{live.url}/mcp", http_client=http), read_timeout_seconds=60
            ) as client,
        ):
            listed = await client.call_tool("list_documents", {})
            found = await client.call_tool("search", {"query": SECRET, "k": 5})
            asked = await client.call_tool("ask", {"question": "Where do zephyrine owls nest?"})
            page = await client.call_tool("get_page", {"doc_id": "red", "page": 1})
            return listed, found, asked, page

    try:
        listed, found, asked, page = anyio.run(session, BLUE)
        operator = anyio.run(session, OPERATOR)
    finally:
        live.stop()
        index.close()
    assert [d["id"] for d in listed.structured_content["documents"]] == ["blue"]
    assert all(hit["doc_id"] == "blue" for hit in found.structured_content["hits"])
    assert "basalt" not in json.dumps(asked.structured_content)
    assert page.is_error and "no document 'red'" in page.content[0].text
    assert {d["id"] for d in operator[0].structured_content["documents"]} == {"blue", "red"}
    assert not operator[3].is_error  # the operator's key sees red's page


def test_a_keys_file_that_cannot_be_used_is_refused_with_one_line(tmp_path: Path):
    path = tmp_path / "keys.json"
    for content, message in (
        (None, "cannot read the keys file"),
        ("{not json", "the keys file is not JSON"),
        ("[]", "must be an object of keys"),
        ('{"short": {"name": "red"}}', "16 characters or more"),
        ('{"long-enough-key-0123": {"write": true}}', "give the tenant a name"),
        ('{"long-enough-key-0123": {"name": "red", "where": "tenant ="}}', "key 1: where:"),
        ('{"long-enough-key-0123": {"name": "red", "team": "x"}}', "unknown team"),
    ):
        path.unlink(missing_ok=True)
        if content is not None:
            path.write_text(content)
        with pytest.raises(PagesightError, match=message):
            load_keys(path)
    index = tmp_path / "ix"
    Index.open(index, settings={"dense_model": None}).close()
    started = cli("serve", "--index", str(index), "--keys", str(tmp_path / "none.json"), check=False)
    assert started.returncode == 2 and "cannot read the keys file" in started.stderr
