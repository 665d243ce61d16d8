"""Image and image-region search over HTTP, on an index embedded by a tiny random-weight CLIP: the
API ranks as ``Index.search_image`` does."""

from __future__ import annotations

import io
import threading

import httpx
import pytest
from fastapi.testclient import TestClient

from pagesight import Index
from pagesight.serve.app import create_app
from tests.serve.test_app import error_of

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.encode.visual.conftest import clip_report_and_memo  # noqa: E402


@pytest.fixture(scope="module")
def clip_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-clip")
    index = Index.open(root / "index", settings=clip_report_and_memo(root))
    index.device = "cpu"
    report = index.add([root / "report.pdf", root / "memo.pdf"], ocr="never", jobs=1)
    assert report.ok, report.failed
    yield index
    index.close()


@pytest.fixture(scope="module")
def client(clip_index):
    with TestClient(create_app(Index.open(clip_index.root, create=False), readers=2)) as client:
        yield client


def as_png(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.timeout(120)
def test_image_and_region_search_rank_as_the_index_does(client, clip_index):
    query = clip_index.tile_image("report", 2, 0)
    sent = client.post("/api/search/image", files={"image": ("q.png", as_png(query))}, data={"k": "3"})
    assert sent.status_code == 200, sent.text
    expected = clip_index.search_image(query, k=3)
    assert [(h["page_id"], round(h["score"], 5)) for h in sent.json()["hits"]] == [
        (h.page_id, round(h.score, 5)) for h in expected
    ]
    assert sent.json()["hits"][0]["page_id"] == "report_2"

    region = (40, 40, query.width // 2, query.height // 3)
    by_region = client.post("/api/search/image", files={"image": ("q.png", as_png(query))},
                            data={"k": "3", "region": ",".join(map(str, region))})  # fmt: skip
    assert [h["page_id"] for h in by_region.json()["hits"]] == [
        h.page_id for h in clip_index.search_image(query, k=3, region=region)
    ]
    only = client.post("/api/search/image", files={"image": ("q.png", as_png(query))}, data={"doc": "memo"})
    assert {h["doc_id"] for h in only.json()["hits"]} == {"memo"}
    text = client.get("/api/search", params={"q": "Supplier change", "mode": "visual", "k": 2})
    assert text.status_code == 200 and len(text.json()["hits"]) == 2


@pytest.mark.timeout(60)
def test_image_search_refusals(client, clip_index):
    picture = as_png(clip_index.tile_image("memo", 1, 0))
    assert "not an image" in error_of(
        client.post("/api/search/image", files={"image": ("q.png", b"nope")}), 415
    )
    bad_region = client.post(
        "/api/search/image", files={"image": ("q.png", picture)}, data={"region": "1,2,3"}
    )
    assert "region" in error_of(bad_region, 422)
    outside = client.post(
        "/api/search/image", files={"image": ("q.png", picture)}, data={"region": "0,0,9999,10"}
    )
    error_of(outside, 400)
    error_of(client.post("/api/search/image", data={"k": "3"}), 422)
    # CLIP's patches, projected as its class token, draw a map over the square it crops
    plain = client.get("/api/tile", params={"doc": "memo", "page": 1})
    mapped = client.get("/api/tile", params={"doc": "memo", "page": 1, "explain": "supplier"})
    assert mapped.status_code == 200 and mapped.headers["content-type"] == "image/png"
    assert mapped.content != plain.content
    assert client.get("/api/status").json()["index"]["similarity_maps"] is True  # the web page's button


@pytest.mark.timeout(240)
def test_uploads_into_a_visual_index_are_embedded_and_found_by_their_image(tmp_path):
    """The attack that found every upload to a visual index failing: a PDF and an image uploaded
    through the server are rendered for the encoder from where they are staged (their final place
    under ``uploads/`` is filled only after the commit), embedded, and found by their own pictures."""
    from PIL import Image

    from tests.conftest import make_pdf
    from tests.serve.test_attacks import as_, upload, wait_for

    index = Index.open(tmp_path / "index", settings=clip_report_and_memo(tmp_path))
    index.device = "cpu"
    assert index.add([tmp_path / "memo.pdf"], ocr="never", jobs=1).ok
    pdf = make_pdf(
        tmp_path / "ledger.pdf", [["Ledger of glassworks"]], blocks=[(60, 300, 400, 200, (0.8, 0.6, 0.1))]
    )
    picture = Image.new("RGB", (320, 240), (20, 160, 200))
    picture.paste((240, 20, 90), (40, 40, 200, 160))
    key = "operator-key-0123456789"
    try:
        with TestClient(create_app(index, api_key=key, readers=1)) as client:
            sent = upload(client, key, ("ledger.pdf", pdf.read_bytes()), ("swatch.png", as_png(picture)))
            assert sent.status_code == 202, sent.text
            job = wait_for(client, sent.json()["job"]["id"], key, seconds=180)
            assert job["state"] == "done" and job["failed"] == [], job
            assert sorted(job["added"]) == ["ledger", "swatch"]
            for doc in ("ledger", "swatch"):
                tile = client.get("/api/tile", params={"doc": doc, "page": 1}, headers=as_(key))
                assert tile.status_code == 200, tile.text
                found = client.post(
                    "/api/search/image",
                    files={"image": ("q.png", tile.content, "image/png")},
                    data={"k": "1"},
                    headers=as_(key),
                )
                assert found.status_code == 200, found.text
                assert found.json()["hits"][0]["doc_id"] == doc
        assert sorted(path.name for path in (index.root / "uploads").glob("[!.]*")) == [
            "ledger.pdf",
            "swatch.png",
        ]
    finally:
        index.close()


@pytest.mark.timeout(180)
def test_a_served_visual_index_loads_its_encoder_at_start_and_encodes_queries_together(clip_index):
    """The query encoder is loaded when the app is made (no first query waits for the model), one
    per process shared by every index of the pool, its queries gathered across request threads;
    each search says where its time went."""
    from concurrent.futures import ThreadPoolExecutor

    from pagesight.encode.visual.batching import QueryBatcher

    served = Index.open(clip_index.root, create=False)
    app = create_app(served, readers=3)
    pool = app.state.served.pool
    with pool.reading() as one, pool.reading() as two:
        encoder = one.visual_encoder()
        assert isinstance(encoder, QueryBatcher) and two.visual_encoder() is encoder
    with TestClient(app) as client:
        queries = ["Quarterly revenue", "Warehouse Delta", "Supplier change"] * 4

        def search(query: str) -> dict:
            answer = client.get("/api/search", params={"q": query, "mode": "visual", "k": "3"})
            assert answer.status_code == 200, answer.text
            return answer.json()

        with ThreadPoolExecutor(6) as threads:
            found = list(threads.map(search, queries))
    for query, payload in zip(queries, found):
        expected = [hit.page_id for hit in clip_index.search(query, mode="visual", k=3)]
        assert [hit["page_id"] for hit in payload["hits"]] == expected
        timings = payload["timings"]
        assert {"wait", "check", "encode", "visual", "evidence", "total"} <= set(timings)
        assert timings["total"] >= timings["encode"] >= 0
    served.close()


@pytest.mark.timeout(120)
def test_query_pictures_an_encoder_would_blow_up_are_refused_before_they_join_a_batch(client):
    """Issue 60, defects 6 and 7: a 200000x1 PNG (666 bytes) cost the encoder 18 s while every
    tenant's visual queries waited (1000000x1: a 500, MemoryError), and a region rounding to no
    pixel failed every query batched with it."""
    from PIL import Image

    for size in ((200_000, 1), (1, 1_000_000), (3_000, 20)):
        thin = Image.new("L", size, 255)
        searched = client.post("/api/search/image", files={"image": ("q.png", as_png(thin))})
        assert "times as long as it is wide" in error_of(searched, 415) or "side over" in searched.text
    picture = as_png(Image.new("RGB", (100, 100), "white"))
    for region in ("10.1,10.1,10.4,60", "10,10,60,10.3"):
        searched = client.post(
            "/api/search/image", files={"image": ("q.png", picture)}, data={"region": region}
        )
        assert "holds no whole pixel" in error_of(searched, 400)
    assert client.post("/api/search/image", files={"image": ("q.png", picture)}).status_code == 200


@pytest.mark.timeout(180)
def test_an_image_search_reranked_by_the_endpoints_model_takes_a_slot(clip_index):
    """Issue 60, defect 5: image search with a question and rerank=vlm-openai took no slot, so one
    key put any number of model calls in flight."""
    from pagesight.serve.offer import ASKS_PER_TENANT, Offer
    from tests.answer.test_openai_reader import ChatServer, Reply
    from tests.serve.live import LiveServer, until
    from tests.serve.test_model_calls import judged

    slow = ChatServer([Reply(judged(), delay=15.0)])
    offer = Offer(readers=("openai",), models=("m1",), base_url=slow.base_url, rerankers=("vlm-openai",))
    app = create_app(
        Index.open(clip_index.root, create=False), api_key="operator-key-0123456789", offer=offer
    )
    live = LiveServer(app)
    key = {"Authorization": "Bearer operator-key-0123456789"}
    picture = as_png(clip_index.tile_image("report", 2, 0))
    form = {"q": "what does this show?", "rerank": "vlm-openai", "rerank_candidates": "1", "k": "1"}

    def search():
        return httpx.post(f"{live.url}/api/search/image", files={"image": ("q.png", picture)}, data=form,
                          headers=key, timeout=60)  # fmt: skip

    waiting = [threading.Thread(target=search) for _ in range(ASKS_PER_TENANT)]
    try:
        for thread in waiting:
            thread.start()
        until(lambda: len(slow.requests) == ASKS_PER_TENANT, 60, "the reranked searches waiting on the model")
        third = search()
        assert third.status_code == 429, third.text
        for thread in waiting:
            thread.join(timeout=60)
        assert app.state.served.asks.running() == 0
    finally:
        slow.close()
        live.stop()
