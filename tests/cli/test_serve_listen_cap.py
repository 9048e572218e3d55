"""`serve --listen-max-subscriptions` reaches the app: a listen naming more URIs is refused with the cap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def listen(cap_args: list[str], uris: list[str]) -> dict[str, object]:
    msg = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
           "params": {"notifications": {"resourceSubscriptions": uris}, "_meta": META}}
    # stdin closes after the line: a refused listen answers at once; an accepted one is acknowledged
    # and then ended by EOF with its final result.
    r = subprocess.run([sys.executable, "-m", "mcp_stateless.cli", "serve", "examples/conformance_server.py:app",
                        "--stdio", "--state", "memory://", *cap_args],
                       input=orjson.dumps(msg) + b"\n", capture_output=True, cwd=ROOT, timeout=30)
    assert r.returncode == 0, r.stderr
    first: dict[str, object] = orjson.loads(r.stdout.splitlines()[0])
    return first


def test_the_cap_from_the_command_line_refuses_a_larger_filter() -> None:
    answer = listen(["--listen-max-subscriptions", "2"], ["test://a", "test://b", "test://c"])
    assert answer["id"] == 1
    assert answer["error"] == {"code": -32602, "message": "notifications.resourceSubscriptions has 3 entries; "
                                                          "at most 2 per listen stream", "data": {"limit": 2}}


def test_within_the_cap_the_listen_is_acknowledged() -> None:
    answer = listen(["--listen-max-subscriptions", "3"], ["test://a", "test://b", "test://c"])
    assert answer["method"] == "notifications/subscriptions/acknowledged"
