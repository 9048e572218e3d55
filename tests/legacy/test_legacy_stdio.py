"""Legacy stdio: the process's first message picks its era, for the whole process."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services import CLI

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
APP = "tests/legacy/legacy_app.py:app"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}}}


class Proc:
    def __init__(self, *extra: str) -> None:
        self.p = subprocess.Popen([CLI, "serve", APP, "--stdio", "--state", "memory://", *extra], cwd=ROOT,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.put(json.loads(line))

    def send(self, message: dict[str, Any]) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps(message).encode() + b"\n")
        self.p.stdin.flush()

    def until(self, id_: Any) -> list[dict[str, Any]]:
        """Every message up to and including the response with `id_`."""
        got = []
        while True:
            m = self.lines.get(timeout=10)
            got.append(m)
            if m.get("id") == id_ and "method" not in m:
                return got

    def close(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()
        self.p.wait(10)


@pytest.fixture
def proc() -> Iterator[Proc]:
    p = Proc()
    yield p
    p.close()


def test_initialize_first_makes_the_process_legacy(proc: Proc) -> None:
    proc.send(INIT)
    init = proc.until(0)[-1]
    assert init["result"]["protocolVersion"] == "2025-06-18"
    proc.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    proc.send({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "error"}})
    assert proc.until(1)[-1]["result"] == {}
    proc.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "chatty", "arguments": {}, "_meta": {"progressToken": "t"}}})
    got = proc.until(2)
    assert [m.get("method") for m in got] == ["notifications/message", "notifications/progress",
                                              "notifications/progress", None]
    assert got[0]["params"] == {"level": "error", "data": "error line"}
    assert got[-1]["result"] == {"content": [{"type": "text", "text": "done"}]}


def test_a_server_sent_elicitation_over_stdio(proc: Proc) -> None:
    proc.send(INIT)
    proc.until(0)
    proc.send({"jsonrpc": "2.0", "id": "call", "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}})
    ask = proc.lines.get(timeout=10)
    assert ask["method"] == "elicitation/create" and ask["params"]["message"] == "What is your name?"
    proc.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Di"}}})
    assert proc.until("call")[-1]["result"]["content"][0]["text"] == "Hello, Di (accept)"


def test_a_modern_first_message_keeps_the_process_modern(proc: Proc) -> None:
    proc.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}})
    assert proc.until(1)[-1]["result"]["resultType"] == "complete"
    proc.send(INIT)
    assert proc.until(0)[-1]["error"]["code"] == -32601


def test_legacy_reject_on_stdio() -> None:
    p = Proc("--legacy", "reject")
    try:
        p.send(INIT)
        assert p.until(0)[-1]["error"]["code"] == -32601
    finally:
        p.close()
