"""Visual encoders behind an inference server, against a loopback double of vLLM's OpenAI-compatible
server (``vllm_double``: vLLM's documented request and response shapes, its error bodies, 429s)
serving the tiny random-weight models the in-process tests use: the same pages give the same vectors
through the endpoint as in-process; an index built through it is searched in-process and back, and
one of another width is refused; the endpoint's errors, retries, bound and key."""

from __future__ import annotations

import importlib.util
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest

from pagesight import Index
from pagesight.encode.visual import joint_queries, make_encoder
from pagesight.encode.visual.served import COLQWEN3_PAGE, COLQWEN3_QUERY, VERBATIM, served_encoder
from pagesight.encode.vllm_client import EndpointError
from pagesight.endpoints import VisualEndpoint
from pagesight.errors import PagesightError
from pagesight.testing.encoder import assert_encoder_contract
from tests.conftest import cli, make_pdf

from .conftest import build_qwen

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("fastapi")
pytest.importorskip("httpx")
if importlib.util.find_spec("colpali_engine") is None:
    pytest.skip("colpali-engine is not installed", allow_module_level=True)

from pagesight.encode.visual.late_interaction import import_colpali  # noqa: E402

from .vllm_double import Double, Served  # noqa: E402

FAMILIES = {  # encoder: (backbone family, how the double runs it)
    "colqwen3": "qwen3-vl",
    "colqwen3.5": "qwen3.5",
    "qwen3-vl-embedding": "qwen3-vl",
}
AGREE = 0.999  # the least cosine of a vector through the double and in-process


def build(folder: Path, name: str, seed: int = 0, **config):
    """A tiny random-weight model of encoder ``name`` saved to ``folder``."""
    models = import_colpali()
    classes = {
        "colqwen3": (models.ColQwen3, models.ColQwen3Processor),
        "colqwen3.5": (models.ColQwen3_5, models.ColQwen3_5Processor),
        "qwen3-vl-embedding": (transformers.Qwen3VLForConditionalGeneration, transformers.Qwen3VLProcessor),
    }[name]
    return build_qwen(folder, FAMILIES[name], *classes, seed=seed)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    for name in FAMILIES:
        build(root / name, name)
    return {name: str(root / name) for name in FAMILIES}


@pytest.fixture(scope="module")
def double(folders):
    """The double serving each tiny model under its folder's name (as vLLM serves a local model)."""
    with Double({folder: Served(name, folder) for name, folder in folders.items()}) as running:
        yield running


@pytest.fixture
def fresh(double):
    """The double with its faults, log and delay reset after the test."""
    yield double
    double.faults.clear()
    double.delay = 0.0


def endpoint(url: str, **limits) -> VisualEndpoint:
    return VisualEndpoint(url, **{"retries": 2, "backoff": 0.01, **limits})


def cosines(a: list, b: list) -> list[float]:
    """The least cosine of each pair of arrays (row by row for token vectors); -1 for other shapes."""
    return [float((x * y).sum(-1).min()) if x.shape == y.shape else -1.0 for x, y in zip(a, b)]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_same_pages_give_the_same_vectors_through_the_endpoint(name, folders, double, pages, queries):
    local = make_encoder(name, model=folders[name], device="cpu", batch_size=2)
    served = served_encoder(name, folders[name], endpoint(double.url), batch_size=2)
    assert (served.name, served.dim, served.multi_vector) == (local.name, local.dim, local.multi_vector)
    page_vectors, query_vectors = assert_encoder_contract(served, pages, queries, repeat_atol=1e-5)
    corner = [pages[0].crop((0, 0, 56, 56))]
    for ours, theirs in (
        (page_vectors, local.encode_images(pages)),
        (query_vectors, local.encode_queries(queries)),
        (served.encode_image_queries(corner), local.encode_image_queries(corner)),
    ):
        assert min(cosines(ours, theirs)) >= AGREE
    assert joint_queries(served) == joint_queries(local)
    if joint_queries(served):
        joint = served.encode_image_text_queries(pages[:2], queries[:2])
        assert min(cosines(joint, local.encode_image_text_queries(pages[:2], queries[:2]))) >= AGREE
    spec, expected = served.spec(), local.spec()
    assert {k: spec[k] for k in ("name", "model", "dim", "multi_vector", "options")} == {
        k: expected[k] for k in ("name", "model", "dim", "multi_vector", "options")
    }
    served.close()


@pytest.mark.timeout(240)
def test_pages_sized_here_as_the_servers_processor_sizes_them_give_its_vectors(folders, fresh, pages):
    """Told the server processor's pixel budget, the client sends each page at the size that
    processor gives it (sides in multiples of 32, the area within the budget), so the server
    decodes and resizes nothing more, and the vectors are the in-process ones."""
    import base64
    import io

    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    local = make_encoder("colqwen3", model=folders["colqwen3"], device="cpu", batch_size=2)
    budget = local.processor.image_processor.size["longest_edge"]
    served = served_encoder("colqwen3", folders["colqwen3"], endpoint(fresh.url, max_pixels=budget))
    pages = [page.resize((3 * page.width, 3 * page.height)) for page in pages]  # over the budget
    start = len(fresh.seen)
    vectors = served.encode_images(pages)
    sent = []
    for _, _, body in fresh.seen[start:]:  # in the order they arrived (in flight together)
        (message,) = body["messages"]
        url = next(part for part in message["content"] if part["type"] == "image_url")["image_url"]["url"]
        sent.append(Image.open(io.BytesIO(base64.b64decode(url.partition(",")[2]))).size[::-1])
    min_pixels = local.processor.image_processor.size["shortest_edge"]
    expected = [smart_resize(page.height, page.width, 32, min_pixels, budget) for page in pages]
    assert sorted(sent) == sorted(expected)
    assert all(h * w <= budget < page.width * page.height for (h, w), page in zip(expected, pages))
    assert min(cosines(vectors, local.encode_images(pages))) >= AGREE
    assert served.spec()["max_pixels"] == budget
    with pytest.raises(PagesightError, match="max_pixels is the server processor's pixel budget"):
        endpoint(fresh.url, max_pixels=10)
    served.close()


def test_pages_go_as_vllm_documents_them(folders, fresh, pages):
    """A page is one user message: the prompt's text around a PNG data URL, with the verbatim chat
    template, to /pooling with task token_embed; queries go as completion-style input. The prompts
    are colpali-engine's own."""
    models = import_colpali()
    for processor in (models.ColQwen3Processor, models.ColQwen3_5Processor):
        assert processor.visual_prompt_prefix == COLQWEN3_PAGE
        assert COLQWEN3_QUERY.replace("{text}", "q") == "q" + processor.query_augmentation_token * 10
    served = served_encoder("colqwen3.5", folders["colqwen3.5"], endpoint(fresh.url))
    start = len(fresh.seen)
    served.encode_images(pages[:1])
    served.encode_queries(["revenue"])
    (page_path, _, page), (query_path, _, query) = fresh.seen[start:]
    assert (page_path, page["task"], page["chat_template"]) == ("/pooling", "token_embed", VERBATIM)
    # the width known (from the probe, in JSON numbers), vectors come as base64 float32
    assert (page["encoding_format"], page["embed_dtype"], page["endianness"]) == (
        "base64",
        "float32",
        "little",
    )
    (message,) = page["messages"]
    before, image, after = message["content"]
    assert (message["role"], before["text"], after["text"]) == (
        "user",
        "<|im_start|>user\n",
        "Describe the image.<|im_end|><|endoftext|>",
    )
    assert image["image_url"]["url"].startswith("data:image/png;base64,")
    assert query_path == "/pooling" and query["input"] == ["revenue" + "<|endoftext|>" * 10]
    served.close()


@pytest.mark.timeout(240)
def test_an_index_built_through_the_endpoint_is_searched_in_process_and_back(folders, double, tmp_path):
    make_pdf(
        tmp_path / "owls.pdf",
        [["Zephyrine owls nest in basalt cliffs"]],
        blocks=[(72, 300, 400, 200, (0.1, 0.2, 0.8))],
    )
    make_pdf(tmp_path / "tides.pdf", [["Spring tides at the estuary"], ["Neap tides"]], blocks=[(300, 60, 200, 500, (0.9, 0.1, 0.1)), (60, 60, 200, 200, (0.1, 0.7, 0.2))])  # fmt: skip
    settings = {"dense_model": None, "visual_encoder": "colqwen3.5", "visual_model": folders["colqwen3.5"]}
    served = endpoint(double.url)
    with Index.open(tmp_path / "ix", settings=settings, visual_endpoint=served) as index:
        report = index.add(
            [tmp_path / "owls.pdf", tmp_path / "tides.pdf"], jobs=1, ocr="never", visual_batch=2
        )
        assert report.ok and report.visual["tiles"] == 3 and report.visual["devices"] == [double.url]
        spec = index.catalog.visual_spec()
        assert (spec["name"], spec["model"], spec["dim"], spec["multi_vector"]) == (
            "colqwen3.5",
            folders["colqwen3.5"],
            320,
            True,
        )
        through = index.search("owls nesting in cliffs", mode="visual", k=3)
    with Index.open(tmp_path / "ix", create=False) as index:  # the same model, in-process
        index.device = "cpu"
        here = index.search("owls nesting in cliffs", mode="visual", k=3)
    assert [(hit.doc_id, hit.page) for hit in here] == [(hit.doc_id, hit.page) for hit in through]
    assert np.allclose([hit.score for hit in here], [hit.score for hit in through], atol=1e-3)


@pytest.mark.timeout(240)
def test_an_endpoint_of_another_width_is_refused(folders, tmp_path, pages):
    """The index records the encoder's width: an endpoint serving a model of another width under the
    recorded name is refused when the index opens it, and a server whose model changes under a
    running encoder is caught on its first answer."""
    narrow = tmp_path / "narrow"
    model = build(narrow, "colqwen3.5", seed=5)
    model.custom_text_proj = torch.nn.Linear(64, 128)
    model.config.dim = 128
    model.save_pretrained(narrow)
    name = folders["colqwen3.5"]
    make_pdf(tmp_path / "owls.pdf", [["Zephyrine owls"]])
    settings = {"dense_model": None, "visual_encoder": "colqwen3.5", "visual_model": name}
    with Index.open(tmp_path / "ix", settings=settings) as index:
        index.device = "cpu"
        assert index.add([tmp_path / "owls.pdf"], jobs=1, ocr="never").ok
    with Double({name: Served("colqwen3.5", str(narrow))}) as other:
        index = Index.open(tmp_path / "ix", create=False, visual_endpoint=endpoint(other.url))
        with (
            index,
            pytest.raises(
                PagesightError,
                match=r"built with visual encoder 'colqwen3.5' .*dim 320.*dim 128.*\(dim differ\)",
            ),
        ):
            index.search("owls", mode="visual")
        with Double({name: Served("colqwen3.5", name)}) as right:
            served = served_encoder("colqwen3.5", name, endpoint(right.url))
            right.models[name] = other.models[name]  # the server's model swapped under the encoder
            with pytest.raises(
                PagesightError,
                match=rf"visual endpoint {right.url} \(model {name}\) gave vectors of 128 dimensions, where it gave 320",
            ):
                served.encode_images(pages[:1])
            served.close()


def free_port() -> int:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        return bound.getsockname()[1]


@pytest.mark.timeout(120)
def test_its_errors_name_the_endpoint_and_say_what_to_do(folders, fresh, pages):
    name = folders["colqwen3.5"]
    down = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(
        EndpointError, match=rf"^the visual endpoint {down}/v1/models cannot be reached .*\(3 tries\)$"
    ):
        served_encoder("colqwen3.5", name, endpoint(down))
    with pytest.raises(
        EndpointError, match=rf"does not serve an-unserved-model \(it serves .*{name}.*\): start vLLM"
    ):
        served_encoder("colqwen3.5", "an-unserved-model", endpoint(fresh.url))
    with pytest.raises(
        PagesightError, match="'dse' cannot run behind an endpoint here; served: colqwen3, colqwen3.5"
    ):
        served_encoder("dse", None, endpoint(fresh.url))
    with pytest.raises(
        PagesightError, match="an adapter is merged into its model in-process; behind an endpoint"
    ):
        served_encoder("colqwen3.5", name, endpoint(fresh.url), adapter="lora")
    served = served_encoder("colqwen3.5", name, endpoint(fresh.url))
    fresh.trust = False  # vllm serve without --trust-request-chat-template
    try:
        with pytest.raises(
            EndpointError,
            match=r"refused /pooling: 400 Chat template is passed with request, but --trust-request-chat-template is not set",
        ):
            served.encode_images(pages[:1])
    finally:
        fresh.trust = True
    fresh.faults.extend([(503, {}, "the engine is sleeping")] * 3)
    with pytest.raises(
        EndpointError,
        match=rf"the visual endpoint {fresh.url}/pooling answered 503 the engine is sleeping \(3 tries\)",
    ):
        served.encode_queries(["owls"])
    fresh.max_model_len = 8
    try:
        with pytest.raises(EndpointError, match=r"400 This model's maximum context length is 8 tokens"):
            served.encode_queries(["owls nesting in the basalt cliffs of the north"])
    finally:
        fresh.max_model_len = 4096
    served.close()


@pytest.mark.timeout(120)
def test_429s_and_5xx_are_tried_again_after_the_time_asked(folders, fresh, pages):
    served = served_encoder("colqwen3.5", folders["colqwen3.5"], endpoint(fresh.url))
    expected = served.encode_images(pages[:2])
    start = len(fresh.seen)
    fresh.faults.extend([(429, {"Retry-After": "0.3"}, "too many requests"), (502, {}, "bad gateway")])
    again = served.encode_images(pages[:2])
    assert min(cosines(again, expected)) >= 0.99999
    assert len(fresh.seen) - start == 4  # two pages, two of their requests answered twice
    served.close()


@pytest.mark.timeout(120)
def test_a_slow_endpoint_times_out_and_the_bound_holds(folders, fresh, pages):
    name = folders["colqwen3.5"]
    bounded = served_encoder("colqwen3.5", name, endpoint(fresh.url, concurrency=2), batch_size=6)
    fresh.delay, fresh.most_in_flight = 0.2, 0
    assert len(bounded.encode_images(pages * 2)) == 6
    assert fresh.most_in_flight == 2  # six pages, two requests in flight at a time
    bounded.close()
    fresh.delay = 0.0
    quick = served_encoder("colqwen3.5", name, endpoint(fresh.url, timeout=0.5, retries=1))
    fresh.delay = 1.0
    with pytest.raises(
        EndpointError,
        match=rf"the visual endpoint {fresh.url}/pooling did not answer /pooling within 0.5 s \(2 tries\)",
    ):
        quick.encode_queries(["owls"])
    quick.close()


class _Target(BaseHTTPRequestHandler):
    """Where a redirect points: it counts the requests that reach it."""

    hits: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        type(self).hits.append(dict(self.headers))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.timeout(120)
def test_the_key_goes_to_the_endpoint_alone(folders, tmp_path, pages, monkeypatch):
    name = folders["colqwen3.5"]
    target = HTTPServer(("127.0.0.1", 0), _Target)
    threading.Thread(target=target.serve_forever, daemon=True).start()
    elsewhere = f"http://127.0.0.1:{target.server_address[1]}/pooling"
    with Double({name: Served("colqwen3.5", name)}, api_key="sk-visual-key") as keyed:
        with pytest.raises(EndpointError, match=r"refused /v1/models: 401 Unauthorized"):
            served_encoder("colqwen3.5", name, endpoint(keyed.url))
        key_file = tmp_path / "key"
        key_file.write_text("sk-visual-key\n")
        given = VisualEndpoint.given(keyed.url, key_file, retries=0)
        assert "sk-visual-key" not in repr(given)
        served = served_encoder("colqwen3.5", name, given)
        keyed.faults.append((307, {"Location": elsewhere}, {}))
        with pytest.raises(
            EndpointError, match=rf"redirects /pooling to {elsewhere}: give the URL it redirects to"
        ):
            served.encode_images(pages[:1])
        assert _Target.hits == []  # the redirect was not followed: the key never left
        assert {headers["authorization"] for _, headers, _ in keyed.seen} == {"Bearer sk-visual-key"}
        served.close()
        monkeypatch.setenv("PAGESIGHT_VISUAL_API_KEY", "sk-visual-key")
        assert VisualEndpoint.given(keyed.url).api_key == "sk-visual-key"
    target.shutdown()
    for bad in ("ftp://host", "http://user:pw@host:8000", "http://host:8000/?key=1"):
        with pytest.raises(PagesightError, match="visual endpoint"):
            VisualEndpoint(bad)
    assert VisualEndpoint("http://host:8000/v1/").base_url == "http://host:8000"
    with pytest.raises(PagesightError, match=f"cannot read the key file {tmp_path / 'none'}"):
        VisualEndpoint.given("http://host:8000", tmp_path / "none")


@pytest.mark.timeout(240)
def test_ingest_and_search_through_the_endpoint_from_the_command_line(folders, double, tmp_path, monkeypatch):
    name = folders["qwen3-vl-embedding"]
    make_pdf(tmp_path / "owls.pdf", [["Zephyrine owls nest in basalt cliffs"]])
    made = tmp_path / "ix"
    monkeypatch.setenv("PAGESIGHT_VISUAL_API_KEY", "sk-from-the-environment")
    start = len(double.seen)
    served = ("--visual-endpoint", f"{double.url}/v1", "--visual-concurrency", "2")
    cli("ingest", str(tmp_path / "owls.pdf"), "--index", str(made), "--encoder", "qwen3-vl-embedding",
        "--encoder-model", name, "--no-dense", "--ocr", "never", *served)  # fmt: skip
    found = cli("search", "owls", "--index", str(made), "--mode", "visual", "--json", *served)
    assert '"doc_id": "owls"' in found.stdout
    paths = [path for path, _, _ in double.seen[start:]]
    assert paths.count("/v1/embeddings") >= 3 and "/pooling" not in paths  # probe, page, query (x2 probes)
    assert {headers.get("authorization") for _, headers, _ in double.seen[start:]} == {
        "Bearer sk-from-the-environment"
    }
    refused = cli(
        "search",
        "owls",
        "--index",
        str(made),
        "--mode",
        "visual",
        "--visual-endpoint",
        "ftp://x",
        check=False,
    )
    assert refused.returncode == 2 and "give the server's URL" in refused.stderr


@pytest.mark.timeout(120)
def test_a_client_without_torch_reaches_the_endpoint(folders, double):
    """The served encoder is the client alone: a process without torch or transformers encodes."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['torch'] = sys.modules['transformers'] = None\n"
        "from pagesight.encode.visual.served import served_encoder\n"
        "from pagesight.endpoints import VisualEndpoint\n"
        f"encoder = served_encoder('colqwen3', {folders['colqwen3']!r}, VisualEndpoint({double.url!r}))\n"
        "(vectors,) = encoder.encode_queries(['owls'])\n"
        "print(encoder.dim, vectors.shape[1])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["320", "320"]


@pytest.mark.timeout(240)
def test_a_server_searches_through_the_operators_endpoint_alone(folders, tmp_path, monkeypatch):
    """``pagesight serve --visual-endpoint``: the queries of every request go to the operator's
    endpoint with the key read at start; a request cannot name another, and a key put in the
    environment later is never read."""
    from fastapi.testclient import TestClient

    from pagesight.serve.workers import ServeConfig, build

    name = folders["colqwen3.5"]
    _Target.hits = []
    target = HTTPServer(("127.0.0.1", 0), _Target)
    threading.Thread(target=target.serve_forever, daemon=True).start()
    elsewhere = f"http://127.0.0.1:{target.server_address[1]}"
    make_pdf(tmp_path / "owls.pdf", [["Zephyrine owls nest in basalt cliffs"]])
    settings = {"dense_model": None, "visual_encoder": "colqwen3.5", "visual_model": name}
    with Double({name: Served("colqwen3.5", name)}, api_key="sk-operator") as operators:
        served = endpoint(operators.url, api_key="sk-operator")
        with Index.open(tmp_path / "ix", settings=settings, visual_endpoint=served) as index:
            assert index.add([tmp_path / "owls.pdf"], jobs=1, ocr="never").ok
        config = ServeConfig(str(tmp_path / "ix"), visual_endpoint=operators.url)
        app = build(config, api_key=None, visual_key="sk-operator")
        monkeypatch.setenv("PAGESIGHT_VISUAL_API_KEY", "sk-later")
        start = len(operators.seen)
        with TestClient(app, base_url="http://127.0.0.1") as client:  # build's loopback guard
            for params in (
                {"q": "owls", "mode": "visual"},
                {"q": "owls", "mode": "visual", "visual_endpoint": elsewhere, "visual_model": "other"},
            ):
                found = client.get("/api/search", params=params)
                assert found.status_code == 200 and found.json()["hits"][0]["doc_id"] == "owls"
        queries = [body for path, _, body in operators.seen[start:] if path == "/pooling" and "input" in body]
        assert [body["input"][0].split("<|endoftext|>")[0] for body in queries] == ["owls", "owls"]
        assert {headers["authorization"] for _, headers, _ in operators.seen} == {"Bearer sk-operator"}
    assert _Target.hits == []
    target.shutdown()
