"""Questions about a picture (PixelRAG's EVQA, PixSearch's CRAG-MM): the picture is searched with the
question (jointly by an encoder that embeds both, here a tiny random-weight Qwen3-VL-Embedding; alone
by one that does not, a tiny CLIP, fused with the text search), given to a model reader beside the
tiles, and taken by `ask --image`, `/api/ask`, the MCP tools and eval's datasets. The model reader's
replies come from a real local server speaking the OpenAI chat API, scripted."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import anyio
import numpy as np
import pytest
from PIL import Image

from pagesight import Index
from pagesight.answer.ask import ask
from pagesight.answer.base import Reading
from pagesight.answer.context import image_tokens
from pagesight.answer.prompts import CLOSED_BOOK
from pagesight.errors import InputError, PagesightError
from pagesight.request import AskRequest, SearchRequest
from pagesight.settings import Settings
from tests.answer import test_openai_reader as chat
from tests.answer.test_openai_reader import Reply, completion, decode_png, reader_for
from tests.conftest import cli

pytest.importorskip("torch")
pytest.importorskip("transformers")

from fastapi.testclient import TestClient  # noqa: E402
from mcp import Client  # noqa: E402

from pagesight import frontends  # noqa: E402
from pagesight.encode.visual import make_encoder  # noqa: E402
from pagesight.eval.dataset import Dataset  # noqa: E402
from pagesight.eval.runner import SearchGrid, evaluate_dataset  # noqa: E402
from pagesight.serve.app import create_app  # noqa: E402
from pagesight.serve.mcp import build_server  # noqa: E402
from tests import test_visual_index as visual  # noqa: E402
from tests.encode.visual.conftest import build_qwen  # noqa: E402

corpus, clip_folder, clip_index = visual.corpus, visual.clip_folder, visual.clip_index  # tiny CLIP
serve = chat.serve  # the fixture starting a scripted chat server

pytestmark = pytest.mark.timeout(180)

QUESTION = "Which warehouse is this?"
TILES = [("memo", 1, 0), ("report", 1, 0), ("report", 2, 0)]  # one tile a page


@pytest.fixture(scope="module")
def photo(clip_index) -> Image.Image:
    """The picture asked about: most of the second report page, as a photograph of it would be."""
    page = clip_index.tile_image("report", 2, 0)
    return page.crop((20, 20, page.width - 20, page.height - 40))


def png(image: Image.Image, format: str = "PNG") -> str:
    buffer = io.BytesIO()
    image.save(buffer, format=format)
    return base64.b64encode(buffer.getvalue()).decode()


def ranked(hits) -> list[tuple[str, int, float]]:
    return [(hit.page_id, hit.tile, round(hit.score, 5)) for hit in hits]


def test_an_encoder_of_images_alone_searches_the_picture_fused_with_the_question(clip_index, photo):
    assert clip_index.info()["query_image"] == "image alone"
    alone = {hit.page_id: hit.score for hit in clip_index.search_image(photo, k=3)}
    visual = clip_index.search(SearchRequest(QUESTION, k=3, mode="visual", document_weight=0), image=photo)
    assert {hit.page_id: hit.score for hit in visual} == pytest.approx(alone)  # the picture alone
    assert visual[0].page_id == "report_2"
    fused = clip_index.search("Warehouse Delta", k=3, image=photo)
    assert all(set(hit.scores) <= {"bm25", "visual"} for hit in fused) and fused[0].page_id == "report_2"
    assert {hit.page_id: hit.scores["visual"] for hit in fused} == pytest.approx(alone)
    assert "bm25" in fused[0].scores and "Warehouse Delta" in fused[0].snippet  # the question's lines
    region = (0, 0, photo.width // 2, photo.height // 2)
    request = SearchRequest(QUESTION, k=3, mode="visual", document_weight=0)
    by_region = clip_index.search(request, image=photo, region=region)
    assert ranked(by_region) == ranked(clip_index.search_image(photo, 3, region=region))
    with pytest.raises(PagesightError, match="mode lexical searches by text alone"):
        clip_index.search(QUESTION, mode="lexical", image=photo)
    with pytest.raises(PagesightError, match="a region is a part of a query image"):
        clip_index.search(QUESTION, region=region)
    with pytest.raises(PagesightError, match="not inside the"):
        clip_index.search(QUESTION, image=photo, region=(0, 0, photo.width + 1, 5))


def test_an_index_without_visual_vectors_searches_no_picture(lexical_samples, photo):
    assert lexical_samples.info()["query_image"] is None
    with pytest.raises(PagesightError, match="index has no visual vectors to search a question image by"):
        lexical_samples.search(QUESTION, image=photo)


def test_a_joint_encoder_embeds_the_picture_with_the_question(tmp_path, corpus, photo):
    build_qwen(tmp_path / "qwen3", "qwen3-vl", *_qwen3_classes())
    settings = Settings(
        dense_model=None, visual_encoder="qwen3-vl-embedding", visual_model=str(tmp_path / "qwen3")
    )
    with Index.open(tmp_path / "ix", settings=settings, device="cpu") as index:
        assert index.add([corpus], ocr="never", jobs=1).ok
        assert index.info()["query_image"] == "joint with text"
        assert "query image: joint with text" in cli("info", "--index", str(tmp_path / "ix")).stdout
        encoder = make_encoder("qwen3-vl-embedding", model=str(tmp_path / "qwen3"), device="cpu")
        pages = np.stack(encoder.encode_images([index.tile_image(*tile) for tile in TILES]))
        joint = pages @ encoder.encode_image_text_queries([photo], [QUESTION])[0]
        alone = pages @ encoder.encode_image_queries([photo])[0]
        assert not np.allclose(joint, alone, atol=1e-3)  # the question changes the query
        hits = index.search(SearchRequest(QUESTION, k=3, mode="visual", document_weight=0), image=photo)
        assert {(h.doc_id, h.page, h.tile): h.score for h in hits} == pytest.approx(
            dict(zip(TILES, joint.tolist())), abs=2e-3
        )


def _qwen3_classes():
    import transformers

    return transformers.Qwen3VLForConditionalGeneration, transformers.Qwen3VLProcessor


def test_ask_searches_the_picture_and_shows_it_to_a_model_reader(clip_index, photo, serve):
    server = serve(Reply(completion('Warehouse Delta. <bboxes image="1">[[0, 0, 1000, 500]]</bboxes>')))
    answer = clip_index.ask(QUESTION, reader_for(server), k=2, image=photo)
    expected = clip_index.search(QUESTION, k=2, image=photo)
    assert ranked(answer.hits) == ranked(expected)
    assert answer.text == "Warehouse Delta." and answer.citations[0].page_id == expected[0].page_id
    (request,) = server.requests
    system, user = request["body"]["messages"]
    assert "The question comes with an image of its own" in system["content"]
    parts = user["content"]
    assert [part["type"] for part in parts] == ["text", "image_url"] * 3 + ["text"]
    assert [parts[0]["text"], parts[2]["text"], parts[4]["text"]] == [
        f"Image 1: {expected[0].doc_id} page {expected[0].page} tile 0",
        f"Image 2: {expected[1].doc_id} page {expected[1].page} tile 0",
        "The question's image:",
    ]
    assert decode_png(parts[5]).convert("RGB").tobytes() == photo.tobytes()  # after the tiles
    assert parts[6]["text"] == f"Question: {QUESTION}"
    tiles = sum(image_tokens(*clip_index.tile_image(h.doc_id, h.page, h.tile).size) for h in expected)
    assert answer.usage["image_tokens"] == tiles + image_tokens(*photo.size)
    assert "warnings" not in answer.usage


class PagesOnly:
    """A reader of images whose ``read`` takes no question image (a plug-in written before one could)."""

    name, inputs, max_images = "pages-only", "images", None

    def read(self, question, context) -> Reading:
        return Reading("")


def test_readers_that_cannot_be_shown_the_picture_are_refused_and_none_is_shown_without_pages(
    clip_index, photo, serve
):
    with pytest.raises(PagesightError, match="reader 'pages-only' takes no question image"):
        clip_index.ask(QUESTION, PagesOnly(), image=photo)
    server = serve(Reply(completion("Warehouse Delta.")))
    with pytest.raises(PagesightError, match="takes one image a call: none is left for a tile"):
        clip_index.ask(QUESTION, reader_for(server, max_images=1), image=photo)
    closed = ask(clip_index, AskRequest(QUESTION), reader_for(server), image=photo, closed_book=True)
    assert closed.text == "Warehouse Delta." and closed.hits == []
    (request,) = server.requests  # the no-retrieval baseline: the question and its picture alone
    system, user = request["body"]["messages"]
    assert system["content"].startswith(CLOSED_BOOK) and "an image of its own" in system["content"]
    assert [part["type"] for part in user["content"]] == ["text", "image_url", "text"]


def test_the_extractive_reader_answers_from_the_tiles_the_picture_found(clip_index, photo):
    answer = clip_index.ask("How many orders a day does the warehouse ship?", k=2, image=photo)
    assert ranked(answer.hits) == ranked(
        clip_index.search("How many orders a day does the warehouse ship?", k=2, image=photo)
    )
    assert "1,200" in answer.text
    assert answer.usage["warnings"] == [
        "reader 'extractive' reads text: it did not look at the question image"
    ]
    with pytest.raises(PagesightError, match="a region is a part of the question image"):
        clip_index.ask(QUESTION, region=(0, 0, 5, 5))
    with pytest.raises(PagesightError, match="an agent chooses the regions"):
        clip_index.ask(QUESTION, agent=True, image=photo, region=(0, 0, 5, 5))


def test_ask_image_on_the_command_line(clip_index, photo, serve, tmp_path):
    picture = tmp_path / "photo.png"
    photo.save(picture)
    index = str(clip_index.root)
    region = (0, 0, photo.width // 2, photo.height // 2)
    server = serve(Reply(completion("Warehouse Delta.")))
    shown = cli(
        "ask", QUESTION, "--index", index, "-k", "2", "--image", str(picture), "--region", "0,0,{},{}".format(*region[2:]),
        "--reader", "openai", "--base-url", server.base_url, "--model", "tiny-vl", "--json",
    )  # fmt: skip
    answer = json.loads(shown.stdout)
    expected = clip_index.search(QUESTION, k=2, image=photo, region=region)
    assert [(h["page_id"], round(h["score"], 5)) for h in answer["hits"]] == [
        (h.page_id, round(h.score, 5)) for h in expected
    ]
    parts = server.requests[0]["body"]["messages"][1]["content"]
    assert decode_png(parts[-2]).convert("RGB").tobytes() == photo.tobytes()  # the whole picture shown
    extractive = cli("ask", QUESTION, "--index", index, "--image", str(picture))
    assert "note: reader 'extractive' reads text: it did not look at the question image" in extractive.stderr
    stray = cli("ask", QUESTION, "--index", index, "--region", "0,0,5,5", check=False)
    assert stray.returncode == 2 and "--region needs --image" in stray.stderr
    both = cli(
        "search",
        "Warehouse Delta",
        "--index",
        index,
        "--image",
        str(picture),
        "-k",
        "2",
        "--device",
        "cpu",
        "--json",
    )
    assert [h["page_id"] for h in json.loads(both.stdout)] == [
        h.page_id for h in clip_index.search("Warehouse Delta", k=2, image=photo)
    ]


def test_api_ask_takes_a_picture_as_base64(clip_index, photo, monkeypatch):
    question = "How many orders a day does the warehouse ship?"
    expected = clip_index.ask(question, k=2, image=photo)
    with TestClient(create_app(Index.open(clip_index.root, create=False), readers=1)) as client:
        sent = client.post("/api/ask", json={"question": question, "k": 2, "image": png(photo)})
        assert sent.status_code == 200, sent.text
        data = sent.json()
        assert [(h["page_id"], round(h["score"], 5)) for h in data["hits"]] == [
            (h.page_id, round(h.score, 5)) for h in expected.hits
        ]
        assert data["text"] == expected.text and data["usage"]["warnings"] == expected.usage["warnings"]
        as_url = client.post(
            "/api/ask",
            json={
                "question": question,
                "k": 2,
                "image": "data:image/png;base64," + png(photo),
                "stream": True,
            },
        )
        events = [json.loads(line) for line in as_url.text.splitlines()]
        kinds = [event["event"] for event in events]  # the answer's text streamed between
        assert kinds[0] == "hits" and kinds[-1] == "answer" and set(kinds[1:-1]) <= {"text"}, kinds
        assert [h["page_id"] for h in events[0]["hits"]] == [h.page_id for h in expected.hits]
        jpeg = client.post("/api/ask", json={"question": question, "k": 2, "image": png(photo, "JPEG")})
        assert jpeg.status_code == 200, jpeg.text

        def refused(body: dict, status: int) -> str:
            answered = client.post("/api/ask", json={"question": question, **body})
            assert answered.status_code == status, answered.text
            return answered.json()["error"]

        assert "image: not base64 text" in refused({"image": "not an image!"}, 415)
        assert "image: a GIF image; send PNG or JPEG" in refused({"image": png(photo, "GIF")}, 415)
        assert "region must be x0,y0,x1,y1" in refused({"image": png(photo), "region": "1,2,3"}, 422)
        assert "send the image too" in refused({"region": "0,0,5,5"}, 422)
        monkeypatch.setattr(frontends, "MAX_QUERY_BYTES", 1000)
        assert "more than a query image's 1,000 bytes" in refused({"image": png(photo)}, 415)
    with TestClient(
        create_app(Index.open(clip_index.root, create=False), readers=1, max_upload_mb=0.01)
    ) as small:
        too_big = small.post("/api/ask", json={"question": question, "image": png(photo)})
        assert too_big.status_code == 413  # the server's body limit holds for pictures too


def test_the_mcp_tools_take_a_picture(clip_index, photo):
    async def session(client):
        found = await client.call_tool("search", {"query": "Warehouse Delta", "k": 2, "image": png(photo)})
        answered = await client.call_tool(
            "ask", {"question": "How many orders a day?", "k": 2, "image": png(photo)}
        )
        broken = await client.call_tool("ask", {"question": "How many orders a day?", "image": "%%%"})
        stray = await client.call_tool("search", {"query": "Warehouse Delta", "region": "0,0,5,5"})
        return found, answered, broken, stray

    async def main():
        async with Client(build_server(clip_index)) as client:
            return await session(client)

    found, answered, broken, stray = anyio.run(main)
    assert not found.is_error, found.content
    expected = clip_index.search("Warehouse Delta", k=2, image=photo)
    assert [(h["page_id"], round(h["score"], 5)) for h in found.structured_content["hits"]] == [
        (h.page_id, round(h.score, 5)) for h in expected
    ]
    assert not answered.is_error, answered.content
    assert answered.structured_content["usage"]["warnings"] == [
        "reader 'extractive' reads text: it did not look at the question image"
    ]
    assert broken.is_error and "image: not base64 text" in broken.content[0].text
    assert stray.is_error and "give the image too" in stray.content[0].text


def make_dataset(folder: Path, corpus: Path, photo: Image.Image, image: str = "photos/q1.png") -> Path:
    (folder / "pdfs").mkdir(parents=True)
    for pdf in corpus.iterdir():
        (folder / "pdfs" / pdf.name).write_bytes(pdf.read_bytes())
    (folder / "photos").mkdir()
    photo.save(folder / "photos" / "q1.png")
    queries = [
        {"_id": "q0", "text": "Who replaces Brightmere Supply?"},
        {"_id": "q1", "text": QUESTION, "image": image},
    ]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(row) for row in queries) + "\n")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq0\tmemo_1\t1\nq1\treport_2\t1\n")
    answers = [{"_id": "q0", "answer": "Halvorsen Glassworks"}, {"_id": "q1", "answer": "Warehouse Delta"}]
    (folder / "answers.jsonl").write_text("\n".join(json.dumps(row) for row in answers) + "\n")
    return folder


def test_a_dataset_with_a_question_image_loads_and_evaluates(tmp_path, corpus, clip_folder, photo, serve):
    data = Dataset.load(make_dataset(tmp_path / "data", corpus, photo))
    assert data.images == {"q1": tmp_path / "data" / "photos" / "q1.png"}
    assert data.image("q0") is None and data.image("q1").tobytes() == photo.tobytes()
    missing = make_dataset(tmp_path / "missing", corpus, photo, image="photos/absent.png")
    with pytest.raises(InputError, match=r"queries.jsonl:2: image 'photos/absent.png': no such file"):
        Dataset.load(missing)

    settings = Settings(dense_model=None, visual_encoder="clip", visual_model=str(clip_folder))
    Index.open(tmp_path / "ix", settings=settings, device="cpu").close()
    server = serve(Reply(completion("Warehouse Delta.")))
    evaluation = evaluate_dataset(
        data, index=tmp_path / "ix", searches=SearchGrid(modes=("visual", "lexical")), reader="openai",
        reader_options={"base_url": server.base_url, "model": "tiny-vl"},
    )  # fmt: skip
    visual, lexical = evaluation.results
    assert visual.run["q1"][0][0] == "report_2"  # the picture found its page
    with Index.open(tmp_path / "ix", create=False, device="cpu") as index:
        expected = index.search(SearchRequest(QUESTION, k=100, mode="visual"), image=photo, evidence=False)
        assert [page for page, _ in visual.run["q1"]] == list(dict.fromkeys(h.page_id for h in expected))
        by_text = index.search(SearchRequest(QUESTION, k=100, mode="lexical"), evidence=False)
        assert [page for page, _ in lexical.run["q1"]] == list(dict.fromkeys(h.page_id for h in by_text))
    (answered,) = evaluation.answer_grid
    assert [row["id"] for row in answered.rows] == ["q0", "q1"]
    asked = [request["body"]["messages"][1]["content"] for request in server.requests]
    assert not any(part.get("text") == "The question's image:" for part in asked[0])
    assert decode_png(asked[1][-2]).convert("RGB").tobytes() == photo.tobytes()
    assert answered.rows[1]["right"] and answered.rows[1]["gold_in_context"]
