"""A real `pagesight serve` process attacked from outside: killed with SIGKILL in the middle of an
ingestion and started again (no job stays queued or running for ever, every uploaded file ends up
ingested once), and asked for a page of a hundred inches square (its memory comes back)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from pagesight import Index
from tests.conftest import make_pdf
from tests.serve.live import free_port, serve_command, until

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
KEY = "crash-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}


class Server:
    """``pagesight serve`` in a process group of its own, on a free loopback port."""

    def __init__(self, index: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = serve_command(index, self.port)
        env = {**os.environ, "PAGESIGHT_API_KEY": KEY}
        self.process = subprocess.Popen(command, env=env, start_new_session=True, stderr=subprocess.PIPE)
        until(lambda: self.answers(), 90, "the server answers")

    def answers(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the server exited: {self.process.stderr.read().decode()[-2000:]}")
        try:
            return httpx.get(f"{self.url}/api/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def get(self, path: str, **options) -> httpx.Response:
        return httpx.get(self.url + path, headers=AUTH, timeout=60, **options)

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1]) / 1024

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def kill_unreaped(self) -> None:
        """SIGKILL, its exit left uncollected: the process stays a zombie, as a server whose
        parent does not wait for it does."""
        os.killpg(self.process.pid, signal.SIGKILL)
        until(lambda: _state(self.process.pid) == "Z", 30, "the killed server is a zombie")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)


@pytest.mark.timeout(300)
def test_jobs_killed_with_their_server_are_finished_by_the_next_one(tmp_path: Path):
    index = tmp_path / "ix"
    Index.open(index, settings={"dense_model": None}).close()
    files = [
        (
            "files",
            (
                f"report{n}.pdf",
                make_pdf(
                    tmp_path / f"r{n}.pdf", [[f"annual report {n} page {p}"] for p in range(6)]
                ).read_bytes(),
            ),
        )
        for n in range(12)
    ]
    server = Server(index)
    try:
        big = httpx.post(f"{server.url}/api/documents", files=files, headers=AUTH, timeout=60).json()["job"][
            "id"
        ]
        one = make_pdf(tmp_path / "memo.pdf", [["a memo queued behind the reports"]]).read_bytes()
        small = httpx.post(
            f"{server.url}/api/documents", files={"files": ("memo.pdf", one)}, headers=AUTH, timeout=60
        ).json()["job"]["id"]
        until(
            lambda: server.get(f"/api/jobs/{big}").json()["done"] >= 1, 120, "the first files ingested", 0.02
        )
        server.kill()  # SIGKILL: no clean-up runs
    finally:
        server.stop()
    records = {path.stem: path.read_text() for path in (index / "uploads" / ".jobs").glob("*.json")}
    assert '"state": "running"' in records[big] and '"state": "queued"' in records[small]
    again = Server(index)
    try:
        for job in (big, small):
            until(
                lambda job=job: again.get(f"/api/jobs/{job}").json()["state"] in ("done", "failed"), 180, job
            )
            assert again.get(f"/api/jobs/{job}").json()["state"] == "done"
        ids = {row["id"] for row in again.get("/api/documents").json()["documents"]}
        assert ids == {f"report{n}" for n in range(12)} | {"memo"}
        hits = again.get("/api/search", params={"q": "annual report 11"}).json()["hits"]
        assert hits[0]["doc_id"] == "report11"
    finally:
        again.stop()
    assert not any((index / "uploads" / ".staging").iterdir())  # every staged file swapped in
    # issue 60, defect 9: a file the killed server had swapped in already is swapped again by the
    # next one, a rename between two links of one file, which left the temporary link behind
    assert not list((index / "uploads").glob(".swap-*"))


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.timeout(300)
def test_a_zombie_servers_jobs_are_taken_over_by_a_live_server_without_a_restart(tmp_path: Path):
    from fastapi.testclient import TestClient

    from pagesight.serve.app import create_app

    index = tmp_path / "ix"
    Index.open(index, settings={"dense_model": None}).close()
    reports = [
        (
            "files",
            (f"report{n}.pdf", make_pdf(tmp_path / f"r{n}.pdf", [[f"annual report {n}"]] * 4).read_bytes()),
        )
        for n in range(8)
    ]
    with TestClient(create_app(Index.open(index, create=False), api_key=KEY)) as live:  # up before the kill
        server = Server(index)
        try:
            job = httpx.post(f"{server.url}/api/documents", files=reports, headers=AUTH, timeout=60).json()
            job = job["job"]["id"]
            until(
                lambda: server.get(f"/api/jobs/{job}").json()["done"] >= 1,
                120,
                "the first files ingested",
                0.02,
            )
            server.kill_unreaped()
            assert live.get(f"/api/jobs/{job}", headers=AUTH).json()["state"] in ("running", "queued")
            until(
                lambda: live.get(f"/api/jobs/{job}", headers=AUTH).json()["state"] in ("done", "failed"),
                180,
                "the live server finishes the zombie's job",
            )
            assert _state(server.process.pid) == "Z"  # taken over while the zombie was still there
            assert live.get(f"/api/jobs/{job}", headers=AUTH).json()["state"] == "done"
            ids = {row["id"] for row in live.get("/api/documents", headers=AUTH).json()["documents"]}
            assert ids == {f"report{n}" for n in range(8)}
        finally:
            server.stop()
            server.process.wait(timeout=30)


@pytest.mark.timeout(120)
def test_a_merger_the_server_starts_leaves_no_zombie(tmp_path: Path):
    from pagesight.store.local import merging

    make_pdf(tmp_path / "one.pdf", [["a page for the merger to find its index by"]])
    with Index.open(tmp_path / "ix", settings={"dense_model": None}) as index:
        assert index.add([tmp_path / "one.pdf"], jobs=1).ok
    held = tmp_path / "ix" / "retrievers" / "merging.lock"
    assert not held.exists()  # no merger ran yet: the lock file is the one it makes
    before = set(_children())
    merging.start(tmp_path / "ix")
    until(lambda: not (set(_children()) - before), 60, "the merger exits and is collected")
    assert held.exists()  # a merger ran (and took its lock), then left no zombie


def _children() -> list[int]:
    """This process's child processes, zombies included."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            found.append(int(stat.parent.name))
    return found


@pytest.mark.timeout(300)
def test_a_page_of_a_hundred_inches_does_not_keep_the_servers_memory(tmp_path: Path):
    from reportlab.pdfgen import canvas

    path = tmp_path / "poster.pdf"
    poster = canvas.Canvas(str(path), pagesize=(7200, 7200))
    poster.setFont("Helvetica", 48)
    poster.drawString(100, 7000, "a poster of a hundred inches square")
    poster.showPage()
    poster.save()
    assert path.stat().st_size < 4000
    index = tmp_path / "ix"
    with Index.open(index, settings={"dense_model": None}) as made:
        assert made.add([path], jobs=1).ok
    server = Server(index)
    try:
        assert server.get("/api/search", params={"q": "poster"}).json()["hits"]
        before = server.rss_mb()
        for _ in range(4):
            page = server.get("/api/page", params={"doc": "poster", "page": 1})
            assert page.status_code == 200 and len(page.content) > 0
        tile = server.get("/api/tile", params={"doc": "poster", "page": 1, "tile": 0})
        assert tile.status_code == 200
        after = server.rss_mb()
    finally:
        server.stop()
    assert after - before < 600, (before, after)  # a whole rendering at 100 dpi is 400 MB a copy


@pytest.mark.timeout(300)
def test_what_killed_servers_left_is_removed_and_nothing_a_live_process_writes(tmp_path: Path):
    """What a SIGKILL leaves between a temporary and its renaming, or between a job's end and its
    folder's removal, made by hand as each version names it; gone once a server starts, or on a
    delete. A live process's upload being staged stays."""
    import json
    import uuid

    from pagesight.serve.leftovers import OWNER, this_process

    index = tmp_path / "ix"
    Index.open(index, settings={"dense_model": None}).close()
    uploads = index / "uploads"
    staging, records = uploads / ".staging", uploads / ".jobs"
    records.mkdir(parents=True)
    gone = "999999999-1"  # a process that is not running

    def made(path: Path, data: bytes = b"%PDF-1.7 a whole copy of an upload") -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    finished = uuid.uuid4().hex  # a job that ended; killed before its folder was removed
    (records / f"{finished}.json").write_text(
        json.dumps({"id": finished, "files": ["a.pdf"], "state": "done"})
    )
    left = [
        made(uploads / f".swap-{uuid.uuid4().hex}"),  # as servers before this version named them
        made(uploads / f".swap-{gone}-{uuid.uuid4().hex}"),
        made(records / ".job-k2j4h1x9", b'{"id": '),
        made(staging / finished / "a.pdf"),
        made(staging / uuid.uuid4().hex / ".upload-w8e7r6t5"),  # an upload killed before queued
        made(staging / uuid.uuid4().hex / OWNER, f"{gone.replace('-', ':')}".encode()),
    ]
    uploading = staging / uuid.uuid4().hex  # this live process's upload, not queued yet
    kept = [
        made(uploading / OWNER, this_process().encode()),
        made(uploading / f".upload-{this_process().replace(':', '-')}-a1b2c3d4"),
    ]
    server = Server(index)
    try:
        assert not any(path.exists() for path in left), [str(p) for p in left if p.exists()]
        assert not (staging / finished).exists()
        assert all(path.exists() for path in kept)
        later = made(uploads / f".swap-{gone}-{uuid.uuid4().hex}")
        memo = make_pdf(tmp_path / "memo.pdf", [["a memo to delete"]]).read_bytes()
        sent = httpx.post(f"{server.url}/api/documents", files={"files": ("memo.pdf", memo)}, headers=AUTH)
        job = sent.json()["job"]["id"]
        until(lambda: server.get(f"/api/jobs/{job}").json()["state"] == "done", 120, "the memo ingested")
        assert httpx.delete(f"{server.url}/api/documents/memo", headers=AUTH, timeout=60).status_code == 200
        assert not later.exists() and all(path.exists() for path in kept)
    finally:
        server.stop()
    assert sorted(path.name for path in uploads.iterdir()) == [".jobs", ".staging"]
    assert sorted(path.name for path in staging.iterdir()) == [uploading.name]
    assert sorted(path.name for path in uploading.iterdir()) == sorted(path.name for path in kept)
