"""One request model under every front-end: the bundled samples' questions give the same hits,
in the same order with the same scores, through the library, the command line, the HTTP API, the
MCP tools and eval, with the defaults and with options set, and the options each front-end offers
are the request's fields."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import anyio
import pytest

from pagesight.eval.dataset import Dataset
from pagesight.eval.harness import Config, evaluate
from pagesight.request import AskRequest, SearchRequest, label, spec
from pagesight.spec import taken_default, value_type
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


# A value other than the default for an ingestion field whose type alone does not give one.
OTHER = {"language": "fr", "meta": "coast=north", "address": "ray://head:10001", "thesaurus": "none"}


def other_value(option) -> str:
    """A command-line value of ``option`` (``cli.ingesting._Option``) other than its default."""
    f = option.field
    rules = spec(f)
    if f.name in OTHER:
        return OTHER[f.name]
    if rules.choices is not None:
        return next(choice for choice in rules.choices if choice != f.default)
    base, _ = value_type(f)
    default = taken_default(f)
    return "x" if base is str else str(int((default or 0) + 2) if base is int else (default or 0) + 2.5)


def test_every_front_end_offers_the_ingestion_fields(sample_index, monkeypatch):
    """A field added to ``IngestOptions`` (or its ``web`` and ``ray`` parts) or ``Settings`` whose
    ``Spec`` offers it reaches ``pagesight ingest``, set to the value its flag says, and the upload
    form; ``Index.open`` and ``Index.add`` take every field, by name."""
    from pagesight.cli import ingesting
    from pagesight.ingest.options import IngestOptions

    seen = {}
    read = SimpleNamespace(notes=[], failed=[], ok=True, added=[], replaced=[], unchanged=[], pages=0)
    monkeypatch.setattr(ingesting, "open_index", lambda index, **opened: seen.update(opened) or sample_index)
    monkeypatch.setattr(
        ingesting, "_add_with_progress", lambda *args, **kw: seen.update(options=args[2]) or read
    )
    monkeypatch.setattr(type(sample_index), "close", lambda self: None)  # the fixture's index stays open
    offered = ingesting._offered()
    assert {"ocr", "jobs", "meta", "javascript", "address"} <= {
        o.field.name for o in offered if not o.setting
    }
    for option in offered:
        f, rules = option.field, spec(option.field)
        flag = (rules.toggle if option.toggle else rules.flags or (f"--{f.name.replace('_', '-')}",))[0]
        on, _, off = flag.partition("/")
        if value_type(f)[0] is bool and not (option.toggle or rules.flags):  # typer's --NAME/--no-NAME
            off = f"--no-{on[2:]}"
        if option.toggle or value_type(f)[0] is bool:  # the flag that is not the default
            given = [off if option.toggle or (f.default and off) else on]
        else:
            given = [on, other_value(option)]
        if option.part == "ray":
            given += ["--ray"]
        seen.clear()
        cli("ingest", "--index", "ix", *given, "nothing-to-read")
        if option.setting:
            assert set(seen["settings"]) == {f.name}, (given, seen["settings"])
            assert seen["settings"][f.name] != f.default, given
        else:
            made = seen["options"]
            value = getattr(getattr(made, option.part), f.name) if option.part else getattr(made, f.name)
            default = (
                getattr(getattr(IngestOptions(), option.part), f.name, None) if option.part else f.default
            )
            assert value != default, (given, value)
            IngestOptions.given(
                **{(option.part or f.name): getattr(made, option.part or f.name)}
            )  # Index.add
    # the upload form: the fields offered it, under their names, described by their help
    schema = TestClient(create_app(sample_index, readers=1)).get("/openapi.json").json()
    form = schema["components"]["schemas"]["UploadForm"]["properties"]
    for f in dataclasses.fields(IngestOptions):
        if spec(f).form:
            assert form[f.name]["description"] == spec(f).help, f.name
        else:
            assert f.name not in form, f.name


@pytest.fixture(scope="module")
def picture_index(tmp_path_factory):
    """Two documents embedded by a tiny random-weight CLIP, with a field to filter by."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from pagesight import Index
    from tests.encode.visual.conftest import clip_report_and_memo

    root = tmp_path_factory.mktemp("front-ends-clip")
    index = Index.open(root / "index", settings=clip_report_and_memo(root))
    index.device = "cpu"
    assert index.add([root / "report.pdf"], ocr="never", jobs=1, meta={"kind": "report"}).ok
    assert index.add([root / "memo.pdf"], ocr="never", jobs=1, meta={"kind": "memo"}).ok
    yield index
    index.close()


@pytest.mark.timeout(300)
def test_an_image_query_is_a_request_through_every_front_end(picture_index, tmp_path):
    """A picture (alone or a region of it, with search fields) gives the same hits through the
    library, the CLI, the HTTP API and the MCP search tool, and its filter holds everywhere."""
    import base64

    from pagesight.request import ImageSearchRequest

    picture = picture_index.tile_image("memo", 1, 0)
    path = tmp_path / "query.png"
    picture.save(path)
    region = (10, 10, picture.width - 10, picture.height // 2)
    app = TestClient(create_app(picture_index, readers=1))
    server = build_server(picture_index)
    variants = [
        {},
        {"k": 2, "where": "kind = report"},  # the filter: memo's own page is left out
        {"k": 3, "region": region, "candidates": 5, "document_weight": 0.5, "ef_search": 16},
    ]
    for fields in variants:
        expected = ranked(
            [h.to_dict() for h in picture_index.search(ImageSearchRequest(image=picture, **fields))]
        )
        assert expected
        if "where" in fields:
            assert all(page.startswith("report") for page, _, _ in expected)
        flags = [
            part
            for key, value in fields.items()
            if key != "region"
            for part in ("-k" if key == "k" else "--" + key.replace("_", "-"), str(value))
        ]
        flags += [f"--region={','.join(map(str, region))}"] if "region" in fields else []
        shown = cli("search", "--image", str(path), "--index", str(picture_index.root), *flags, "--json")
        assert ranked(json.loads(shown.stdout)) == expected, (fields, "cli")
        form = {key: str(value) for key, value in fields.items() if key != "region"}
        form |= {"region": ",".join(map(str, region))} if "region" in fields else {}
        sent = app.post("/api/search/image", files={"image": ("q.png", path.read_bytes())}, data=form)
        assert sent.status_code == 200, sent.text
        assert ranked(sent.json()["hits"]) == expected, (fields, "http")

        async def over_mcp(fields=fields):
            arguments = {key: value for key, value in fields.items() if key != "region"}
            if "region" in fields:
                arguments["region"] = ",".join(map(str, region))
            async with Client(server) as client:
                image = base64.b64encode(path.read_bytes()).decode()
                result = await client.call_tool("search", {"image": image, **arguments})
                assert not result.is_error, result.content
                return ranked(result.structured_content["hits"])

        assert anyio.run(over_mcp) == expected, (fields, "mcp")
    # a field of a text search is refused by name, never ignored, wherever it is given
    refused = cli("search", "--image", str(path), "--index", str(picture_index.root), "--fusion", "rrf",
                  check=False)  # fmt: skip
    assert refused.returncode == 2 and "without fusion" in refused.stderr
    sent = app.post(
        "/api/search/image", files={"image": ("q.png", path.read_bytes())}, data={"mode": "lexical"}
    )
    assert sent.status_code in (400, 422) and "mode lexical" in sent.text

    async def refused_over_mcp():
        async with Client(server) as client:
            image = base64.b64encode(path.read_bytes()).decode()
            return await client.call_tool("search", {"image": image, "alpha": 0.3})

    result = anyio.run(refused_over_mcp)
    assert result.is_error and "without alpha" in result.content[0].text


def test_the_image_search_form_takes_every_search_field(sample_index):
    schema = TestClient(create_app(sample_index, readers=1)).get("/openapi.json").json()
    body = schema["paths"]["/api/search/image"]["post"]["requestBody"]["content"]["multipart/form-data"]
    name = body["schema"]["$ref"].rsplit("/", 1)[1]
    parts = schema["components"]["schemas"][name]
    taken = set(parts.get("properties", {}))
    for ref in parts.get("allOf", []):
        taken |= set(schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]["properties"])
    assert {"image", "region"} <= taken
    for f in dataclasses.fields(SearchRequest):
        if spec(f).served:
            assert (spec(f).http or label(f)) in taken, f.name
