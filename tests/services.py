"""Real services for tests, started on free loopback ports (never the machine's own Redis on 6379)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

# The package's console script beside the interpreter running the tests, never a hard-coded .venv/bin, so the
# suite runs against a venv kept anywhere (a tox env, a CI cache).
CLI = str(Path(sys.executable).with_name("mcp-stateless"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def unavailable(reason: str) -> None:
    """The one way a test gives up on a missing capability: skip locally, fail under CI (where .ci/run must
    have provided it), so nothing goes unrun in CI without a red test (tests/test_skips.py holds every
    skip to this)."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must provide it")
    pytest.skip(reason)


def need(path: Path, what: str) -> None:
    """Skip when a tool .ci/run installs is missing locally; fail under CI, where it must be there."""
    if not path.exists():
        unavailable(f"{what} not installed at {path}; run .ci/run")


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 20) -> None:
    """Wait until something listens on 127.0.0.1:port; fail at once if `proc` exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start (exit {proc.poll()})")
        time.sleep(0.05)


@contextlib.contextmanager
def http_server(argv: Sequence[str], what: str, path: str = "/mcp", **popen: object) -> Iterator[str]:
    """Run a server subprocess whose argv contains "{port}" (replaced by a free port); yield its URL."""
    port = free_port()
    proc = subprocess.Popen([a.replace("{port}", str(port)) for a in argv],  # type: ignore[call-overload]
                            stderr=popen.pop("stderr", subprocess.DEVNULL), **popen)
    try:
        wait_port(port, proc, what)
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class RedisServer:
    """A real redis-server subprocess without persistence; stop()/start() keep the same port.
    `isolated_url()` gives each test its own key prefix on the one shared server."""

    def __init__(self, workdir: Path) -> None:
        exe = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(exe).exists():
            pytest.fail("redis-server is not installed (.ci/run installs it)")
        self.exe = exe
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._prefixes = 0

    def isolated_url(self, query: str = "") -> str:
        self._prefixes += 1
        return f"{self.url}?prefix=t{self._prefixes}:" + (f"&{query}" if query else "")

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir), "--daemonize", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
