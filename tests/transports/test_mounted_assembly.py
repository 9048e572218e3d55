"""`App.asgi()` and `mcp-stateless serve --http` are one assembly (`server.compose.http_transport`): an app
mounted in FastAPI serves 2025 clients (the official `mcp` 1.x client through a whole initialize,
tools/list, tools/call), the Server Card, `/healthz`, `/readyz` and (asked for) `/metrics`, answering
them as `serve` does; the mount point is the endpoint, and its sub-resources hang off it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from mcp_stateless import App
from mcp_stateless.cli import build_parser
from mcp_stateless.cli.serve import _transport, config_from_args
from services import http_server, need

ROOT = Path(__file__).resolve().parents[2]
APPS = Path(__file__).parent / "apps"
MCP1_PY = ROOT / ".cache" / "venv-mcp-1.30.0" / "bin" / "python"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
LEGACY_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def make_app() -> App:
    app = App("assembly", "1.0.0")

    @app.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return app


def served(*flags: str) -> Any:
    """What `mcp-stateless serve --http` builds for a fresh app, with `flags`."""
    config = config_from_args(build_parser().parse_args(
        ["serve", "x.py:app", "--http", "127.0.0.1:8000", "--state", "memory://", *flags]), {})
    return _transport(config, make_app())


def mounted(**options: Any) -> FastAPI:
    mcp = make_app().asgi(**options)
    api = FastAPI(lifespan=mcp.lifespan)
    api.add_route("/mcp", mcp)
    api.mount("/mcp", mcp)
    return api


def client(asgi: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1:8000")


async def get(asgi: Any, path: str) -> httpx.Response:
    async with client(asgi) as c:
        return await c.get(path)


@pytest.mark.slow
def test_the_official_mcp1_client_completes_a_session_against_an_app_mounted_in_fastapi() -> None:
    need(MCP1_PY, "the mcp 1.30.0 venv")
    argv = [sys.executable, "-m", "uvicorn", "--app-dir", str(APPS), "mounted_fastapi:api", "--host", "127.0.0.1",
            "--port", "{port}", "--log-level", "warning"]
    with http_server(argv, "uvicorn mounted_fastapi:api", cwd=ROOT) as url:
        done = subprocess.run([str(MCP1_PY), str(APPS / "mcp1_basic.py"), url], cwd=ROOT, capture_output=True,
                              text=True, timeout=90)
        health = httpx.get(url + "/healthz", timeout=10)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["version"] == "2025-11-25"
    assert out["server"] == "mounted-notes"
    assert out["sessionId"]  # a 2025 session, made by the mounted app's legacy branch
    assert out["tools"] == ["add"]
    assert (out["text"], out["isError"]) == ("42", False)
    assert (health.status_code, health.json()) == (200, {"status": "ok"})


async def test_a_mounted_app_answers_2025_initialize_as_serve_does() -> None:
    async with client(mounted()) as c:
        mine = await c.post("/mcp", json=INIT, headers=LEGACY_HEADERS)
    async with client(served()) as c:
        theirs = await c.post("/mcp", json=INIT, headers=LEGACY_HEADERS)
    assert mine.status_code == theirs.status_code == 200
    assert mine.headers["mcp-session-id"] and theirs.headers["mcp-session-id"]
    assert mine.json()["result"]["protocolVersion"] == theirs.json()["result"]["protocolVersion"] == "2025-11-25"


async def test_legacy_reject_refuses_2025_clients_as_serve_legacy_reject_does() -> None:
    async with client(mounted(legacy="reject")) as c:
        mine = await c.post("/mcp", json=INIT, headers=LEGACY_HEADERS)
    async with client(served("--legacy", "reject")) as c:
        theirs = await c.post("/mcp", json=INIT, headers=LEGACY_HEADERS)
    assert mine.status_code == theirs.status_code
    assert mine.json()["error"]["code"] == theirs.json()["error"]["code"]
    assert "mcp-session-id" not in mine.headers


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_health_of_the_mounted_app_equals_serves(path: str) -> None:
    api = mounted()
    async with api.router.lifespan_context(api):  # started, as under uvicorn
        mine = await get(api, "/mcp" + path)
    asgi = served()
    async with asgi.lifespan():
        theirs = await get(asgi, path)
    assert mine.status_code == theirs.status_code == 200
    assert mine.json() == theirs.json()
    assert mine.headers["cache-control"] == theirs.headers["cache-control"] == "no-store"


async def test_the_server_card_of_the_mounted_app_equals_serves() -> None:
    mine = await get(mounted(), "/mcp/server-card")
    theirs = await get(served(), "/mcp/server-card")
    assert mine.status_code == theirs.status_code == 200
    assert mine.headers["content-type"] == theirs.headers["content-type"]
    assert mine.json() == theirs.json()
    assert mine.json()["remotes"][0]["url"] == "http://127.0.0.1:8000/mcp"


async def test_metrics_of_the_mounted_app_are_served_as_serve_serves_them() -> None:
    api = mounted(metrics=True)
    asgi = served("--metrics")
    for target in (api, asgi):
        async with client(target) as c:
            called = await c.post("/mcp", headers={**LEGACY_HEADERS, "mcp-protocol-version": "2026-07-28",
                                                   "mcp-method": "tools/call", "mcp-name": "add"}, json={
                "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {
                    "a": 1, "b": 2}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                               "io.modelcontextprotocol/clientCapabilities": {}}}})
            assert called.status_code == 200, called.text
    mine = await get(api, "/mcp/metrics")
    theirs = await get(asgi, "/metrics")
    assert mine.status_code == theirs.status_code == 200
    assert mine.headers["content-type"] == theirs.headers["content-type"]
    names = [{line.split("{")[0].split(" ")[0] for line in r.text.splitlines() if line and not line.startswith("#")}
             for r in (mine, theirs)]
    assert names[0] == names[1]
    for r in (mine, theirs):  # the one call, counted by the metrics the assembly put in front of the app
        count = [line for line in r.text.splitlines() if line.startswith(
            "mcp_server_operation_duration_seconds_count{") and 'gen_ai_tool_name="add"' in line]
        assert len(count) == 1 and count[0].endswith(" 1.0"), count


async def test_without_metrics_the_mounted_app_has_no_metrics_route() -> None:
    assert (await get(mounted(), "/mcp/metrics")).status_code == 404
