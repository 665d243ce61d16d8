"""A real uvicorn server on a free loopback port, in a thread of the test process; a free port;
waiting for a condition."""

from __future__ import annotations

import socket
import sys
import threading
import time

import uvicorn

from pagesight.serve.workers import http_protocol


def free_port() -> int:
    """A loopback port no one listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve_command(index, port: int, *more: str) -> list[str]:
    """The command line of a real ``pagesight serve`` process over ``index`` on ``port``."""
    return [sys.executable, "-m", "pagesight", "serve", "--index", str(index), "--port", str(port), *more]


def until(condition, seconds: float, what: str, every: float = 0.2):
    """``condition()``'s first true answer within ``seconds``, asked every ``every`` seconds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"not within {seconds} s: {what}")


class LiveServer:
    def __init__(self, app, timeout: float = 30.0):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # serve's own protocol (how it reads an absolute-form request line's host)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", http=http_protocol()
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on port {self.port}")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
