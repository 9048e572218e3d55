"""Our Client against the official Python SDK server (mcp 2.3.0, its own venv), over HTTP and stdio."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless import Client
from mcp_stateless.client import Acknowledged, ToolsListChanged
from services import http_server, need

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PY = ROOT / ".cache" / "venv-mcp-2.3.0" / "bin" / "python"
SERVER = ROOT / "tests" / "interop" / "servers" / "py_mcp_server.py"


@pytest.fixture(autouse=True, scope="module")
def _installed() -> None:
    need(PY, "the official SDK venv (mcp==2.3.0)")


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_server([str(PY), str(SERVER), "http", "{port}"], "the official Python server") as url:
        yield url


@pytest.fixture(params=["http", "stdio"])
def client(request: pytest.FixtureRequest, http_url: str) -> Client:
    kw: dict[str, Any] = {"elicitation": lambda p: {"action": "accept", "content": {"name": "Ada"}}}
    if request.param == "http":
        return Client(http_url, **kw)
    return Client(stdio=[str(PY), str(SERVER), "stdio"], **kw)


async def test_discover_list_call_mrtr_read(client: Client) -> None:
    async with client as c:
        d = await c.discover()
        assert c.era == "modern" and "2026-07-28" in d["supportedVersions"]
        assert (c.server_info or {}).get("name") == "py-interop"
        assert [t["name"] for t in await c.list_tools()] == ["echo", "greet", "toggle"]
        r = await c.call_tool("echo", {"text": "héllo ✓"})
        assert r["content"] == [{"type": "text", "text": "héllo ✓"}]
        r = await c.call_tool("greet", {})
        assert r["content"] == [{"type": "text", "text": "Hello, Ada!"}]
        r = await c.read_resource("test://hello")
        assert r["contents"][0]["text"] == "hello from python"


async def test_listen_tools_list_changed(client: Client) -> None:
    async with client as c, c.listen(tools=True) as sub:
        it = aiter(sub)
        ack = await asyncio.wait_for(anext(it), 10)
        assert isinstance(ack, Acknowledged) and ack.honoured == {"toolsListChanged": True} and ack.dropped == {}
        r = await c.call_tool("toggle", {})
        assert r["content"] == [{"type": "text", "text": "added"}]
        ev = await asyncio.wait_for(anext(it), 10)
        assert isinstance(ev, ToolsListChanged) and ev.method == "notifications/tools/list_changed"
        assert ev.params["_meta"]["io.modelcontextprotocol/subscriptionId"] is not None
        assert [t["name"] for t in await c.list_tools()] == ["echo", "greet", "toggle", "extra"]
        r = await c.call_tool("toggle", {})  # back to the original list for the other tests
        assert r["content"] == [{"type": "text", "text": "removed"}]
        ev = await asyncio.wait_for(anext(it), 10)
        assert isinstance(ev, ToolsListChanged)
        assert [t["name"] for t in await c.list_tools()] == ["echo", "greet", "toggle"]
