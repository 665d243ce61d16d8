"""The HTTP API through a real uvicorn server on loopback and real HTTP requests: search, ask (whole
and streamed), tile and page images, documents, uploads through ingestion, the API key, and errors
that are JSON with the right status and never a traceback."""

from __future__ import annotations

import io
import json
import threading
import time

import httpx
import numpy as np
import pytest
from PIL import Image

from pagesight import Index
from pagesight.answer.show import BOX_COLOUR
from pagesight.ingest.options import IngestOptions
from pagesight.serve.app import create_app
from pagesight.settings import Settings
from tests.conftest import SAMPLES, cli, make_pdf
from tests.serve.live import LiveServer

KEY = "test-key-7d1c"
AUTH = {"Authorization": f"Bearer {KEY}"}
QUESTION = "What was the West region revenue?"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    """The bundled samples, lexical only (ask's reader reads their text)."""
    path = tmp_path_factory.mktemp("serve") / "index"
    with Index.open(path, settings=Settings(dense_model=None)) as index:
        report = index.add([SAMPLES], jobs=1)
    assert report.ok, report.failed
    return path


def _serve(index_dir, **options):
    index = Index.open(index_dir, create=False)
    server = LiveServer(create_app(index, readers=2, ingest_options=IngestOptions(jobs=1), **options))
    return server, index


@pytest.fixture(scope="module")
def keyed(index_dir):
    """A server with an API key (writes allowed) and a 1 MB upload limit."""
    server, index = _serve(index_dir, api_key=KEY, max_upload_mb=1)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        yield client
    server.stop()
    index.close()


@pytest.fixture(scope="module")
def open_server(index_dir):
    """A server without a key: reads open, writes refused."""
    server, index = _serve(index_dir)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client
    server.stop()
    index.close()


def error_of(response: httpx.Response, status: int) -> str:
    """The message of a JSON error answer with ``status``; fails on a traceback or a non-JSON body."""
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text and 'File "' not in response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]
    return body["error"]


def red_pixels(image: Image.Image) -> int:
    """Pixels of the evidence boxes' outline colour."""
    pixels = np.asarray(image.convert("RGB")).astype(int)
    return int((np.abs(pixels - np.array(BOX_COLOUR)).sum(axis=2) < 30).sum())


def png_bytes(colour="white", size=(200, 120)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def png(response: httpx.Response) -> Image.Image:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    return Image.open(io.BytesIO(response.content))


def boxes_param(boxes) -> str:
    return ";".join(",".join(f"{v:g}" for v in box) for box in boxes)


def top_hit(client, query: str = "West region revenue", **params) -> dict:
    response = client.get("/api/search", params={"q": query, "k": 3, **params})
    assert response.status_code == 200, response.text
    return response.json()["hits"][0]


# Search and ask ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_search_text_with_options_and_document_filter(keyed):
    body = keyed.get("/api/search", params={"q": "West region revenue", "k": 3, "mode": "lexical"}).json()
    first = body["hits"][0]
    assert first["page_id"] == "quarterly-report_1" and first["boxes"] and "West" in first["snippet"]
    assert set(first) >= {"doc_id", "page", "tile", "score", "scores", "tile_box", "page_size"}
    assert body["image_tokens"] > 0 and body["token_model"] == "qwen2-vl"
    assert first["score"] != first["scores"]["bm25"]  # fused with its document's score
    alone = keyed.get(
        "/api/search", params={"q": "West region revenue", "mode": "lexical", "document_weight": 0}
    )
    assert alone.json()["hits"][0]["score"] == alone.json()["hits"][0]["scores"]["bm25"]
    assert "document_weight" in error_of(
        keyed.get("/api/search", params={"q": "x", "document_weight": -1}), 422
    )
    smaller = keyed.get("/api/search", params={"q": "West region revenue", "k": 3, "c": 4}).json()
    assert smaller["image_tokens"] < body["image_tokens"] / 2
    only = keyed.get(
        "/api/search", params={"q": "revenue", "doc": "retrieval-primer", "fusion": "rrf"}
    ).json()
    assert only["hits"] and {hit["doc_id"] for hit in only["hits"]} == {"retrieval-primer"}
    assert "no document 'nope'" in error_of(keyed.get("/api/search", params={"q": "x", "doc": "nope"}), 404)
    assert "dense" in error_of(keyed.get("/api/search", params={"q": "x", "mode": "dense"}), 400)
    assert "k" in error_of(keyed.get("/api/search", params={"q": "x", "k": 0}), 422)
    assert "mode" in error_of(keyed.get("/api/search", params={"q": "x", "mode": "psychic"}), 422)
    error_of(keyed.get("/api/search"), 422)
    image = keyed.post("/api/search/image", files={"image": ("q.png", png_bytes())})
    assert "visual" in error_of(image, 400)  # this index has no visual encoder


@pytest.mark.timeout(60)
def test_ask_whole_and_streamed(keyed):
    answer = keyed.post("/api/ask", json={"question": QUESTION, "k": 3}).json()
    assert "18,150" in answer["text"] and answer["reader"] == "extractive"
    (citation,) = answer["citations"]
    assert citation["page_id"] == "quarterly-report_1" and citation["boxes"]
    assert answer["usage"]["image_tokens"] == 0  # the extractive reader reads text
    assert answer["answered"] is True and answer["reason"] is None
    declined = keyed.post("/api/ask", json={"question": f"{QUESTION[:-1]} in 2031?", "k": 3}).json()
    assert declined["answered"] is False and "2031" in declined["reason"] and not declined["citations"]

    for path, body in (("/api/ask", {"stream": True}), ("/api/ask/stream", {})):
        with keyed.stream("POST", path, json={"question": QUESTION, "k": 3, **body}) as response:
            assert response.headers["content-type"].startswith("application/x-ndjson")
            events = [json.loads(line) for line in response.iter_lines() if line]
        kinds = [event["event"] for event in events]
        assert kinds[0] == "hits" and kinds[-1] == "answer" and set(kinds[1:-1]) == {"text"}, kinds
        assert [hit["page_id"] for hit in events[0]["hits"]] == [hit["page_id"] for hit in answer["hits"]]
        written = "".join(event["text"] for event in events[1:-1])
        assert written.split() == answer["text"].split()
        assert events[-1]["answer"]["text"] == answer["text"]
        assert events[-1]["answer"]["citations"] == answer["citations"]


@pytest.mark.timeout(60)
def test_ask_refusals(keyed):
    assert "reader 'oracle' is not offered here" in error_of(
        keyed.post("/api/ask", json={"question": "x", "reader": "oracle"}), 403
    )
    local_model = keyed.post("/api/ask", json={"question": "x", "model": "/tmp/weights"})
    assert "its model is the server's to choose" in error_of(local_model, 403)
    agent = keyed.post("/api/ask", json={"question": "x", "agent": True, "max_searches": 2})
    assert "cannot call tools" in error_of(agent, 400)  # reaches Index.ask: the extractive reader
    too_many = keyed.post("/api/ask", json={"question": "x", "max_tokens": 9})
    assert "takes none of max_tokens" in error_of(too_many, 400)
    assert "question" in error_of(keyed.post("/api/ask", json={"k": 3}), 422)
    assert "compression" in error_of(keyed.post("/api/ask", json={"question": "x", "compression": 0.5}), 422)
    streamed = keyed.post("/api/ask", json={"question": "x", "doc_ids": ["nope"], "stream": True})
    assert "no document" in error_of(streamed, 404)  # checked before the stream starts
    error_of(keyed.post("/api/ask", content=b"{not json", headers={"Content-Type": "application/json"}), 422)


# Images --------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_tile_png_with_compression_and_boxes(keyed):
    hit = top_hit(keyed)
    where = {"doc": hit["doc_id"], "page": hit["page"], "tile": hit["tile"]}
    x0, y0, x1, y1 = hit["tile_box"]
    plain = png(keyed.get("/api/tile", params=where))
    assert plain.size == (round(x1 - x0), round(y1 - y0))
    assert red_pixels(plain) == 0
    drawn = png(keyed.get("/api/tile", params={**where, "boxes": boxes_param(hit["boxes"])}))
    assert red_pixels(drawn) > 100
    small = keyed.get("/api/tile", params={**where, "c": 4, "boxes": boxes_param(hit["boxes"])})
    assert png(small).size == (round((x1 - x0) / 2), round((y1 - y0) / 2))
    # the box lands where the words are: its outline is red in the compressed tile too
    bx0, by0, _, _ = hit["boxes"][0]
    outline = np.asarray(png(small).convert("RGB"))[round((by0 - y0) / 2), round((bx0 - x0) / 2) + 5]
    assert np.abs(outline.astype(int) - BOX_COLOUR).sum() < 60
    again = keyed.get("/api/tile", params={**where, "c": 4, "boxes": boxes_param(hit["boxes"])},
                      headers={**AUTH, "If-None-Match": small.headers["etag"]})  # fmt: skip
    assert again.status_code == 304 and not again.content


@pytest.mark.timeout(60)
def test_page_png_with_boxes(keyed):
    hit = top_hit(keyed)
    page = png(keyed.get("/api/page", params={"doc": hit["doc_id"], "page": hit["page"]}))
    assert page.size == tuple(hit["page_size"])
    drawn = keyed.get("/api/page", params={"doc": hit["doc_id"], "page": hit["page"], "c": 2,
                                           "boxes": boxes_param(hit["boxes"])})  # fmt: skip
    assert png(drawn).width == round(hit["page_size"][0] / 2**0.5) and red_pixels(png(drawn)) > 100
    assert "boxes" in error_of(
        keyed.get("/api/page", params={"doc": hit["doc_id"], "page": 1, "boxes": "1,2"}), 422
    )
    assert "not a box" in error_of(
        keyed.get("/api/page", params={"doc": hit["doc_id"], "page": 1, "boxes": "9,9,1,1"}), 422
    )
    error_of(keyed.get("/api/page", params={"doc": hit["doc_id"], "page": 1, "c": 0.5}), 422)


@pytest.mark.timeout(60)
def test_unknown_ids_and_path_traversal_are_404(keyed):
    for doc in ("../../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "/etc/passwd", "quarterly-report/../x"):
        assert "no document" in error_of(keyed.get("/api/page", params={"doc": doc, "page": 1}), 404)
        assert "no document" in error_of(keyed.get("/api/tile", params={"doc": doc, "page": 1}), 404)
    assert "no page 9" in error_of(keyed.get("/api/page", params={"doc": "quarterly-report", "page": 9}), 404)
    assert "no tile 7" in error_of(
        keyed.get("/api/tile", params={"doc": "quarterly-report", "page": 1, "tile": 7}), 404
    )
    for path in ("/api/documents/..%2F..%2Fcatalog.sqlite", "/api/documents/../../etc/passwd"):
        error_of(keyed.get(path), 404)
    for path in ("/static/../app.py", "/static/..%2fapp.py", "/static/%2e%2e/%2e%2e/pyproject.toml"):
        response = keyed.get(path)
        assert response.status_code == 404 and "import" not in response.text
    error_of(keyed.get("/api/jobs/../../etc"), 404)
    error_of(keyed.get("/api/no-such-endpoint"), 404)
    error_of(keyed.put("/api/search"), 405)


# Documents -----------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_documents_and_status(keyed):
    listing = keyed.get("/api/documents").json()["documents"]
    assert [d["id"] for d in listing] == sorted(p.stem for p in SAMPLES.iterdir())
    memo = keyed.get("/api/documents/scanned-memo").json()
    assert memo["type"] == "pdf" and memo["pages"] >= 1
    status = keyed.get("/api/status").json()
    assert status["writable"] and status["index"]["documents"] >= 5 and status["readers"] == 2
    assert keyed.get("/api/health").json()["status"] == "ok"
    assert "/api/search" in keyed.get("/openapi.json").json()["paths"]


def wait_for(client, job: dict, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while job["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
        job = client.get(f"/api/jobs/{job['id']}").json()
    return job


@pytest.mark.timeout(180)
def test_upload_is_ingested_while_searches_answer_then_deleted(keyed, index_dir, tmp_path):
    pdf = make_pdf(tmp_path / "turbine notes.pdf", [["The Zanzibar turbine spins at 900 rpm."]])
    statuses, stop = [], threading.Event()

    def search_meanwhile():
        with httpx.Client(base_url=str(keyed.base_url), headers=AUTH, timeout=60) as client:
            while not stop.is_set():
                statuses.append(client.get("/api/search", params={"q": "West region revenue"}).status_code)

    searching = threading.Thread(target=search_meanwhile)
    searching.start()
    try:
        sent = keyed.post(
            "/api/documents",
            files={"files": (pdf.name, pdf.read_bytes(), "application/pdf")},
            data={"meta": ["site=Zanzibar", "year=2021"], "language": "fr"},
        )
        assert sent.status_code == 202, sent.text
        job = wait_for(keyed, sent.json()["job"])
    finally:
        stop.set()
        searching.join()
    assert job["state"] == "done" and job["added"] == ["turbine-notes"] and not job["failed"], job
    assert job["done"] == job["total"] == 1 and job["pages"] == 1
    assert statuses and set(statuses) == {200}
    assert (index_dir / "uploads" / "turbine-notes.pdf").exists()
    assert top_hit(keyed, "Zanzibar turbine")["doc_id"] == "turbine-notes"
    # the upload's fields: the document carries them, and a filter on them finds it alone
    (row,) = keyed.get("/api/documents", params={"where": "site = Zanzibar and year >= 2020"}).json()[
        "documents"
    ]
    assert row["id"] == "turbine-notes" and row["fields"]["site"] == "Zanzibar"
    assert row["fields"]["language"] == "fr"  # as the upload said, though its text is English

    assert keyed.delete("/api/documents/turbine-notes").json() == {"deleted": "turbine-notes"}
    assert not (index_dir / "uploads" / "turbine-notes.pdf").exists()
    assert all(
        hit["doc_id"] != "turbine-notes"
        for hit in keyed.get("/api/search", params={"q": "Zanzibar turbine"}).json()["hits"]
    )
    error_of(keyed.delete("/api/documents/turbine-notes"), 404)
    assert (SAMPLES / "quarterly-report.pdf").exists()


@pytest.mark.timeout(180)
def test_bad_uploads(keyed, index_dir):
    def send(name: str, data: bytes):
        return keyed.post("/api/documents", files={"files": (name, data)})

    assert "unsupported file type" in error_of(send("notes.txt", b"hello"), 415)
    assert "unsupported file type" in error_of(send("page.html", b"<p>hi</p>"), 415)
    assert "not a PDF" in error_of(send("fake.pdf", b"MZ\x90\x00 not a pdf"), 415)
    assert "not an image" in error_of(send("fake.png", b"\x00" * 64), 415)
    assert "larger than the limit of 1 MB" in error_of(send("big.pdf", b"%PDF-1.4\n" + b"0" * (2 << 20)), 413)
    refused = keyed.post(
        "/api/documents", files={"files": ("a.png", png_bytes())}, data={"meta": "no-equals"}
    )
    assert "meta must be KEY=VALUE, got 'no-equals'" in error_of(refused, 422)
    refused = keyed.post("/api/documents", files={"files": ("a.png", png_bytes())}, data={"language": "xx"})
    assert "unknown language 'xx'" in error_of(refused, 422)
    assert not (index_dir / "uploads" / "a.png").exists()
    assert not (index_dir / "uploads" / "notes.txt").exists()

    # a damaged PDF passes the checks and fails alone in ingestion, beside a good file
    files = [("files", ("damaged.pdf", b"%PDF-1.7\n1 0 obj <<\n" + b"\x00garbage" * 50)),
             ("files", ("../../blank.png", png_bytes()))]  # fmt: skip
    sent = keyed.post("/api/documents", files=files)
    assert sent.status_code == 202, sent.text
    job = wait_for(keyed, sent.json()["job"])
    assert job["state"] == "done" and job["files"] == ["damaged.pdf", "blank.png"]
    (failure,) = job["failed"]
    assert failure["file"] == "damaged.pdf" and failure["reason"] and "Traceback" not in failure["reason"]
    assert job["added"] == ["blank"]
    assert (index_dir / "uploads" / "blank.png").exists() and not (index_dir.parent / "blank.png").exists()
    assert keyed.delete("/api/documents/blank").status_code == 200


# The API key ---------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_without_a_key_reads_are_open_and_writes_refused(open_server):
    assert open_server.get("/api/search", params={"q": "revenue"}).status_code == 200
    assert open_server.get("/api/status").json()["writable"] is False
    refused = error_of(open_server.post("/api/documents", files={"files": ("a.pdf", b"%PDF-1.4")}), 403)
    assert "--api-key" in refused and "PAGESIGHT_API_KEY" in refused
    error_of(open_server.delete("/api/documents/quarterly-report"), 403)
    assert open_server.get("/api/documents/quarterly-report").status_code == 200


@pytest.mark.timeout(60)
def test_with_a_key_every_api_request_needs_it(keyed):
    bare = {"Authorization": ""}
    for method, path in [("GET", "/api/search?q=revenue"), ("GET", "/api/documents"), ("GET", "/api/status"),
                         ("GET", "/api/page?doc=quarterly-report&page=1"), ("POST", "/api/ask"),
                         ("DELETE", "/api/documents/quarterly-report"), ("POST", "/api/documents")]:  # fmt: skip
        response = keyed.request(method, path, headers=bare)
        assert "API key" in error_of(response, 401)
        assert response.headers["www-authenticate"] == "Bearer"
    for wrong in (
        {"Authorization": "Bearer nope"},
        {"X-API-Key": KEY[:-1]},
        {"Authorization": f"Basic {KEY}"},
    ):
        error_of(keyed.get("/api/documents", headers=wrong), 401)
    assert keyed.get("/api/documents", headers={"Authorization": "", "X-API-Key": KEY}).status_code == 200
    assert keyed.get("/api/health", headers=bare).status_code == 200
    page = keyed.get("/", headers=bare)
    assert page.status_code == 200 and "<title>pagesight</title>" in page.text
    assert keyed.get("/static/app.js", headers=bare).status_code == 200
    assert keyed.get("/api/documents/quarterly-report").status_code == 200  # nothing was deleted


# The command ---------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_serve_command_refuses_an_open_network_address(index_dir):
    result = cli("serve", "--index", str(index_dir), "--host", "0.0.0.0", check=False)
    assert result.returncode == 2 and "--api-key" in result.stderr
    result = cli("serve", "--index", str(index_dir / "missing"), check=False)
    assert result.returncode == 2 and "no pagesight index" in result.stderr
