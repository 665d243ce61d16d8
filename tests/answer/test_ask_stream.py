"""Answers as they are written: ``ask(..., on_text=...)``, ``ask_stream`` / ``Index.ask_stream``
(the pieces while the reader writes them, then the answer; a caller that stops early stops the
reader) and ``pagesight ask --stream``."""

from __future__ import annotations

import threading

import pytest

from pagesight.answer import Reading
from pagesight.answer.ask import ask, ask_stream
from pagesight.answer.base import Answer, register
from pagesight.errors import PagesightError
from pagesight.records import Hit
from pagesight.request import AskRequest
from tests.answer.test_inputs_auto import FakeIndex
from tests.conftest import cli

QUESTION = "By how much did revenue grow?"
PIECES = ["Revenue ", "grew ", "12%."]
HITS = [Hit("report", 1, 0, 1.0, {}, "", [], (400, 900), (0.0, 0.0, 400.0, 300.0))]


class TickReader:
    """Writes ``PIECES`` one at a time, each only once the caller has taken the one before (it
    waits for ``taken``), so an answer made before its pieces are read would never finish."""

    name, inputs, max_images = "tick", "text", None

    def __init__(self):
        self.taken = threading.Semaphore(0)
        self.waited_out = False

    def read(self, question, context, on_text=None) -> Reading:
        for piece in PIECES:
            if on_text is not None:
                on_text(piece)
                self.waited_out |= not self.taken.acquire(timeout=10)
        return Reading("".join(PIECES).strip(), timings={"prefill": 0.25, "decode": 0.5})


class EndlessReader:
    """Writes until it is stopped: what a caller that goes away should end."""

    name, inputs, max_images = "endless", "text", None

    def __init__(self):
        self.written = 0
        self.stopped_by: BaseException | None = None

    def read(self, question, context, on_text=None) -> Reading:
        try:
            while self.written < 10_000:
                on_text("word ")
                self.written += 1
        except BaseException as exc:
            self.stopped_by = exc
            raise
        return Reading("never")


class Broken:
    name, inputs, max_images = "broken", "text", None

    def read(self, question, context, on_text=None) -> Reading:
        on_text("Revenue ")
        raise PagesightError("the model went away")


class Whole:
    """A reader that cannot stream."""

    name, inputs, max_images = "whole", "text", None

    def read(self, question, context) -> Reading:
        return Reading("Twelve percent.")


@pytest.mark.timeout(60)
def test_pieces_come_while_the_reader_writes_then_the_answer():
    reader = TickReader()
    got = []
    for piece in ask_stream(FakeIndex([]), AskRequest(QUESTION), reader, hits=HITS):
        got.append(piece)
        if isinstance(piece, str):
            reader.taken.release()
    assert got[:-1] == PIECES and not reader.waited_out
    answer = got[-1]
    assert isinstance(answer, Answer) and answer.text == "Revenue grew 12%."
    assert answer.timings["prefill"] == 0.25 and answer.timings["decode"] == 0.5
    assert answer.timings["total"] >= answer.timings["read"]


@pytest.mark.timeout(60)
def test_a_caller_that_stops_early_stops_the_reader():
    reader = EndlessReader()
    stream = ask_stream(FakeIndex([]), AskRequest(QUESTION), reader, hits=HITS)
    assert [next(stream), next(stream)] == ["word ", "word "]
    stream.close()  # returns once the reader's thread is done
    assert reader.stopped_by is not None and reader.written < 10_000
    assert not any(thread.name == "pagesight-ask-stream" for thread in threading.enumerate())


@pytest.mark.timeout(60)
def test_errors_reach_the_caller_and_whole_answers_come_once():
    stream = ask_stream(FakeIndex([]), AskRequest(QUESTION), Broken(), hits=HITS)
    assert next(stream) == "Revenue "
    with pytest.raises(PagesightError, match="the model went away"):
        next(stream)
    pieces = list(ask_stream(FakeIndex([]), AskRequest(QUESTION), Whole(), hits=HITS))
    assert pieces[0] == "Twelve percent." and isinstance(pieces[1], Answer) and len(pieces) == 2
    heard: list[str] = []
    answer = ask(FakeIndex([]), AskRequest(QUESTION), Whole(), hits=HITS, on_text=heard.append)
    assert heard == [answer.text]


class CliTicks(TickReader):
    """``TickReader`` for the command line, which reads the pieces as they come (nothing waits)."""

    def __init__(self, **options):
        super().__init__()
        self.taken = threading.Semaphore(len(PIECES))


@pytest.mark.timeout(120)
def test_cli_ask_stream(lexical_samples):
    register("stream-test", "tests.answer.test_ask_stream:CliTicks")
    index = str(lexical_samples.root)
    question = "Which supplier replaces Brightmere Supply?"
    result = cli("ask", question, "--index", index, "--reader", "stream-test", "--stream")
    assert result.stdout.startswith("Revenue grew 12%.\n")
    assert "prefill 250 ms, decode 500 ms" in result.stderr
    refused = cli("ask", question, "--index", index, "--stream", "--json", check=False)
    assert refused.returncode != 0 and "--stream prints the answer as text" in refused.stderr
    streamed = [piece for piece in lexical_samples.ask_stream(question, CliTicks()) if isinstance(piece, str)]
    assert streamed == PIECES
