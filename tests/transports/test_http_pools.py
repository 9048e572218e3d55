"""Store I/O never queues behind sync tools: with every tool thread blocked (dropped calls included), a
call that writes to the SQLite store is answered at once. The real server, real SQLite file."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import orjson
import pytest

from cli.test_serve import PV, body, http_server, post

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

FLOOD = "tests/transports/apps/flood_app.py:app"


def fire_and_drop(port: int, seconds: float) -> None:
    """Start a call to the blocking sync tool and hang up (its thread keeps running)."""
    msg = body(9, "tools/call", {"name": "block", "arguments": {"seconds": seconds}})
    data = orjson.dumps(msg)
    head = (f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            f"accept: application/json\r\nmcp-protocol-version: {PV}\r\nmcp-method: tools/call\r\n"
            f"mcp-name: block\r\ncontent-length: {len(data)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(head + data)
        time.sleep(0.05)


def test_state_calls_do_not_wait_for_blocked_sync_tools(tmp_path: Path) -> None:
    state = f"sqlite:///{tmp_path / 'state.db'}"
    with http_server("--tool-threads", "4", "--state", state, app=FLOOD) as (url, _proc):
        port = int(url.split(":")[2].split("/")[0])
        r = post(url, body(1, "tools/call", {"name": "begin_note", "arguments": {}}))
        assert r.status_code == 200 and r.json()["result"]["content"][0]["text"].startswith("note_")
        for _ in range(8):  # twice the tool threads, all dropped by their clients
            fire_and_drop(port, 6)
        time.sleep(0.3)
        t0 = time.monotonic()
        r = post(url, body(2, "tools/call", {"name": "begin_note", "arguments": {}}))
        took = time.monotonic() - t0
        assert r.status_code == 200 and r.json()["result"]["content"][0]["text"].startswith("note_"), r.text
        assert took < 1.5, f"a store write waited {took:.1f} s behind blocked tools"
