"""`pagesight serve --workers 2`: two server processes over one index, a real uvicorn on loopback.
Concurrent searches all answer; an upload taken by one process is ingested once and seen by both,
and its job is followed through either."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import make_pdf
from tests.serve.live import free_port, serve_command, until

httpx = pytest.importorskip("httpx")
KEY = "workers-test-key"


def call(url: str, method: str = "GET", **options) -> httpx.Response:
    """One request on a connection of its own, so the kernel may hand it to either process."""
    headers = {"Authorization": f"Bearer {KEY}", "Connection": "close"}
    with httpx.Client(timeout=30) as client:
        return client.request(method, url, headers=headers, **options)


@pytest.mark.timeout(240)
def test_two_processes_answer_together_and_both_see_an_upload(lexical_samples, tmp_path: Path):
    index = tmp_path / "index"
    shutil.copytree(lexical_samples.root, index)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        serve_command(index, port, "--workers", "2"),
        env={**os.environ, "PAGESIGHT_API_KEY": KEY},
        start_new_session=True,
    )
    try:
        until(lambda: _answers(f"{url}/api/health"), 120, "the server answers")
        workers = set()
        until(
            lambda: workers.add(call(f"{url}/api/status").json()["worker"]) or len(workers) == 2,
            60,
            "two processes",
        )
        assert server.pid not in workers  # the processes that answer are the workers, not the supervisor

        with ThreadPoolExecutor(8) as clients:
            answers = list(
                clients.map(
                    lambda _: call(f"{url}/api/search", params={"q": "West region revenue"}), range(40)
                )
            )
        assert [a.status_code for a in answers] == [200] * 40
        assert all(a.json()["hits"][0]["doc_id"] == "quarterly-report" for a in answers)

        pdf = make_pdf(tmp_path / "zephyr-owls.pdf", [["zephyrine owls nest in basalt cliffs"]])
        sent = call(
            f"{url}/api/documents", "POST", files={"files": (pdf.name, pdf.read_bytes(), "application/pdf")}
        )
        assert sent.status_code == 202, sent.text
        job = sent.json()["job"]["id"]
        followed_through = set()

        def ended() -> dict | None:
            answer = call(f"{url}/api/jobs/{job}")
            assert answer.status_code == 200, answer.text  # every process knows the job
            followed_through.add(int(answer.headers["x-pagesight-worker"]))
            found = answer.json()
            return found if found["state"] in ("done", "failed") else None

        done = until(ended, 120, "the job ends")
        assert done["state"] == "done" and done["added"] == ["zephyr-owls"], done

        finders = set()

        def both_find_it() -> bool:
            answer = call(f"{url}/api/search", params={"q": "zephyrine basalt"})
            hits = answer.json()["hits"]
            if hits and hits[0]["doc_id"] == "zephyr-owls":
                finders.add(int(answer.headers["x-pagesight-worker"]))
            return len(finders) == 2

        until(both_find_it, 60, "both processes find the new document")
        assert finders == workers
        until(lambda: ended() and followed_through == workers, 60, "the job is read through both processes")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


def _answers(url: str) -> bool:
    try:
        return call(url).status_code == 200
    except httpx.TransportError:
        return False
