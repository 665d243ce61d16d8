"""The answer grid of `pagesight eval`: baselines (oracle, hard negatives, no retrieval), lists of
settings, judges, multiple choice, the agent and the failure decomposition. Model readers and judges
are a real local HTTP server speaking the OpenAI chat API whose replies are scripted from what it
is asked; the HTTP, the parsing, the searches and the scoring are pagesight's own."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pagesight import Index
from pagesight.answer import make_reader
from pagesight.answer.prompts import CLOSED_BOOK
from pagesight.errors import InputError
from pagesight.eval.dataset import Dataset
from pagesight.eval.grid import DECOMPOSITION, AnswerGrid, evaluate_grid
from pagesight.eval.harness import Config
from pagesight.eval.judges import openai_judge
from pagesight.eval.runner import SearchGrid, evaluate_dataset
from pagesight.request import AskRequest
from tests.answer.test_openai_reader import MODEL, completion
from tests.conftest import ROOT, cli

SAMPLES = Dataset.load(ROOT / "samples")
ANSWERS = {SAMPLES.queries[qid]: row["answer"] for qid, row in SAMPLES.answers.items()}


class Endpoint:
    """``POST /v1/chat/completions`` on 127.0.0.1, each reply made by ``respond`` from the request's
    JSON body (the content, and the tool calls when some); every request body is kept."""

    def __init__(self, respond: Callable[[dict], str | list[dict]]):
        self.respond, self.bodies = respond, []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.endpoint = self
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        endpoint: Endpoint = self.server.endpoint
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        endpoint.bodies.append(body)
        said = endpoint.respond(body)
        if isinstance(said, list):  # tool calls
            reply = completion(None, finish_reason="tool_calls")
            reply["choices"][0]["message"]["tool_calls"] = said
        else:
            reply = completion(said)
        payload = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args) -> None:
        pass


@pytest.fixture
def endpoint():
    started: list[Endpoint] = []

    def start(respond) -> Endpoint:
        started.append(Endpoint(respond))
        return started[-1]

    yield start
    for one in started:
        one.close()


def prompt_of(body: dict) -> str:
    """The text of a request's messages, images left out."""
    texts = []
    for message in body["messages"]:
        content = message.get("content") or ""
        texts += (
            [content] if isinstance(content, str) else [p["text"] for p in content if p["type"] == "text"]
        )
    return "\n".join(texts)


def asked(prompt: str) -> str:
    """The question a reader's prompt ends with (its options left out)."""
    return prompt.rsplit("Question: ", 1)[1].split("\nOptions:")[0].strip()


@pytest.mark.timeout(60)
def test_the_baselines_of_the_extractive_reader_are_a_grid_searched_once_a_question(
    sample_index, monkeypatch
):
    searches = []
    search = Index.search
    monkeypatch.setattr(Index, "search", lambda self, *a, **k: searches.append(1) or search(self, *a, **k))
    grid = AnswerGrid(contexts=("retrieved", "hard-negatives", "none", "oracle"), ks=(1, 3))
    configs = grid.configs(Config.parse("lexical"))
    assert [c.name for c in configs] == [
        "retrieved k=1", "retrieved k=3", "hard-negatives k=1", "hard-negatives k=3", "none", "oracle k=1",
        "oracle k=3",
    ]  # fmt: skip
    extractive = make_reader("extractive")
    results = evaluate_grid(
        sample_index, SAMPLES, Config.parse("lexical"), configs, lambda request: extractive
    )

    assert len(searches) == 2 * 13  # one search a question, and one within the gold documents (oracle)
    by_name = {r.setting.name: r.summary() for r in results}
    for name, summary in by_name.items():
        assert summary["n_answers"] == 13 and sum(summary["decomposition"].values()) == 13, name
        assert summary["tokens_in"] == summary["tokens_out"] == 0  # an offline reader reports none

    def right(row):  # relaxed accuracy or containment
        return max(row["scores"]["relaxed_accuracy"], row["scores"]["contains"]) == 1

    assert results[5].setting.name == "oracle k=1"
    assert by_name["oracle k=1"]["decomposition"]["gold_right"] == sum(map(right, results[5].rows))
    assert by_name["oracle k=3"]["decomposition"]["missed_right"] == 0
    for name in ("hard-negatives k=1", "hard-negatives k=3", "none"):
        assert (
            by_name[name]["decomposition"]["gold_right"] + by_name[name]["decomposition"]["gold_wrong"] == 0
        )
    assert by_name["none"]["contains"] == 0 and {row["prediction"] for row in results[4].rows} == {""}
    assert (
        by_name["oracle k=3"]["contains"]
        >= by_name["retrieved k=3"]["contains"]
        > by_name["hard-negatives k=3"]["contains"]
    )
    first = results[0].rows[0]
    assert first["gold_in_context"] is True and first["right"] == right(first)


@pytest.mark.timeout(60)
def test_one_configuration_reports_what_eval_reported_before_the_grid(tmp_path: Path, sample_index):
    args = ["eval", str(ROOT / "samples"), "--index", str(sample_index.root), "-m", "lexical", "--json"]
    single = json.loads(cli(*args, "--reader", "extractive").stdout)
    grid = json.loads(cli(*args, "--answers", "--context", "retrieved,none", "--answer-k", "5").stdout)
    before = (
        "reader",
        "config",
        "n_answers",
        "exact_match",
        "f1",
        "relaxed_accuracy",
        "contains",
        "cites_relevant",
    )
    assert {key: single["answers"][key] for key in before} == {
        key: grid["answer_grid"][0][key] for key in before
    }
    assert [row["context"] for row in grid["answer_grid"]] == ["retrieved", "none"]
    report = tmp_path / "report"
    cli(*args[:-1], "--answers", "--context", "oracle", "--answer-k", "1,2", "--report", str(report))
    markdown = (report / "report.md").read_text()
    assert (
        "## Answers" in markdown and "| oracle | 2 |" in markdown and (report / "answers.png").stat().st_size
    )
    summary = json.loads((report / "summary.json").read_text())
    assert [(row["context"], row["k"]) for row in summary["answers"]] == [("oracle", 1), ("oracle", 2)]
    rows = [json.loads(line) for line in (report / "answers.jsonl").read_text().splitlines()]
    assert len(rows) == 26 and {row["answer_config"] for row in rows} == {"oracle k=1", "oracle k=2"}
    swept = json.loads(cli(*args, "--answers", "-c", "1,4", "--strategy", "all,concat").stdout)["answer_grid"]
    assert [(row["compression"], row["strategy"]) for row in swept] == [
        (1, "all"),
        (1, "concat"),
        (4, "all"),
        (4, "concat"),
    ]
    assert swept[0]["contains"] == swept[2]["contains"]  # a text reader reads no pixels: c changes nothing


@pytest.mark.timeout(60)
def test_a_model_reader_and_the_simpleqa_judge_grade_multiple_choice_aliases_and_abstention(
    tmp_path: Path, sample_index, endpoint
):
    """Three sample questions: one multiple-choice, one whose right answer is an alias. The reader
    answers from the passages it is given and says nothing without them; the judge grades."""
    mc, alias, plain = list(SAMPLES.answers)[:3]
    options = {mc: ["72 dots per inch", SAMPLES.answers[mc]["answer"], "300 dots per inch"]}
    answers = {
        mc: {"_id": mc, "answer": "B"},
        alias: {"_id": alias, "answer": "a kilobyte", "aliases": [SAMPLES.answers[alias]["answer"]]},
        plain: SAMPLES.answers[plain],
    }
    qids = (mc, alias, plain)
    data = Dataset(
        SAMPLES.root, SAMPLES.documents, {q: SAMPLES.queries[q] for q in qids},
        {q: SAMPLES.qrels[q] for q in qids}, answers, {}, options,
    )  # fmt: skip

    def respond(body: dict) -> str:
        prompt = prompt_of(body)
        if prompt.startswith("You are grading"):
            answer = prompt.split("Answer to grade: ", 1)[1].split("\n", 1)[0]
            reference = prompt.split("Reference answer: ", 1)[1].split("\n", 1)[0]
            return "CORRECT" if any(answer == ref for ref in reference.split(" OR ")) else "INCORRECT"
        if body["messages"][0]["content"] == CLOSED_BOOK:
            return ""  # abstains: no text
        if "Options:" in prompt:
            return "<think>A? No: the primer says 150.</think>B"
        return ANSWERS[asked(prompt)]

    server = endpoint(respond)
    request = AskRequest(reader="openai", model=MODEL, max_tokens=64)
    evaluation = evaluate_dataset(
        data,
        index=sample_index.root,
        searches=SearchGrid(modes=("lexical",)),
        grid=AnswerGrid(request, contexts=("retrieved", "none"), ks=(2,), inputs=("text",)),
        reader_options={"base_url": server.base_url, "api_key": "sk-test"},
        judge=openai_judge("simpleqa", "judge-model", server.base_url, "sk-test"),
    )
    retrieved, none = (result.summary() for result in evaluation.answer_grid)
    assert retrieved["grades"] == {"CORRECT": 3, "INCORRECT": 0, "NOT_ATTEMPTED": 0, "UNREADABLE": 0}
    assert retrieved["judge"] == retrieved["contains"] == 1.0 and retrieved["f_score"] == 1.0
    assert (
        none["grades"]["NOT_ATTEMPTED"] == 3 and none["judge"] == 0 and none["accuracy_given_attempted"] == 0
    )
    assert none["decomposition"] == {**dict.fromkeys(DECOMPOSITION, 0), "missed_wrong": 3}
    assert retrieved["tokens_in"] == none["tokens_in"] == 3 * 812 and retrieved["tokens_out_mean"] == 31
    judged = [body for body in server.bodies if prompt_of(body).startswith("You are grading")]
    assert len(judged) == 2  # the letter and the empty answers are graded without the model
    assert {body["temperature"] for body in judged} == {0} and {body["model"] for body in judged} == {
        "judge-model"
    }
    multiple = next(row for row in evaluation.answer_grid[0].rows if row["id"] == mc)
    assert multiple["prediction"] == "B" and multiple["scores"]["exact_match"] == 1.0  # no thinking left


@pytest.mark.timeout(60)
def test_declined_answers_are_not_attempted_and_unanswerable_questions_are_counted(
    tmp_path: Path, sample_index, endpoint
):
    """Issue 40: the reader answers one question, refuses another and the two unanswerable ones;
    the refusal is graded NOT_ATTEMPTED without asking the judge, the summary counts what was
    declined, and the unanswerable questions are rows of their own, asked within their document."""
    answered, refused = list(SAMPLES.answers)[:2]
    qids = (answered, refused)
    unanswerable = {
        "u1": {"text": "What was the West region revenue in 2031?", "doc_ids": ["quarterly-report"]},
        "u2": {"text": "Who founded Quorlan Industries?", "doc_ids": []},
    }
    data = Dataset(
        SAMPLES.root, SAMPLES.documents, {q: SAMPLES.queries[q] for q in qids},
        {q: SAMPLES.qrels[q] for q in qids}, {q: SAMPLES.answers[q] for q in qids}, unanswerable=unanswerable,
    )  # fmt: skip

    def respond(body: dict) -> str:
        prompt = prompt_of(body)
        if prompt.startswith("You are grading"):
            return "CORRECT"
        question = asked(prompt)
        if question == SAMPLES.queries[answered]:
            return ANSWERS[question]
        return "The provided pages do not mention this."

    server = endpoint(respond)
    evaluation = evaluate_dataset(
        data,
        index=sample_index.root,
        searches=SearchGrid(modes=("lexical",), within_document=True),
        grid=AnswerGrid(AskRequest(reader="openai", model=MODEL, max_tokens=64), ks=(2,), inputs=("text",)),
        reader_options={"base_url": server.base_url, "api_key": "sk-test"},
        judge=openai_judge("simpleqa", "judge-model", server.base_url, "sk-test"),
    )
    (result,) = evaluation.answer_grid
    summary = result.summary()
    assert summary["grades"] == {"CORRECT": 1, "INCORRECT": 0, "NOT_ATTEMPTED": 1, "UNREADABLE": 0}
    assert summary["accuracy_given_attempted"] == summary["right_given_attempted"] == 1.0
    assert summary["n_declined"] == 1 and summary["declined"] == 0.5
    assert summary["n_unanswerable"] == 2 and summary["declined_unanswerable"] == 1.0
    judged = [body for body in server.bodies if prompt_of(body).startswith("You are grading")]
    assert len(judged) == 1  # the refusal was not put to the judge
    row = next(row for row in result.rows if row["id"] == refused)
    assert row["answered"] is False and row["reason"] == "The provided pages do not mention this."
    assert not row["right"] and row["grade"] == "NOT_ATTEMPTED"
    assert [row["id"] for row in result.unanswerable] == ["u1", "u2"]
    assert all(row["answered"] is False for row in result.unanswerable)
    searched = [body for body in server.bodies if "2031" in prompt_of(body)]
    assert searched and "quarterly-report" in prompt_of(searched[0])  # within its document


@pytest.mark.timeout(60)
def test_the_agent_answers_in_eval_under_each_search_budget(sample_index, endpoint):
    def respond(body: dict) -> str | list[dict]:
        if prompt_of(body).startswith("You are grading"):
            return "CORRECT"
        question = asked(body["messages"][1]["content"])
        if body["tool_choice"] == "auto" and not any(m["role"] == "tool" for m in body["messages"]):
            call = {"name": "search", "arguments": json.dumps({"query": question})}
            return [{"id": "call_1", "type": "function", "function": call}]
        return ANSWERS[question] + ' <lines passage="1">[1]</lines>'

    server = endpoint(respond)
    result = cli(
        "eval", str(ROOT / "samples"), "--index", str(sample_index.root), "-m", "lexical", "--reader", "openai",
        "--model", MODEL, "--base-url", server.base_url, "--api-key", "sk-test", "--agent", "--inputs", "text",
        "--max-searches", "1,2", "--judge", "graded", "--judge-model", "judge-model", "--answer-k", "3", "--json",
    )  # fmt: skip
    grid = json.loads(result.stdout)["answer_grid"]
    assert [(row["context"], row["max_searches"]) for row in grid] == [("agent", 1), ("agent", 2)]
    for row in grid:
        assert row["n_answers"] == 13 and row["contains"] >= 0.9
        assert row["tokens_in"] == 13 * 2 * 812  # two turns a question: a search, then the answer
        assert sum(row["decomposition"].values()) == 13 and row["decomposition"]["gold_right"] >= 11
        assert set(row["grades"]) == {"CORRECT", "PARTIALLY_CORRECT", "INCORRECT", "UNREADABLE"}
    searched = [body for body in server.bodies if body.get("tools")]
    assert len(searched) == 2 * 13 * 2


def test_multiple_choice_and_alias_answers_are_checked_when_the_dataset_loads(tmp_path: Path):
    root = tmp_path / "ds"
    (root / "pdfs").mkdir(parents=True)
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tdoc_1\t1\n")
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "Which?", "options": ["only one"]}\n')
    with pytest.raises(InputError, match="query q1: options must be a list of 2 to 26 strings"):
        Dataset.load(root)
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "Which?", "options": ["Lisbon", "Porto"]}\n')
    for answer, message in (
        ('"C"', "a multiple-choice answer must be one letter of AB or the text of its option"),
        ('["A", "Porto"]', "a multiple-choice answer must be one letter"),  # two different options
        ('"A", "aliases": "Lisboa"', "answer and aliases must be strings"),
        ("3", "answer and aliases must be strings"),
    ):
        (root / "answers.jsonl").write_text(f'{{"_id": "q1", "answer": {answer}}}\n')
        with pytest.raises(InputError, match=message) as raised:
            Dataset.load(root)
        assert "answers.jsonl: answer q1" in str(raised.value)
    (root / "answers.jsonl").write_text('{"_id": "q1", "answer": "porto", "aliases": ["(B)"]}\n')
    assert Dataset.load(root).references("q1") == ["B"]


def test_bad_grid_options_are_refused_naming_them(sample_index):
    base = ["eval", str(ROOT / "samples"), "--index", str(sample_index.root), "-m", "lexical"]
    for args, message in (
        (["--answers", "--context", "retrieved,gold"], "context must be among retrieved, oracle, none"),
        (["--answers", "--answer-k", "1,x"], "--answer-k: 'x' is not a whole number"),
        (["--answers", "-c", "0.5"], "compression must be from 1 to 64"),
        (["--answers", "--strategy", "best"], "strategy must be one of"),
        (["--answers", "--max-searches", "2"], "--max-searches needs --agent"),
        (["--answers", "--agent", "--context", "oracle"], "an agent searches itself"),
        (["--answers", "--agent", "--max-searches", "21"], "max_searches must be from 1 to 20"),
        (["--answer-k", "3"], "the answer settings and the reader's options need --answers"),
        (["--model", "m"], "the answer settings and the reader's options need --answers"),
        (["--answers", "--judge", "simpleqa"], "--judge needs --judge-model"),
        (["--judge-model", "m"], "--judge-model needs --reader or --answers"),
        (["--answers", "--inputs", "images"], "reader 'extractive' takes none of inputs"),
    ):
        refused = cli(*base, *args, check=False)
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)
    shown = cli("eval", "--help").stdout
    for flag in (
        "--context",
        "--answer-k",
        "--compression",
        "--inputs",
        "--strategy",
        "--agent",
        "--max-searches",
    ):
        assert flag in shown, flag
    assert "binary|graded|simpleqa" in shown and "--base-url" in shown and "--device" in shown


@pytest.mark.timeout(120)
def test_a_model_readers_boxes_are_scored_against_the_samples_gold_zones(sample_index, endpoint):
    """A model reader that cites, in its scale (norm1000 of each image as it saw it), exactly where
    the samples' generator drew each answer scores grounding near 1: its boxes are read back to page
    pixels and to the gold's units (PDF points, or an image's pixels) on every page kind, the scans
    and the three-tile infographic included; one citing the line above scores 0."""
    by_question = {text: qid for qid, text in SAMPLES.queries.items()}
    shift = {"offset": 0.0}  # page pixels the cited boxes are moved down by

    def cite(body: dict) -> str:
        qid = by_question[asked(prompt_of(body))]
        ((corpus_id, annotators),) = SAMPLES.boxes[qid].items()
        doc, page = corpus_id.rsplit("_", 1)
        per_unit = (
            sample_index.settings.dpi / 72 if (ROOT / "samples" / "corpus" / f"{doc}.pdf").exists() else 1.0
        )
        parts = body["messages"][-1]["content"]
        for n, (label, shown) in enumerate(zip(parts, parts[1:]), start=1):
            if (
                label.get("type") != "text"
                or not label["text"].startswith(f"Image {n}: ")
                or shown.get("type") != "image_url"
            ):
                continue
            named, tile = label["text"].split(": ", 1)[1].rsplit(" tile ", 1)
            if named != f"{doc} page {page}":
                continue
            x0, y0, x1, y1 = sample_index.catalog.tile_at(doc, int(page), int(tile)).box
            boxes = []  # norm1000: each side of the image, whatever its pixels
            for box in annotators[0]:
                left, top, right, bottom = (v * per_unit for v in box)
                top, bottom = top + shift["offset"], bottom + shift["offset"]
                if not (y0 <= top and bottom <= y1):
                    break
                scale_x, scale_y = 1000 / (x1 - x0), 1000 / (y1 - y0)
                boxes.append([round((left - x0) * scale_x, 2), round((top - y0) * scale_y, 2),
                              round((right - x0) * scale_x, 2), round((bottom - y0) * scale_y, 2)])  # fmt: skip
            else:
                return f'{SAMPLES.answers[qid]["answer"]} <bboxes image="{n}">{json.dumps(boxes)}</bboxes>'
        return "I cannot find it."

    server = endpoint(cite)
    request = AskRequest(reader="openai", model=MODEL, max_tokens=64)

    def grounding() -> dict:
        evaluation = evaluate_dataset(
            ROOT / "samples",
            index=sample_index.root,
            searches=SearchGrid(modes=("lexical",)),
            grid=AnswerGrid(request, contexts=("oracle",), ks=(3,), inputs=("images",)),
            reader_options={"base_url": server.base_url, "api_key": "sk-test"},
        )
        return evaluation.answer_grid[0].summary()

    right = grounding()
    assert right["n_grounded"] == 13 and right["grounding_page_f1"] == 1.0, right
    assert right["grounding_f1"] > 0.9 and right["grounding_recall"] > 0.9, right
    shift["offset"] = -40.0  # the line above: no overlap with any answer
    wrong = grounding()
    assert wrong["grounding_f1"] < 0.05, wrong
