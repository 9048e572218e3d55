"""Exact wire behaviour of the Client against a scripted raw HTTP server (real sockets, no mocks)."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from mcp_stateless import Client
from mcp_stateless.client import EraCache, InvalidResult, StreamBroken, TooManyRounds

from .conftest import err, ok

PV = "io.modelcontextprotocol/protocolVersion"


def elicit(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"confirmed": True}}


TOOLS = {"tools": [
    {"name": "t", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "n": {"type": "integer", "x-mcp-header": "N"},
        "deep": {"type": "object", "properties": {"flag": {"type": "boolean", "x-mcp-header": "Flag"}}}}}},
    {"name": "bad", "inputSchema": {"type": "object", "properties": {"x": {"type": "number", "x-mcp-header": "X"}}}},
], "resultType": "complete", "ttlMs": 60000, "cacheScope": "public"}


async def test_every_request_is_self_contained_with_mirrored_headers(scripted: Any, caplog: Any) -> None:
    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        if msg["method"] == "tools/list":
            return ok(msg["id"], TOOLS)
        return ok(msg["id"], {"resultType": "complete", "content": []})

    s = await scripted(handler)
    async with Client(s.url, version="2026-07-28", elicitation=elicit, client_info={"name": "x", "version": "1"}) as c:
        with caplog.at_level(logging.WARNING):
            names = [t["name"] for t in await c.list_tools()]
        assert names == ["t"]  # `bad` annotates a number: dropped with a warning
        assert "dropping tool 'bad'" in caplog.text
        await c.call_tool("t", {"region": " Grüße", "n": 7, "deep": {"flag": False}})
        await c.call_tool("t", {"region": None})
    (_, lh), (_, ch), (_, ch2) = s.requests
    for msg, h in s.requests:
        meta = msg["params"]["_meta"]
        assert meta[PV] == "2026-07-28" == h["mcp-protocol-version"]
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {"form": {}}}
        assert meta["io.modelcontextprotocol/clientInfo"] == {"name": "x", "version": "1"}
        assert h["mcp-method"] == msg["method"]
        assert h["accept"] == "application/json, text/event-stream"
    assert "mcp-name" not in lh
    assert ch["mcp-name"] == "t"
    assert ch["mcp-param-region"] == "=?base64?IEdyw7zDn2U=?="
    assert ch["mcp-param-n"] == "7" and ch["mcp-param-flag"] == "false"
    assert not any(k.startswith("mcp-param-") for k in ch2)  # null value: no header
    assert s.connections == 1  # keep-alive: one connection for all three requests


async def test_mrtr_retry_new_id_same_params_state_byte_exact_then_no_leak(scripted: Any) -> None:
    state = 'v1."quoted"\\u00e9 ✓'

    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        p = msg["params"]
        if msg["method"] == "tools/list":
            return ok(msg["id"], {"tools": [], "resultType": "complete"})
        if p["name"] == "stateful" and "inputResponses" not in p:
            return ok(msg["id"], {"resultType": "input_required", "requestState": state, "inputRequests": {
                "confirm": {"method": "elicitation/create", "params": {"message": "ok?", "requestedSchema": {
                    "type": "object", "properties": {"confirmed": {"type": "boolean"}}}}}}})
        if p["name"] == "stateless" and "inputResponses" not in p:
            return ok(msg["id"], {"resultType": "input_required", "inputRequests": {
                "confirm": {"method": "elicitation/create", "params": {"message": "ok?", "requestedSchema": {}}}}})
        return ok(msg["id"], {"content": [{"type": "text", "text": "done"}]})  # no resultType: complete

    s = await scripted(handler)
    async with Client(s.url, version="2026-07-28", elicitation=elicit) as c:
        r = await c.call_tool("stateful", {"a": 1})
        assert r["content"][0]["text"] == "done"
        await c.call_tool("stateless", {"a": 2})
        await c.call_tool("other", {})
    calls = [m for m, _ in s.requests if m["method"] == "tools/call"]
    first, retry, nfirst, nretry, other = calls
    assert retry["id"] != first["id"] and nretry["id"] != nfirst["id"]
    assert retry["params"]["arguments"] == {"a": 1}
    assert retry["params"]["requestState"] == state
    assert retry["params"]["inputResponses"] == {"confirm": {"action": "accept", "content": {"confirmed": True}}}
    assert "requestState" not in nretry["params"] and "inputResponses" in nretry["params"]
    assert "requestState" not in other["params"] and "inputResponses" not in other["params"]


async def test_unknown_result_type_and_round_limit(scripted: Any) -> None:
    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        if msg["method"] == "tools/list":
            return ok(msg["id"], {"tools": []})
        if msg["params"]["name"] == "weird":
            return ok(msg["id"], {"resultType": "surprise"})
        return ok(msg["id"], {"resultType": "input_required", "requestState": "again"})

    s = await scripted(handler)
    async with Client(s.url, version="2026-07-28", max_rounds=3) as c:
        with pytest.raises(InvalidResult):
            await c.call_tool("weird", {})
        with pytest.raises(TooManyRounds):
            await c.call_tool("loop", {})
    assert sum(1 for m, _ in s.requests if m.get("params", {}).get("name") == "loop") == 4


async def test_unsupported_version_retry_uses_data_supported(scripted: Any) -> None:
    seen: list[str] = []

    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        seen.append(h["mcp-protocol-version"])
        if len(seen) == 1:
            return err(400, msg["id"], -32022, "Unsupported protocol version",
                       {"supported": ["2026-07-28"], "requested": "2026-07-28"})
        return ok(msg["id"], {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {},
                              "ttlMs": 0, "cacheScope": "public"})

    s = await scripted(handler)
    async with Client(s.url) as c:
        assert c.era == "modern"
    ids = [m["id"] for m, _ in s.requests]
    assert len(ids) == 2 and ids[0] != ids[1]


async def test_sse_with_comments_and_chunks(scripted: Any) -> None:
    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        final = orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"resultType": "complete", "tools": []}})
        return 200, "text/event-stream", [b": keep-alive\r\n\r\n", b"event: message\r\nda", b"ta: " + final[:10],
                                          b"\r\ndata:" + final[10:] + b"\r\n\r\n"]

    s = await scripted(handler)
    async with Client(s.url, version="2026-07-28") as c:
        # the data is split over two `data:` lines: joined with a newline, still one JSON document
        assert await c.list_tools() == []


async def test_broken_stream_is_an_error_and_reissued_only_when_safe(scripted: Any) -> None:
    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        if msg["method"] == "tools/list":
            return ok(msg["id"], {"tools": []})
        n = sum(1 for m, _ in s.requests if m["method"] == "tools/call")
        if n <= 2:  # the first call, and the first try of the second
            return -1, "text/event-stream", [b": working\n\n"]
        return ok(msg["id"], {"resultType": "complete", "content": []})

    s = await scripted(handler)
    async with Client(s.url, version="2026-07-28") as c:
        with pytest.raises(StreamBroken, match="not re-issued"):
            await c.call_tool("x", {})
        assert (await c.call_tool("x", {}, safe=True))["content"] == []
    calls = [m for m, _ in s.requests if m["method"] == "tools/call"]
    assert len(calls) == 3 and calls[1]["id"] != calls[2]["id"]


async def test_auto_falls_back_to_legacy_and_reinitialises_after_404(scripted: Any) -> None:
    sessions = iter(["s1", "s2"])
    live: set[str] = set()

    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        method = msg.get("method")
        if "_http" in msg:  # the DELETE that ends the session on close
            return 405, "text/plain", [b"no"]
        if method == "server/discover":
            return err(400, msg["id"], -32000, "Bad Request: Server not initialized")
        if method == "initialize":
            sid = next(sessions)
            live.add(sid)
            body = orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "old", "version": "1"}}})
            return 200, f"application/json\r\nMcp-Session-Id: {sid}", [body]
        if method == "notifications/initialized":
            return 202, "application/json", [b""]
        if h.get("mcp-session-id") not in live:
            return 404, "text/plain", [b"session expired"]
        live.discard("s1")  # expire the first session after one call
        return ok(msg["id"], {"content": [{"type": "text", "text": h["mcp-session-id"]}]})

    s = await scripted(handler)
    async with Client(s.url) as c:
        assert c.era == "legacy" and c.version == "2025-06-18"
        assert (await c.call_tool("x", {}))["content"][0]["text"] == "s1"
        assert (await c.call_tool("x", {}))["content"][0]["text"] == "s2"
    methods = [m.get("method") or m["_http"].split()[0] for m, _ in s.requests]
    assert methods == ["server/discover", "initialize", "notifications/initialized", "tools/call", "tools/call",
                       "initialize", "notifications/initialized", "tools/call", "DELETE"]
    init = s.requests[1][0]
    assert "_meta" not in init["params"] and init["params"]["protocolVersion"] == "2025-11-25"
    assert s.requests[3][1]["mcp-protocol-version"] == "2025-06-18"


async def test_http_error_with_null_id_is_the_requests_error(scripted: Any) -> None:
    """A 4xx carrying a JSON-RPC error with id null (e.g. the TS SDK 1.x "Server not initialized") rejects the
    request it answers: an McpError, not a broken stream, and a safe request is not re-issued."""
    from mcp_stateless.protocol.errors import McpError

    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        return err(400, None, -32000, "Bad Request: Server not initialized")

    s = await scripted(handler)
    async with Client(s.url, version="2026-07-28") as c:
        with pytest.raises(McpError) as e:
            await c.request("tools/list", {})
    assert e.value.code == -32000 and e.value.message == "Bad Request: Server not initialized"
    assert [m["method"] for m, _ in s.requests] == ["tools/list"]


async def test_an_era_cache_shared_between_clients_probes_each_server_once(scripted: Any) -> None:
    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        return ok(msg["id"], {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {}})

    s = await scripted(handler)
    eras = EraCache()
    for _ in range(2):
        async with Client(s.url, era_cache=eras) as c:
            assert c.era == "modern"
    assert eras.get(c.channel.key) == ("modern", "2026-07-28")
    assert [m["method"] for m, _ in s.requests] == ["server/discover"]
    async with Client(s.url) as c:  # a client of its own has a cache of its own
        assert c.era == "modern"
    assert [m["method"] for m, _ in s.requests] == ["server/discover", "server/discover"]
