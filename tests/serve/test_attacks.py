"""The server attacked as a client would attack it: tenants with colliding names, fields that
forge built-in ones, readers and rerankers a request should not choose, models that spend the
operator's key, ids that tell what exists, DNS rebinding, numbers out of range, a damaged
re-upload, one tenant's queue hogging the ingestion. Each test is written as the attack and
checks that nothing leaks, nothing is replaced and the server stays up."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.errors import PagesightError
from pagesight.frontends import open_image
from pagesight.ingest.options import IngestOptions, meta_fields
from pagesight.serve.tenants import load_keys
from tests.answer.test_openai_reader import ChatServer, Reply, completion
from tests.conftest import cli, make_pdf

pytest.importorskip("fastapi")
import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from pagesight.serve.app import create_app  # noqa: E402
from pagesight.serve.offer import KEPT_READERS, Offer, OfferedReaders  # noqa: E402

OPERATOR = "operator-key-0123456789"
RED = "red-key-0123456789abcdef"
BLUE = "blue-key-0123456789abcdef"
ACME = "acme-key-0123456789abcdef"
ACME_EU = "acme-eu-key-0123456789abcd"


def as_(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def wait_for(client: TestClient, job: str, key: str, seconds: float = 90) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        state = client.get(f"/api/jobs/{job}", headers=as_(key)).json()
        if state["state"] in ("done", "failed"):
            return state
        assert time.monotonic() < deadline, state
        time.sleep(0.1)


def upload(client: TestClient, key: str, *files: tuple[str, bytes], meta: list[str] | None = None):
    parts = [("files", (name, data, "application/octet-stream")) for name, data in files]
    return client.post("/api/documents", files=parts, data={"meta": meta or []}, headers=as_(key))


def keys_file(tmp_path: Path, keys: dict) -> dict:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(keys))
    return load_keys(path)


@pytest.fixture
def tenants(tmp_path: Path):
    """An index with red's and blue's documents, served with the operator's key and both tenants'."""
    red = make_pdf(tmp_path / "red.pdf", [["zephyrine owls nest in basalt cliffs"]])
    blue = make_pdf(tmp_path / "blue.pdf", [["glacier moraine survey of the blue team"]])
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add([red], jobs=1, meta={"tenant": "red"}).ok
    assert index.add([blue], jobs=1, meta={"tenant": "blue"}).ok
    keys = keys_file(tmp_path, {RED: {"name": "red", "write": True}, BLUE: {"name": "blue", "write": True}})
    app = create_app(index, api_key=OPERATOR, keys=keys, readers=1, ingest_options=IngestOptions(jobs=1))
    with TestClient(app) as client:
        yield client, index
    index.close()


# Names and fields ------------------------------------------------------------------------------


def test_tenant_names_that_could_collide_are_refused(tmp_path: Path):
    for name in ("acme--eu", "01", "1", "-red", "red-", "red team", "a" * 65):
        with pytest.raises(PagesightError, match="must start with a letter"):
            keys_file(tmp_path, {RED: {"name": name}})
    with pytest.raises(PagesightError, match="another key's already"):
        keys_file(tmp_path, {RED: {"name": "red"}, BLUE: {"name": "red"}})
    red = keys_file(tmp_path, {RED: {"name": "red"}})[RED]
    assert red.where == 'tenant = "red"'  # compared as text


@pytest.mark.timeout(120)
def test_a_tenant_cannot_upload_into_another_tenants_name(tmp_path: Path):
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    keys = keys_file(
        tmp_path, {ACME: {"name": "acme", "write": True}, ACME_EU: {"name": "acme-eu", "write": True}}
    )
    theirs = make_pdf(tmp_path / "theirs.pdf", [["acme europe's own quarterly report"]])
    mine = make_pdf(tmp_path / "mine.pdf", [["acme's attempt to replace it"]])
    with TestClient(create_app(index, api_key=OPERATOR, keys=keys, readers=1)) as client:
        first = upload(client, ACME_EU, ("report.pdf", theirs.read_bytes())).json()["job"]["id"]
        assert wait_for(client, first, ACME_EU)["added"] == ["acme-eu--report"]
        second = upload(client, ACME, ("eu--report.pdf", mine.read_bytes())).json()["job"]["id"]
        assert wait_for(client, second, ACME)["added"] == ["acme--eu--report"]
        eu = client.get("/api/documents", headers=as_(ACME_EU)).json()["documents"]
        assert [d["id"] for d in eu] == ["acme-eu--report"]
        hits = client.get("/api/search", params={"q": "quarterly report"}, headers=as_(ACME_EU)).json()
        assert "europe" in hits["hits"][0]["snippet"].lower()
    index.close()


@pytest.mark.timeout(120)
def test_an_upload_never_takes_a_name_the_operator_gave_another_tenant(tenants, tmp_path: Path):
    client, index = tenants
    theirs = make_pdf(tmp_path / "red--notes.pdf", [["blue's notes, filed by the operator"]])
    assert index.add([theirs], jobs=1, meta={"tenant": "blue"}).ok
    before = index.catalog.document("red--notes").sha256
    mine = make_pdf(tmp_path / "mine.pdf", [["red overwrites blue"]])
    taken = upload(client, RED, ("notes.pdf", mine.read_bytes()))
    assert taken.status_code == 409 and "taken" in taken.json()["error"]
    assert index.catalog.document("red--notes").sha256 == before


def test_fields_given_at_ingestion_cannot_be_the_catalogs_own():
    for field in ("id", "path", "type", "pages", "size", "modified", "language"):
        with pytest.raises(PagesightError, match=f"'{field}' is the catalog's own field"):
            meta_fields([f"{field}=x"])
    assert meta_fields(["year=1999", "team=red"]) == {"year": "1999", "team": "red"}


@pytest.mark.timeout(120)
def test_upload_fields_cannot_forge_a_documents_path_or_type(tenants, tmp_path: Path):
    client, index = tenants
    pdf = make_pdf(tmp_path / "forged.pdf", [["a forged document"]])
    for field in ("path=/data/finance/report.pdf", "type=web", "id=blue"):
        refused = upload(client, RED, ("forged.pdf", pdf.read_bytes()), meta=[field])
        assert refused.status_code == 422 and "catalog's own field" in refused.json()["error"]
    assert index.catalog.document("red--forged") is None
    # fields given another way (a sidecar, the library) never override the catalog's either
    assert index.add([pdf], jobs=1, meta={"path": "/data/finance/x.pdf", "tenant": "red"}).ok
    listed = index.document_list("path ^= /data/finance/")
    assert listed == []
    refused = cli("ingest", str(pdf), "--index", str(tmp_path / "ix2"), "--meta", "type=pdf", check=False)
    assert refused.returncode == 2 and "catalog's own field" in refused.stderr


# Readers, models, rerankers ---------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_request_cannot_spend_the_operators_model_key(tmp_path: Path, monkeypatch):
    endpoint = ChatServer([Reply(completion("Owls nest in basalt cliffs."))])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-operators-own")
    monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
    pdf = make_pdf(tmp_path / "owls.pdf", [["zephyrine owls nest in basalt cliffs"]])
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add([pdf], jobs=1).ok
    try:
        with TestClient(create_app(index, readers=1)) as client:  # no key: reads open to anyone
            for body in (
                {"reader": "openai", "model": "gpt-4o", "max_tokens": 8192},
                {"reader": "openai"},
                {"reader": "transformers", "model": "Qwen/Qwen2-VL-2B-Instruct"},
                {"reader": "extractive", "rerank": "vlm-openai"},
                {"reader": "extractive", "rerank": "colqwen2.5"},
            ):
                refused = client.post("/api/ask", json={"question": "Where do owls nest?", **body})
                assert refused.status_code == 403 and "not offered here" in refused.json()["error"], body
            searched = client.get("/api/search", params={"q": "owls", "rerank": "vlm-openai"})
            assert searched.status_code == 403
            for n in range(50):  # the readers kept stay few, whatever the requests name
                client.post("/api/ask", json={"question": "owls?", "reader": "openai", "model": f"m{n}"})
            assert len(client.app.state.served.readers) == 0
        assert endpoint.requests == []  # the endpoint was never called, the key never sent
        offer = Offer(readers=("openai",), models=("qwen-vl",), base_url=endpoint.base_url, max_tokens=256)
        with TestClient(create_app(index, readers=1, offer=offer)) as client:
            other = client.post("/api/ask", json={"question": "owls?", "reader": "openai", "model": "gpt-4o"})
            assert other.status_code == 403 and "model 'gpt-4o' is not offered" in other.json()["error"]
            long = client.post("/api/ask", json={"question": "owls?", "reader": "openai", "max_tokens": 8192})
            assert long.status_code == 403 and "at most 256" in long.json()["error"]
            answered = client.post("/api/ask", json={"question": "Where do owls nest?", "reader": "openai"})
            assert answered.status_code == 200, answered.text
        (sent,) = endpoint.requests
        assert sent["body"]["model"] == "qwen-vl" and sent["body"]["max_tokens"] == 256
    finally:
        endpoint.close()
        index.close()


def test_only_the_operator_lets_models_run_their_own_code(tmp_path: Path):
    """Whether a model may run the code it comes with is given when the server starts (``serve
    --trust-remote-code``), to every index it opens; no request field carries it, so a request
    naming it changes nothing and an offered reranker that needs it stays refused."""
    import dataclasses

    from pagesight.request import AskRequest, SearchRequest
    from pagesight.serve.workers import ServeConfig, build

    assert not [
        f.name for kind in (SearchRequest, AskRequest) for f in dataclasses.fields(kind) if "trust" in f.name
    ]
    pdf = make_pdf(tmp_path / "owls.pdf", [["zephyrine owls nest in basalt cliffs"]])
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as made:
        assert made.add([pdf], jobs=1).ok
    config = ServeConfig(str(tmp_path / "ix"), rerankers=("jina-m0",))
    with TestClient(build(config, None), base_url="http://127.0.0.1") as client:
        searched = client.get(
            "/api/search", params={"q": "owls", "rerank": "jina-m0", "trust_remote_code": "true"}
        )
        asked = client.post(
            "/api/ask", json={"question": "owls?", "rerank": "jina-m0", "trust_remote_code": True}
        )
        for refused in (searched, asked):
            assert refused.status_code == 400, refused.text
            assert "'jinaai/jina-reranker-m0' runs code of its own" in refused.json()["error"]
            assert "--trust-remote-code" in refused.json()["error"]
        with client.app.state.served.pool.reading() as index:
            assert index.trust_remote_code is False
    trusting = build(dataclasses.replace(config, trust_remote_code=True), None)
    with TestClient(trusting, base_url="http://127.0.0.1") as client:
        pool = client.app.state.served.pool
        with pool.reading() as one, pool.reading() as other:  # the operator's leave reaches each
            assert one is not other and one.trust_remote_code and other.trust_remote_code


def test_a_model_reader_is_offered_only_with_its_models_and_endpoint(monkeypatch):
    for name in ("PAGESIGHT_OPENAI_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(PagesightError, match="needs its endpoint"):
        Offer(readers=("openai",), models=("m",))
    with pytest.raises(PagesightError, match="--model M"):
        Offer(readers=("openai",), base_url="http://127.0.0.1:9/v1")
    with pytest.raises(PagesightError, match="local model reader"):
        Offer(readers=("transformers",), models=("m",), base_url="http://127.0.0.1:9/v1")


def test_the_readers_a_server_keeps_are_bounded():
    from pagesight.request import AskRequest

    readers = OfferedReaders(Offer(readers=("openai",), models=("m",), base_url="http://127.0.0.1:9/v1"))
    for tokens in range(1, 3 * KEPT_READERS):
        readers.get(AskRequest("q", reader="openai", model="m", max_tokens=tokens))
    assert len(readers) == KEPT_READERS


# What exists, and where --------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_another_tenants_id_answers_as_a_missing_one(tenants):
    client, index = tenants
    folder = str(index.root.parent.resolve())  # where the documents' files are
    answers = {}
    for doc in ("red", "no-such-document"):
        said = []
        search = client.get("/api/search", params={"q": "owls", "doc": doc}, headers=as_(BLUE))
        said.append((search.status_code, search.text.replace(doc, "ID")))
        for agent in (False, True):
            asked = client.post(
                "/api/ask", json={"question": "owls?", "doc_ids": [doc], "agent": agent}, headers=as_(BLUE)
            )
            said.append((asked.status_code, asked.text.replace(doc, "ID")))
        answers[doc] = said
    assert answers["red"] == answers["no-such-document"]
    assert all(status == 404 for status, _ in answers["red"])
    listed = client.get("/api/documents", headers=as_(BLUE)).json()["documents"]
    assert listed[0]["source"] == "blue.pdf" and listed[0]["fields"]["path"] == "blue.pdf"
    everything = json.dumps(client.get("/api/documents", headers=as_(OPERATOR)).json())
    assert folder in everything  # the operator sees where
    assert folder not in json.dumps(listed)
    assert all(folder not in text for _, text in answers["red"])


@pytest.mark.timeout(120)
def test_the_mcp_tools_answer_another_tenants_id_as_a_missing_one(tmp_path: Path):
    httpx2 = pytest.importorskip("httpx2")
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from pagesight.serve.mcp import http_app
    from tests.serve.live import LiveServer

    red = make_pdf(tmp_path / "red.pdf", [["zephyrine owls nest in basalt cliffs"]])
    blue = make_pdf(tmp_path / "blue.pdf", [["glacier moraine survey of the blue team"]])
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add([red], jobs=1, meta={"tenant": "red"}).ok
    assert index.add([blue], jobs=1, meta={"tenant": "blue"}).ok
    keys = keys_file(tmp_path, {BLUE: {"name": "blue"}})
    tools = http_app(Index.open(tmp_path / "ix", create=False), offer=Offer())
    live = LiveServer(create_app(index, api_key=OPERATOR, keys=keys, readers=1, mcp_app=tools))

    async def session():
        async with (
            httpx2.AsyncClient(headers=as_(BLUE)) as http,
            Client(
                streamable_http_client(f"{live.url}/mcp", http_client=http), read_timeout_seconds=60
            ) as client,
        ):
            said = {}
            for doc in ("red", "no-such-document"):
                calls = [
                    await client.call_tool("search", {"query": "owls", "doc_ids": [doc]}),
                    await client.call_tool("ask", {"question": "owls?", "doc_ids": [doc]}),
                    await client.call_tool("get_page", {"doc_id": doc, "page": 1}),
                ]
                said[doc] = [(call.is_error, call.content[0].text.replace(doc, "ID")) for call in calls]
            huge = await client.call_tool("get_page", {"doc_id": "blue", "page": 10**23})
            long_where = await client.call_tool("list_documents", {"where": "team = " + "x" * 5000})
            reranked = await client.call_tool("search", {"query": "owls", "rerank": "vlm-openai"})
            asked = await client.call_tool("ask", {"question": "owls?", "rerank": "vlm-openai"})
            return said, huge, long_where, reranked, asked

    try:
        said, huge, long_where, reranked, asked = anyio.run(session)
    finally:
        live.stop()
        index.close()
    assert said["red"] == said["no-such-document"] and all(error for error, _ in said["red"])
    assert all(str(tmp_path) not in text for _, text in said["red"])
    assert huge.is_error and long_where.is_error
    for refused in (reranked, asked):  # an ask's reranker spends what a search's would
        assert refused.is_error and "not offered here" in refused.content[0].text


# Requests out of bounds ----------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_numbers_out_of_range_are_refused_not_crashes(tenants):
    client, _ = tenants
    key = as_(OPERATOR)
    for path, params in (
        ("/api/tile", {"doc": "red", "page": "99999999999999999999999"}),
        ("/api/tile", {"doc": "red", "page": 1, "tile": "99999999999999999999999"}),
        ("/api/page", {"doc": "red", "page": "99999999999999999999999"}),
        ("/api/page", {"doc": "red", "page": 1, "c": "1e308"}),
        ("/api/search", {"q": "owls", "k": "99999999999999999999999"}),
        ("/api/documents", {"where": "team = " + "x" * 5000}),
        ("/api/tile", {"doc": "x" * 5000, "page": 1}),
    ):
        answer = client.get(path, params=params, headers=key)
        assert answer.status_code == 422, (path, params, answer.text)
    many = client.get(
        "/api/search", params=[("q", "owls"), *[("doc", f"d{n}") for n in range(1001)]], headers=key
    )
    assert many.status_code == 422
    assert client.get("/api/health").status_code == 200


@pytest.mark.timeout(60)
def test_uploads_and_query_images_are_bounded(tenants, tmp_path: Path, monkeypatch):
    from PIL import Image

    from pagesight.serve import jobs

    client, index = tenants
    monkeypatch.setattr(jobs, "MAX_WAITING_FILES", 3)
    pdf = make_pdf(tmp_path / "a.pdf", [["one page"]]).read_bytes()
    flood = upload(client, RED, *[(f"f{n}.pdf", pdf) for n in range(4)])
    assert flood.status_code == 429 and "waiting" in flood.json()["error"]
    fields = upload(client, RED, ("a.pdf", pdf), meta=[f"k{n}=v" for n in range(51)])
    assert fields.status_code == 422
    assert index.catalog.document("red--f0") is None and not (index.root / "uploads" / "red--f0.pdf").exists()
    bomb = tmp_path / "bomb.png"
    Image.new("1", (8000, 8000)).save(bomb)  # a few kB on disk, 192 MB decoded as RGB
    assert bomb.stat().st_size < 100_000
    searched = client.post(
        "/api/search/image", files={"image": ("q.png", bomb.read_bytes())}, headers=as_(RED)
    )
    assert searched.status_code == 400 and "no visual vectors" in searched.json()["error"]  # never decoded
    with pytest.raises(PagesightError, match="pixels"):
        open_image(str(bomb), "q.png")  # an index with visual vectors refuses it from its header


@pytest.mark.timeout(60)
def test_an_empty_api_key_header_does_not_hide_a_valid_bearer_key(tenants):
    client, _ = tenants
    both = {**as_(RED), "X-API-Key": ""}
    assert client.get("/api/documents", headers=both).status_code == 200
    assert (
        client.get("/api/documents", headers={**as_(RED), "X-API-Key": "wrong-key-0123456789"}).status_code
        == 401
    )


@pytest.mark.timeout(60)
def test_the_api_docs_load_nothing_from_another_site(tenants):
    client, _ = tenants
    page = client.get("/docs")
    assert page.status_code == 200 and "swagger" in page.text.lower()
    assert "cdn." not in page.text and "https://" not in page.text.replace("https://fastapi", "")
    script = re.search(r'<script src="([^"]+)"', page.text).group(1)
    assert client.get(script).status_code == 200


# DNS rebinding ------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_loopback_server_answers_loopback_hosts_and_origins_only(tmp_path: Path):
    from tests.serve.live import LiveServer

    pdf = make_pdf(tmp_path / "secret.pdf", [["the merger closes on 4 May"]])
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add([pdf], jobs=1).ok
    live = LiveServer(create_app(index, readers=1, host="127.0.0.1"))  # no key: reads open
    try:
        with httpx.Client(timeout=30) as http:
            for path in ("/api/documents", "/api/search?q=merger", "/", "/docs", "/api/health"):
                rebound = http.get(live.url + path, headers={"Host": f"attacker.example:{live.port}"})
                assert rebound.status_code == 421 and "merger" not in rebound.text, path
                crossed = http.get(live.url + path, headers={"Origin": "http://attacker.example"})
                assert crossed.status_code == 403, path
            assert (
                http.get(live.url + "/api/documents", headers={"Host": f"localhost:{live.port}"}).status_code
                == 200
            )
            assert http.get(live.url + "/api/documents", headers={"Origin": live.url}).status_code == 200
            assert http.get(f"{live.url}/api/search", params={"q": "merger"}).json()["hits"]
    finally:
        live.stop()
        index.close()


@pytest.mark.timeout(60)
def test_a_loopback_server_reads_the_host_a_browser_would(tmp_path: Path):
    """Hosts no browser sends, read as RFC 9112 says: user info before an ``@`` is no host, an
    absolute-form request line's host is the one addressed, two Host headers are one too many."""
    import socket

    from tests.serve.live import LiveServer

    pdf = make_pdf(tmp_path / "secret.pdf", [["the merger closes on 4 May"]])
    index = Index.open(tmp_path / "ix", settings={"dense_model": None})
    assert index.add([pdf], jobs=1).ok
    live = LiveServer(create_app(index, readers=1, host="127.0.0.1"))

    def status(target: str, *hosts: str) -> tuple[int, bytes]:
        head = f"GET {target} HTTP/1.1\r\n" + "".join(f"Host: {host}\r\n" for host in hosts)
        with socket.create_connection(("127.0.0.1", live.port), timeout=30) as connection:
            connection.sendall((head + "Connection: close\r\n\r\n").encode())
            reply = b""
            while chunk := connection.recv(65536):
                reply += chunk
        return int(reply.split()[1]), reply

    try:
        here = f"127.0.0.1:{live.port}"
        refused = [
            status("/api/documents", "127.0.0.1@attacker.example"),
            status(f"http://attacker.example:{live.port}/api/documents", here),
            status("/api/documents", here, "attacker.example"),
            status("/api/documents", f"{here}/x"),
            status("/api/documents"),
        ]
        assert [code for code, _ in refused] == [400, 421, 400, 400, 400]
        assert not any(b"merger" in reply or b"secret" in reply for _, reply in refused)
        assert status("/api/documents", here)[0] == 200
        assert status(f"http://{here}/api/documents", "attacker.example")[0] == 200  # the target's host
        assert status("/api/documents", f"[::1]:{live.port}")[0] == 200
    finally:
        live.stop()
        index.close()


# Uploads -------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_damaged_reupload_fails_alone_and_the_good_version_stays(tenants, tmp_path: Path):
    client, index = tenants
    good = make_pdf(tmp_path / "keep.pdf", [["the keep survives a bad upload"], ["page two"]])
    first = upload(client, RED, ("keep.pdf", good.read_bytes())).json()["job"]["id"]
    assert wait_for(client, first, RED)["added"] == ["red--keep"]
    damaged = b"%PDF-1.7\n" + b"\x00garbage" * 500
    second = upload(client, RED, ("keep.pdf", damaged)).json()["job"]["id"]
    failed = wait_for(client, second, RED)
    assert failed["failed"] and failed["failed"][0]["file"] == "red--keep.pdf"
    for path in ("/api/page?doc=red--keep&page=2", "/api/tile?doc=red--keep&page=1&tile=0"):
        assert client.get(path, headers=as_(RED)).status_code == 200, path
    hits = client.get("/api/search", params={"q": "keep survives"}, headers=as_(RED)).json()["hits"]
    assert hits and hits[0]["doc_id"] == "red--keep"
    uploads = index.root / "uploads"
    assert (uploads / "red--keep.pdf").read_bytes() == good.read_bytes()
    assert not any((uploads / ".staging").iterdir())  # nothing staged is left behind


@pytest.mark.timeout(180)
def test_one_tenants_many_files_do_not_hold_back_anothers_upload(tenants, tmp_path: Path):
    client, _ = tenants
    many = [
        (f"bulk{n}.pdf", make_pdf(tmp_path / f"bulk{n}.pdf", [[f"bulk report number {n}"]] * 3).read_bytes())
        for n in range(16)
    ]
    bulk = upload(client, RED, *many).json()["job"]["id"]
    one = make_pdf(tmp_path / "urgent.pdf", [["blue's urgent memo"]])
    quick = upload(client, BLUE, ("urgent.pdf", one.read_bytes())).json()["job"]["id"]
    finished = {}
    deadline = time.monotonic() + 150
    while len(finished) < 2:
        assert time.monotonic() < deadline
        for job, key in ((bulk, RED), (quick, BLUE)):
            if (
                job not in finished
                and client.get(f"/api/jobs/{job}", headers=as_(key)).json()["state"] == "done"
            ):
                finished[job] = time.monotonic()
        time.sleep(0.05)
    assert finished[quick] < finished[bulk]  # blue's one file went between red's sixteen
    assert len(client.get("/api/documents", headers=as_(RED)).json()["documents"]) == 17


@pytest.mark.timeout(120)
def test_a_good_reupload_replaces_and_no_reason_names_a_server_path(tenants, tmp_path: Path):
    client, index = tenants
    first = make_pdf(tmp_path / "v1.pdf", [["the first version speaks of herons"]])
    second = make_pdf(tmp_path / "v2.pdf", [["the second version speaks of cormorants"]])
    job = upload(client, RED, ("plan.pdf", first.read_bytes())).json()["job"]["id"]
    assert wait_for(client, job, RED)["added"] == ["red--plan"]
    job = upload(client, RED, ("plan.pdf", second.read_bytes())).json()["job"]["id"]
    assert wait_for(client, job, RED)["replaced"] == ["red--plan"]
    hits = client.get("/api/search", params={"q": "cormorants"}, headers=as_(RED)).json()["hits"]
    assert [hit["doc_id"] for hit in hits] == ["red--plan"]
    assert client.get("/api/search", params={"q": "herons"}, headers=as_(RED)).json()["hits"] == []
    assert (index.root / "uploads" / "red--plan.pdf").read_bytes() == second.read_bytes()
    # a name the operator gave a file elsewhere, for red: the job says so without saying where
    elsewhere = tmp_path / "operators-own-folder"
    elsewhere.mkdir()
    assert index.add(
        [make_pdf(elsewhere / "red--budget.pdf", [["budget"]])], jobs=1, meta={"tenant": "red"}
    ).ok
    job = upload(client, RED, ("budget.pdf", first.read_bytes())).json()["job"]["id"]
    reason = wait_for(client, job, RED)["failed"][0]["reason"]
    assert "already taken" in reason and "operators-own-folder" not in reason and "/" not in reason


@pytest.mark.timeout(60)
def test_a_tenant_cannot_filter_on_where_its_files_are(tenants):
    client, _ = tenants
    probed = client.get("/api/documents", params={"where": 'path ^= "/tmp/"'}, headers=as_(RED))
    assert probed.status_code == 400 and "'path' is not a field" in probed.json()["error"]
    searched = client.get("/api/search", params={"q": "owls", "where": "path ^= /"}, headers=as_(RED))
    assert searched.status_code == 400
    assert client.get("/api/documents", params={"where": 'path ^= "/"'}, headers=as_(OPERATOR)).json()[
        "documents"
    ]


@pytest.mark.timeout(60)
def test_boxes_far_beyond_a_tile_are_drawn_at_its_edge(tenants):
    import io

    import numpy as np
    from PIL import Image

    client, _ = tenants
    huge = ";".join(f"{-1e6 + n},{-1e6 + n},{1e6 - n},{1e6 - n}" for n in range(200))
    answer = client.get(
        "/api/tile", params={"doc": "red", "page": 1, "tile": 0, "boxes": huge}, headers=as_(RED)
    )
    assert answer.status_code == 200
    image = np.asarray(Image.open(io.BytesIO(answer.content)).convert("RGB")).astype(int)
    red = (image[..., 0] > 200) & (image[..., 1] < 80) & (image[..., 2] < 80)
    assert red[:, :3].any() and not red[image.shape[0] // 2, image.shape[1] // 4 : image.shape[1] // 2].any()


@pytest.mark.timeout(120)
def test_one_tenants_jobs_never_push_out_anothers_records(tenants, tmp_path: Path, monkeypatch):
    from pagesight.serve import jobs

    client, _ = tenants
    monkeypatch.setattr(jobs, "KEPT_JOBS", 2)
    pdf = make_pdf(tmp_path / "a.pdf", [["a page"]]).read_bytes()
    blues = upload(client, BLUE, ("mine.pdf", pdf)).json()["job"]["id"]
    wait_for(client, blues, BLUE)
    for n in range(4):
        wait_for(client, upload(client, RED, (f"r{n}.pdf", pdf)).json()["job"]["id"], RED)
    assert client.get(f"/api/jobs/{blues}", headers=as_(BLUE)).status_code == 200
    assert len(client.get("/api/jobs", headers=as_(RED)).json()["jobs"]) <= 3


# Office uploads ------------------------------------------------------------------------------------

office = pytest.mark.skipif(
    shutil.which("soffice") is None or shutil.which("bwrap") is None,
    reason="no LibreOffice or no bubblewrap (apt-get install libreoffice-core libreoffice-writer bubblewrap)",
)


def race(
    client: TestClient, attack: tuple[str, bytes], tmp_path: Path, seconds: float, both: bool = True
) -> tuple[dict, dict, dict]:
    """Red uploads ``attack``; blue uploads a one-page PDF right after. When each job ended (seconds
    after red's upload; none if not within ``seconds``, or, unless ``both``, once blue's has) and
    the jobs' states then."""
    memo = make_pdf(tmp_path / "memo.pdf", [["blue's one page memo about the harbour"]]).read_bytes()
    started = time.monotonic()
    jobs = {RED: upload(client, RED, attack).json()["job"]["id"]}
    jobs[BLUE] = upload(client, BLUE, ("memo.pdf", memo)).json()["job"]["id"]
    ended, states = {}, {}
    waited = (RED, BLUE) if both else (BLUE,)
    while not all(key in ended for key in waited) and time.monotonic() - started < seconds:
        for key, job in jobs.items():
            states[key] = client.get(f"/api/jobs/{job}", headers=as_(key)).json()
            if key not in ended and states[key]["state"] in ("done", "failed"):
                ended[key] = time.monotonic() - started
        time.sleep(0.1)
    return ended, states[RED], states[BLUE]


@office
@pytest.mark.timeout(180)
@pytest.mark.parametrize("bomb", ["zip bomb", "page breaks"])
def test_an_office_bomb_is_refused_in_seconds_and_holds_no_other_tenant(tenants, tmp_path: Path, bomb):
    """A 1.5 MB .docx inflating to a gigabyte, a 4 KB one of 20,000 page breaks: each kept LibreOffice
    and so every tenant's ingestion busy for its 100 s limit."""
    from tests.render.test_office_limits import docx, zip_bomb

    client, _ = tenants
    if bomb == "zip bomb":
        made = zip_bomb(tmp_path / "bomb.docx")
    else:
        made = docx(tmp_path / "bomb.docx", '<w:p><w:r><w:br w:type="page"/></w:r></w:p>' * 20_000)
        assert made.stat().st_size < 10_000
    ended, red, blue = race(client, ("report.docx", made.read_bytes()), tmp_path, 60)
    assert blue["added"] == ["blue--memo"] and ended[BLUE] < 30, (ended, blue)
    assert [failure["file"] for failure in red["failed"]] == ["red--report.docx"], red
    assert "refused before conversion" in red["failed"][0]["reason"] and ended[RED] < 30, (ended, red)


@office
@pytest.mark.timeout(180)
def test_a_slow_office_conversion_holds_no_other_tenants_upload(tenants, tmp_path: Path):
    """A 10 KB .docx of one 40,000-row table passes every limit (no page break, not packed tightly)
    and takes LibreOffice up to its time limit: converted beside the turns, it holds its own job
    only. The server is closed before it ends, its conversion stopped."""
    from tests.render.test_office_limits import docx

    client, _ = tenants
    row = "<w:tr><w:tc><w:p><w:r><w:t>cell</w:t></w:r></w:p></w:tc></w:tr>"
    table = docx(tmp_path / "table.docx", f"<w:tbl>{row * 40_000}</w:tbl><w:p/>")
    assert table.stat().st_size < 20_000
    ended, red, blue = race(client, ("table.docx", table.read_bytes()), tmp_path, 30, both=False)
    assert blue["added"] == ["blue--memo"] and BLUE in ended, (ended, blue)
    assert RED not in ended and red["state"] == "queued", (ended, red)  # still converting


@office
@pytest.mark.timeout(180)
def test_a_deleted_office_upload_leaves_no_converted_pdf(tenants, tmp_path: Path):
    from pagesight.render.office import cached_pdf
    from pagesight.render.sources import file_sha256
    from tests.render.test_office_limits import docx

    client, index = tenants
    memo = docx(tmp_path / "memo.docx", "<w:p><w:r><w:t>red's confidential office memo</w:t></w:r></w:p>")
    done = wait_for(client, upload(client, RED, ("memo.docx", memo.read_bytes())).json()["job"]["id"], RED)
    assert done["added"] == ["red--memo"], done
    converted = cached_pdf(file_sha256(memo))  # the cache the server's workers were started with
    assert converted is not None
    assert client.delete("/api/documents/red--memo", headers=as_(RED)).status_code == 200
    assert not converted.exists()
    assert not (index.root / "uploads" / "red--memo.docx").exists()


@office
@pytest.mark.timeout(240)
def test_one_tenants_slow_office_files_hold_no_converter_another_tenant_needs(tenants, tmp_path: Path):
    """Issue 60, defect 10: red's two slow .docx files took both converters, so blue's office
    upload waited for LibreOffice's 100 s limit."""
    from tests.render.test_office_limits import docx

    client, _ = tenants
    row = "<w:tr><w:tc><w:p><w:r><w:t>cell</w:t></w:r></w:p></w:tc></w:tr>"
    slow = [docx(tmp_path / f"table{n}.docx", f"<w:tbl>{row * (40_000 + n)}</w:tbl><w:p/>") for n in range(2)]
    memo = docx(tmp_path / "memo.docx", "<w:p><w:r><w:t>blue's harbour memo</w:t></w:r></w:p>")
    started = time.monotonic()
    reds = upload(client, RED, *[(path.name, path.read_bytes()) for path in slow]).json()["job"]["id"]
    time.sleep(1)  # red's files are both taken before blue's arrives
    blues = upload(client, BLUE, ("memo.docx", memo.read_bytes())).json()["job"]["id"]
    blue = wait_for(client, blues, BLUE, seconds=60)
    assert blue["added"] == ["blue--memo"], blue
    red = client.get(f"/api/jobs/{reds}", headers=as_(RED)).json()
    assert red["state"] == "queued" and time.monotonic() - started < 60, red  # red's still converting
