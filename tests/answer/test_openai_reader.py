"""The ``openai`` reader against a real local HTTP server speaking the OpenAI chat API.

The server (standard library, one per test) records every request and answers with
chat.completion JSON shaped like what vLLM and the OpenAI API return, or with the errors they send.
"""

from __future__ import annotations

import base64
import io
import json
import math
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageDraw
from reportlab.pdfgen.canvas import Canvas

from pagesight.answer import ContextItem, make_reader
from pagesight.answer.openai_chat import OpenAIReader, answer_logprob
from pagesight.answer.prompts import numbered_lines, parse_lines, printed_lines, strip_thinking
from pagesight.answer.strategies import run
from pagesight.errors import PagesightError
from pagesight.eval.judges import openai_judge
from pagesight.eval.typeset import PAGE, draw_table
from pagesight.records import Hit, Span, union
from pagesight.render.tiles import downscale
from pagesight.text.textlayer import text_layer_spans
from tests.text.test_tables import COSTS

MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"
QUESTION = "By how much did revenue grow in 2023?"
NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


@dataclass
class Reply:
    body: dict | str  # a str is sent as an HTML page
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before replying (cut short when the server closes)


class ChatServer:
    """``POST /v1/chat/completions`` on 127.0.0.1; replies in order, the last one repeating."""

    def __init__(self, replies: list[Reply]):
        self.replies = list(replies)
        self.requests: list[dict] = []  # path, headers (lower-case names), body
        self.release = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.chat = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def next_reply(self) -> Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        chat: ChatServer = self.server.chat
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        headers = {name.lower(): value for name, value in self.headers.items()}
        chat.requests.append({"path": self.path, "headers": headers, "body": body})
        if self.path == "/v1/chat/completions":
            reply = chat.next_reply()
        else:
            reply = Reply({"detail": "Not Found"}, status=404)  # what vLLM's FastAPI answers
        chat.release.wait(reply.delay)
        html = isinstance(reply.body, str)
        payload = reply.body.encode() if html else json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/html" if html else "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def log_message(self, format: str, *args) -> None:
        pass


def completion(
    content: str | None,
    *,
    finish_reason: str = "stop",
    refusal: str | None = None,
    logprobs: list[tuple[str, float]] | None = None,
) -> dict:
    """A chat.completion body as a server sends it."""
    token_logprobs = None
    if logprobs is not None:
        token_logprobs = {
            "content": [
                {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
                for t, lp in logprobs
            ],
            "refusal": None,
        }
    return {
        "id": "chatcmpl-8c1f6a2e94d04b7f",
        "object": "chat.completion",
        "created": 1732330000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal, "tool_calls": []},
                "logprobs": token_logprobs,
                "finish_reason": finish_reason,
                "stop_reason": None,
            }
        ],
        "usage": {"prompt_tokens": 812, "completion_tokens": 31, "total_tokens": 843},
        "system_fingerprint": None,
    }


def error(message: str, kind: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


@pytest.fixture
def serve():
    servers: list[ChatServer] = []

    def start(*replies: Reply) -> ChatServer:
        servers.append(ChatServer(list(replies)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def reader_for(server: ChatServer, **options) -> OpenAIReader:
    settings = {"model": MODEL, "base_url": server.base_url, "api_key": "sk-test", "max_retries": 0}
    return OpenAIReader(**{**settings, "timeout": 5.0, "max_tokens": 256, **options})


class Page:
    """A page drawn with PIL; ``item`` gives one tile of it as a reader's context item."""

    def __init__(self, doc_id: str, lines: list[str], size: tuple[int, int] = (400, 300), mode: str = "RGB"):
        self.doc_id, self.lines, self.size, self.mode = doc_id, lines, size, mode
        self.renders = 0

    def item(
        self, tile_box: tuple[int, int, int, int] | None = None, compression: float = 1.0
    ) -> ContextItem:
        width, height = self.size
        tile_box = tile_box or (0, 0, width, height)
        spans = [
            Span(text, (20.0, 20.0 + 30 * i, 380.0, 44.0 + 30 * i), "pdf")
            for i, text in enumerate(self.lines)
        ]
        hit = Hit(
            doc_id=self.doc_id,
            page=1,
            tile=0,
            score=1.0,
            scores={},
            snippet="",
            boxes=[],
            page_size=self.size,
            tile_box=tile_box,
        )
        return ContextItem(
            hit=hit,
            spans=spans,
            compression=compression,
            load_image=lambda: self.render(tile_box, compression),
        )

    def render(self, tile_box: tuple[int, int, int, int], compression: float) -> Image.Image:
        self.renders += 1
        image = Image.new("RGB", self.size, "white")
        draw = ImageDraw.Draw(image)
        for i, text in enumerate(self.lines):
            draw.text((20, 22 + 30 * i), text, fill="black")
        return downscale(image.crop(tile_box), compression).convert(self.mode)


def user_parts(request: dict) -> list[dict]:
    messages = request["body"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def decode_png(part: dict) -> Image.Image:
    assert part["type"] == "image_url"
    prefix, _, data = part["image_url"]["url"].partition(",")
    assert prefix == "data:image/png;base64"
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    assert image.format == "PNG"
    return image


def test_images_are_sent_as_png_parts_and_cited_boxes_come_back_in_page_pixels(serve):
    server = serve(
        Reply(completion('Revenue grew 12% in 2023. <bboxes image="1">[[100, 200, 500, 600]]</bboxes>'))
    )
    report = Page("report", ["Annual report 2023", "Revenue grew 12% in 2023."])
    memo = Page("memo", ["Office closed on Friday"], mode="RGBA")  # sent as RGB
    context = [report.item(), memo.item()]

    reading = reader_for(server).read(QUESTION, context)

    assert reading.text == "Revenue grew 12% in 2023."
    assert reading.cited == {0: [(40.0, 60.0, 200.0, 180.0)]}  # 0..1000 of a 400 x 300 image
    assert reading.logprob is None
    assert reading.usage == {"prompt_tokens": 812, "completion_tokens": 31}
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer sk-test"
    assert request["headers"]["content-type"] == "application/json"
    body = request["body"]
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert body["max_tokens"] == 256
    assert "logprobs" not in body
    system = body["messages"][0]["content"]
    assert '<bboxes image="N">' in system and "0 to 1000" in system and "cannot be found" in system
    parts = user_parts(request)
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "image_url", "text"]
    assert parts[0]["text"] == "Image 1: report page 1 tile 0"
    assert parts[2]["text"] == "Image 2: memo page 1 tile 0"
    assert parts[4]["text"] == f"Question: {QUESTION}"
    for part, item in zip((parts[1], parts[3]), context):
        image = decode_png(part)
        assert (image.mode, image.size) == ("RGB", (400, 300))
        assert image.tobytes() == item.image.convert("RGB").tobytes()
    assert report.renders == memo.renders == 1


def test_pixel_coordinates_on_a_compressed_tile_map_to_the_page(serve):
    answer = (
        'It grew 12%. <bboxes image="1">[[20, 30, 120, 60]]</bboxes>'
        '<bboxes image="3">[[1, 2, 3, 4]]</bboxes><bboxes image="1">[[50, 50, 10, 10]]</bboxes>'
    )
    server = serve(Reply(completion(answer, finish_reason="length")))
    page = Page("report", ["Revenue grew 12% in 2023."], size=(400, 900))
    item = page.item(tile_box=(0, 300, 400, 600), compression=4)  # each side halved: 200 x 150

    reading = reader_for(server, coordinates="pixels").read(QUESTION, [item])

    assert reading.text == "It grew 12%."
    assert reading.cited == {0: [(40.0, 360.0, 240.0, 420.0)]}
    warnings = reading.usage["warnings"]
    assert any("image 3" in w for w in warnings)
    assert any("inverted" in w for w in warnings)
    assert any("max_tokens=256" in w for w in warnings)
    parts = user_parts(server.requests[0])
    assert parts[0]["text"] == "Image 1: report page 1 tile 0 (200x150 pixels)"
    assert decode_png(parts[1]).size == (200, 150)
    assert "in pixels of the image" in server.requests[0]["body"]["messages"][0]["content"]


def test_text_inputs_send_the_tile_text_without_rendering_and_cite_lines(serve):
    server = serve(Reply(completion('Revenue grew 12%. <lines passage="1">[2]</lines>')))
    report = Page("report", ["Annual report 2023", "Revenue grew 12% in 2023."])
    memo = Page("memo", ["Office closed on Friday"])
    blank = Page("blank", [])
    context = [report.item(), memo.item(), blank.item()]

    reading = reader_for(server, inputs="text").read(QUESTION, context)

    assert reading.text == "Revenue grew 12%."
    assert reading.cited == {0: [(20.0, 50.0, 380.0, 74.0)]}  # the second line's box on the page
    assert reading.quotes == {0: "Revenue grew 12% in 2023."}
    assert report.renders == memo.renders == blank.renders == 0
    (request,) = server.requests
    assert "image_url" not in json.dumps(request["body"])
    system, user = request["body"]["messages"]
    assert '<lines passage="N">' in system["content"]
    assert user["content"] == (
        "Passage 1: report page 1 tile 0\n[1] Annual report 2023\n[2] Revenue grew 12% in 2023.\n\n"
        "Passage 2: memo page 1 tile 0\n[1] Office closed on Friday\n\n"
        "Passage 3: blank page 1 tile 0\n(no text)\n\n"
        f"Question: {QUESTION}"
    )


def test_text_inputs_give_a_table_as_markdown_whose_rows_cite_their_lines(serve, tmp_path):
    """A typeset table's rows go to a text reader as a Markdown table (each figure under its
    column's heading, which the text layer prints lines above), numbered as the lines they were
    read from; the other lines stay numbered lines, and a cited row gives back its line's box."""
    pdf = Canvas(str(tmp_path / "costs.pdf"), pagesize=PAGE, invariant=True)
    draw_table(pdf, COSTS)
    pdf.showPage()
    pdf.save()
    size = (round(PAGE[0] * 100 / 72), round(PAGE[1] * 100 / 72))
    spans = text_layer_spans(pdfium.PdfDocument(str(tmp_path / "costs.pdf"))[0], size)
    hit = Hit("costs", 1, 0, 1.0, {}, "", [], size, (0.0, 0.0, *map(float, size)))
    server = serve(Reply(completion('298 million. <lines passage="1">[8]</lines>')))

    reading = reader_for(server, inputs="text").read(QUESTION, [ContextItem(hit=hit, spans=spans)])

    (request,) = server.requests
    passage = request["body"]["messages"][1]["content"].split("\n\nQuestion:")[0].split("\n")
    assert passage[:5] == [
        "Passage 1: costs page 1 tile 0",
        "[1] Table 1. Consolidated costs",
        "[2] (in millions)",
        "[3] Year ended December 31,",
        "[4] 2024 2023 2022",
    ]
    assert passage[5] == "| line |  | 2024 | 2023 | 2022 |"  # each column's nearest heading
    assert passage[6] == "| --- | --- | --- | --- | --- |"
    assert passage[10] == "| [8] | Interest expense (1) | 312 | 298 | 305 |"
    assert passage[12] == "[10] (1) Restated for the change in accounting policy described in Note 2."
    assert not any(line.startswith("[8] ") for line in passage)  # the row is in the table only
    assert reading.text == "298 million."
    _, pieces = printed_lines(spans)[7]  # the row's label and its figures, apart on the page
    assert len(pieces) > 1
    assert reading.cited == {0: [union([tuple(spans[i].box) for i in pieces])]}
    assert reading.quotes == {0: "Interest expense (1) 312 298 305"}


def test_a_table_read_cell_by_cell_numbers_each_row_with_its_cells_lines():
    """OCR gives a row as a label and its cells apart: the row lists every line it was read from,
    and citing them gives every cell's box."""
    cells = [("", 200, 260), ("2024", 300, 340), ("2023", 380, 420)]
    cells += [("Net sales", 20, 100), ("9,120", 300, 340), ("8,450", 380, 420)]
    cells += [("Interest expense", 20, 160), ("312", 310, 340), ("298", 390, 420)]
    spans = [
        Span(text, (x0, 20.0 + 30 * (i // 3), x1, 40.0 + 30 * (i // 3)), "ocr")
        for i, (text, x0, x1) in enumerate(cells)
        if text
    ]
    item = Page("scan", []).item()
    item.spans = spans

    assert numbered_lines(item).split("\n") == [
        "[1] 2024",
        "[2] 2023",
        "| line |  | 2024 | 2023 |",
        "| --- | --- | --- | --- |",
        "| [3, 4, 5] | Net sales | 9,120 | 8,450 |",
        "| [6, 7, 8] | Interest expense | 312 | 298 |",
    ]
    _, cited, quotes, problems = parse_lines('<lines passage="1">[6, 7, 8]</lines>', [item])
    assert cited == {0: [spans[5].box, spans[6].box, spans[7].box]} and not problems
    assert quotes == {0: "Interest expense\n312\n298"}


def test_a_heading_over_every_column_is_left_to_its_numbered_line():
    """A text-layer line of several headings reads as one heading over every column: the table's
    header row leaves it out rather than repeating it, and the line stays numbered above."""
    lines = ["Model Output Length Search Count", "QwQ-32B 7.933 2.390", "QwQ-32B-SFT 4.051 2.329"]
    item = Page("paper", lines).item()

    assert numbered_lines(item).split("\n") == [
        "[1] Model Output Length Search Count",
        "| line |  |  |  |",
        "| --- | --- | --- | --- |",
        "| [2] | QwQ-32B | 7.933 | 2.390 |",
        "| [3] | QwQ-32B-SFT | 4.051 | 2.329 |",
    ]


def test_text_citations_of_unknown_passages_or_lines_are_reported(serve):
    answer = (
        'No. <lines passage="2">[1]</lines><lines passage="1">[1, 7]</lines><lines passage="1">one</lines>'
    )
    server = serve(Reply(completion(answer)))
    reading = reader_for(server, inputs="text").read(QUESTION, [Page("memo", ["Office closed"]).item()])

    assert reading.text == "No."
    assert reading.cited == {0: [(20.0, 20.0, 380.0, 44.0)]}
    assert len(reading.usage["warnings"]) == 3


def test_images_plus_text_sends_both(serve):
    server = serve(Reply(completion("12%.")))
    page = Page("report", ["Revenue grew 12% in 2023."])

    reading = reader_for(server, inputs="images+text").read(QUESTION, [page.item()])

    assert reading.text == "12%."
    parts = user_parts(server.requests[0])
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "text"]
    assert decode_png(parts[1]).size == (400, 300)
    assert parts[2]["text"] == "Text of image 1:\nRevenue grew 12% in 2023."


def test_logprobs_are_requested_and_summed_over_the_answer_without_the_tags(serve):
    tokens = [
        ("The", -0.1),
        (" answer", -0.2),
        (" is", -0.3),
        (" 42", -0.4),
        (".", -0.05),
        (" ", -0.5),
        ('<bboxes image="1">', -2.0),
        ("[[0, 0, 10, 10]]", -3.0),
        ("</bboxes>", -1.0),
    ]
    content = "".join(t for t, _ in tokens)
    server = serve(Reply(completion(content, logprobs=tokens)), Reply(completion("42.")))
    reader = reader_for(server, logprobs=True)
    item = Page("report", ["The answer is 42."]).item()

    reading = reader.read(QUESTION, [item])
    assert reading.text == "The answer is 42."
    assert reading.logprob == pytest.approx(-1.05)  # the space before the tag is the tag's
    assert reading.tokens == 5
    assert server.requests[0]["body"]["logprobs"] is True

    silent = reader.read(QUESTION, [item])  # a server that ignores the logprobs flag
    assert silent.logprob is None
    assert silent.usage["warnings"] == ["logprobs were asked for, but the endpoint returned none"]


def test_visrag_weighted_selection_picks_the_likelier_answer_and_keeps_its_boxes(serve):
    unsure = "It cannot be found in the given pages."
    sure = 'It grew 12%. <bboxes image="1">[[0, 0, 500, 500]]</bboxes>'
    server = serve(
        Reply(completion(unsure, logprobs=[(unsure, -4.0)])),
        Reply(completion(sure, logprobs=[("It grew 12%.", -0.3), (sure.removeprefix("It grew 12%."), -2.0)])),
    )
    context = [Page("memo", ["Office closed"]).item(), Page("report", ["Revenue grew 12%"]).item()]

    reading, shown = run("weighted", reader_for(server, logprobs=True, max_images=1), QUESTION, context)

    assert len(server.requests) == 2 and len(shown) == 2
    assert reading.text == "It grew 12%."
    assert reading.logprob == pytest.approx(-0.3)
    assert reading.cited == {1: [(0.0, 0.0, 200.0, 150.0)]}
    assert reading.usage["prompt_tokens"] == 2 * 812


def test_weighted_selection_scores_answers_by_perplexity_not_by_summed_logprobs(serve):
    short = [("No", -0.9), (".", -0.2)]  # sum -1.1, perplexity exp(0.55)
    longer = [("It", -0.3), (" grew", -0.3), (" 12", -0.3), ("%", -0.3), (" in", -0.3), (" 2023.", -0.3)]
    server = serve(
        Reply(completion("No.", logprobs=short)),
        Reply(completion("It grew 12% in 2023.", logprobs=longer)),  # sum -1.8, perplexity exp(0.3)
    )
    context = [Page("memo", ["Office closed"]).item(), Page("report", ["Revenue grew 12%"]).item()]

    reading, _ = run("weighted", reader_for(server, logprobs=True, max_images=1), QUESTION, context)

    assert reading.text == "It grew 12% in 2023." and reading.tokens == 6
    assert reading.usage["weight"] == pytest.approx(0.5 * math.exp(-0.3))  # equal retrieval scores


def test_thinking_is_dropped_from_the_answer_and_its_log_probabilities(serve):
    tokens = [("<think>", -0.1), ("Maybe 10%? No.", -5.0), ("</think>", -0.1), ("\n", -0.1), ("12%.", -0.2)]
    server = serve(Reply(completion("".join(t for t, _ in tokens), logprobs=tokens)))
    reading = reader_for(server, logprobs=True).read(QUESTION, [Page("report", ["Revenue grew 12%"]).item()])
    assert reading.text == "12%."
    assert (reading.logprob, reading.tokens) == (pytest.approx(-0.3), 2)
    assert strip_thinking("reasoning the template opened</think> 7") == "7"
    assert strip_thinking("<think>cut short") == ""


def test_byte_level_tokens_that_do_not_spell_the_answer_all_count():
    pieces = [("bytes:\\xe2\\x82", -0.5), ("bytes:\\xac", -0.25), (" 5", -1.0)]  # how "€ 5" may come back
    assert answer_logprob(pieces, "€ 5") == (pytest.approx(-1.75), 3)
    spelled = [("€", -0.5), (" 5", -1.0), ('<lines passage="1">[1]</lines>', -4.0)]
    assert answer_logprob(spelled, '€ 5<lines passage="1">[1]</lines>') == (pytest.approx(-1.5), 2)


def test_a_rate_limit_is_retried_after_the_servers_delay(serve):
    limited = Reply(
        error("Rate limit reached", "rate_limit_error"), status=429, headers={"retry-after-ms": "20"}
    )
    server = serve(limited, Reply(completion("12%.")))

    reading = reader_for(server, max_retries=2).read(QUESTION, [Page("report", ["12%"]).item()])

    assert reading.text == "12%."
    assert len(server.requests) == 2
    assert server.requests[0]["body"] == server.requests[1]["body"]


@pytest.mark.parametrize(
    ("status", "body", "detail"),
    [
        (503, error("Model is loading", "ServiceUnavailableError"), "Model is loading"),
        (502, NGINX_502, "502 Bad Gateway 502 Bad Gateway nginx"),
        (503, "", "no details"),
    ],
)
def test_an_overloaded_server_gives_a_clear_error_after_the_retries(serve, status, body, detail):
    server = serve(Reply(body, status=status, headers={"retry-after-ms": "10"}))
    reader = reader_for(server, max_retries=2)

    with pytest.raises(PagesightError) as caught:
        reader.read(QUESTION, [Page("report", ["12%"]).item()])

    message = str(caught.value)
    assert len(server.requests) == 3
    assert "\n" not in message
    for expected in ("overloaded after 3 tries", f"HTTP {status}: {detail}", MODEL, server.base_url):
        assert expected in message


def test_a_server_slower_than_the_timeout_gives_a_clear_error(serve):
    # The reply would come after the test's own time limit: only giving up at 0.5 s passes.
    server = serve(Reply(completion("too late"), delay=600))
    reader = reader_for(server, timeout=0.5)

    with pytest.raises(PagesightError, match=r"no reply within 0\.5 s") as caught:
        reader.read(QUESTION, [Page("report", ["12%"]).item()])

    assert MODEL in str(caught.value)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (completion(None, refusal="I can't help with that."), "the model refused: I can't help with that."),
        (completion("", finish_reason="content_filter"), "content filter"),
        ({**completion("x"), "choices": []}, "no choices"),
        ("<html><body>502 Bad Gateway</body></html>", "not a chat completion: <html><body>502 Bad Gateway"),
    ],
)
def test_refusals_and_empty_replies_are_errors(serve, reply, expected):
    server = serve(Reply(reply))
    with pytest.raises(PagesightError, match=expected) as caught:
        reader_for(server).read(QUESTION, [Page("report", ["12%"]).item()])
    assert server.base_url in str(caught.value)


def test_a_refused_api_key_is_not_retried(serve):
    denied = Reply(
        error("Incorrect API key provided", "invalid_request_error", "invalid_api_key"), status=401
    )
    server = serve(denied)

    with pytest.raises(PagesightError, match="API key was refused") as caught:
        reader_for(server, max_retries=2).chat("Hello")

    assert len(server.requests) == 1
    assert "HTTP 401: Incorrect API key provided" in str(caught.value)


def test_a_base_url_without_the_api_prefix_is_explained(serve):
    server = serve(Reply(completion("unused")))
    reader = reader_for(server, base_url=server.base_url.removesuffix("/v1"))

    with pytest.raises(PagesightError, match=r'HTTP 404: {"detail": "Not Found"}.*/v1'):
        reader.chat("Hello")
    assert server.requests[0]["path"] == "/chat/completions"


def test_a_closed_port_gives_a_connection_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    reader = OpenAIReader(model=MODEL, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=2)

    with pytest.raises(PagesightError, match="cannot connect.*Connection refused") as caught:
        reader.read(QUESTION, [Page("report", ["12%"]).item()])
    assert f"127.0.0.1:{port}" in str(caught.value)


def test_more_images_than_the_reader_takes_is_an_error_before_any_request(serve):
    server = serve(Reply(completion("unused")))
    items = [Page("a", ["x"]).item(), Page("b", ["y"]).item()]

    with pytest.raises(PagesightError, match="at most 1 images, got 2"):
        reader_for(server, max_images=1).read(QUESTION, items)
    assert server.requests == []


def test_options_come_from_the_environment_through_the_registry(serve, monkeypatch):
    server = serve(Reply(completion("Hi.")))
    for name in ("OPENAI_API_KEY", "PAGESIGHT_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # pagesight's own variable wins
    monkeypatch.setenv("PAGESIGHT_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("PAGESIGHT_OPENAI_MODEL", "served-model")

    keyless = make_reader("openai")
    assert (keyless.name, keyless.inputs, keyless.max_images) == ("openai", "images", None)
    assert keyless.chat("Say hi") == "Hi."

    monkeypatch.delenv("PAGESIGHT_OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other")
    monkeypatch.setenv("PAGESIGHT_OPENAI_API_KEY", "sk-env")
    make_reader("openai").chat("Say hi")

    first, second = server.requests
    assert first["headers"]["authorization"] == "Bearer none"
    assert second["headers"]["authorization"] == "Bearer sk-env"
    assert first["body"]["model"] == "served-model"
    assert first["body"]["messages"] == [{"role": "user", "content": "Say hi"}]


def test_a_judge_asks_the_endpoint_at_temperature_zero(serve):
    server = serve(Reply(completion("<think>It says twelve, so CORRECT? No wait.</think>\nNOT_ATTEMPTED")))

    grade = openai_judge("simpleqa", MODEL, server.base_url, "sk-test")(
        QUESTION, ["12%", "twelve percent"], "?"
    )

    assert grade.label == "NOT_ATTEMPTED" and grade.score == 0  # the thinking is not read
    (sent,) = server.requests
    assert sent["body"]["temperature"] == 0 and sent["headers"]["authorization"] == "Bearer sk-test"
    assert "Reference answer: 12% OR twelve percent" in sent["body"]["messages"][0]["content"]


def test_missing_model_bad_options_and_missing_package_are_clear_errors(monkeypatch):
    monkeypatch.delenv("PAGESIGHT_OPENAI_MODEL", raising=False)
    with pytest.raises(PagesightError, match="needs a model.*PAGESIGHT_OPENAI_MODEL"):
        OpenAIReader(base_url="http://127.0.0.1:9/v1")
    with pytest.raises(PagesightError, match="inputs must be one of"):
        OpenAIReader(model=MODEL, inputs="video")
    with pytest.raises(PagesightError, match="coordinates must be one of"):
        OpenAIReader(model=MODEL, coordinates="percent")
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(PagesightError, match=r"pip install 'pagesight\[openai\]'"):
        OpenAIReader(model=MODEL)
