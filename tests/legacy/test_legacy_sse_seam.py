"""The 2024-11-05 HTTP+SSE transport's channels (server/legacy/sse.py) at the legacy branch's seam, in
process: `sse_open` gives the sealed channel reference and its stream, `sse_post` takes what the client
POSTs to it. What the HTTP tests (test_legacy_sse.py, against `serve --legacy-sse` processes) see through
sockets is pinned here exactly: each refusal's outcome and message, the order of a call's messages on the
stream, what an unread stream does at its byte bound, and what is left once the stream is gone."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from mcp_stateless import App, Context
from mcp_stateless.protocol.endpoint import KEEPALIVE, LegacyItem, LegacyOutcome, SseEvent
from mcp_stateless.protocol.principal import ANONYMOUS, Principal
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.server.legacy.sse import CHANNEL_NS, _ByteBoundedQueue
from mcp_stateless.state import StateBundle
from mcp_stateless.state.events import ChangeEventBus
from mcp_stateless.state.handles import HandleStore
from mcp_stateless.state.memory import MemoryBus, MemoryRecords

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
HEADERS = {"content-type": "application/json"}
WAIT = 3.0  # seconds one stream item may take: in process it takes milliseconds, even on a loaded machine


def make_app() -> App:
    app = App("sse-seam", "1.0.0")

    @app.tool()
    def greet(name: str) -> str:
        """Greets"""
        return f"Hello, {name}!"

    @app.tool()
    async def chatty(ctx: Context) -> str:
        """Logs, reports progress, then answers"""
        ctx.log("info", "info line")
        ctx.report_progress(1, 2)
        await asyncio.sleep(0.01)
        ctx.report_progress(2, 2)
        return "done"

    @app.tool()
    def ask_name(ctx: Context) -> str:
        """Asks the user's name"""
        answer = ctx.elicit("What is your name?", NAME_FORM, key="name")
        return f"Hello, {(answer.content or {}).get('name', '?')} ({answer.action})"

    @app.tool()
    async def change_tools() -> str:
        """Tells every listener that the tool list changed"""
        await app.notify_tools_changed()
        return "changed"

    @app.tool()
    def big(size: int) -> str:
        """A long answer"""
        return "x" * size

    return app


def rpc(method: str, params: dict[str, Any] | None = None, id_: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    if id_ is not None:
        msg["id"] = id_
    return msg


INIT = rpc("initialize", {"protocolVersion": "2024-11-05", "capabilities": {"elicitation": {}},
                          "clientInfo": {"name": "seam", "version": "0"}}, 0)


class Channel:
    """One channel: the stream read by a task into a queue (keep-alives counted apart), POSTs by `post`."""

    def __init__(self, server: LegacyServer, token: str, stream: AsyncGenerator[LegacyItem, None],
                 principal: Principal) -> None:
        self.server = server
        self.token = token
        self.stream = stream
        self.principal = principal
        self.items: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.keepalives = 0
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for item in self.stream:
                if item is KEEPALIVE:
                    self.keepalives += 1
                else:
                    assert isinstance(item, SseEvent) and item.message is not None
                    await self.items.put(item.message)
        finally:
            await self.items.put(None)  # the stream ended

    async def post(self, message: Any, token: str | None = None) -> Any:
        return await self.server.sse_post(token or self.token, message, HEADERS, self.principal)

    async def message(self) -> dict[str, Any]:
        got = await asyncio.wait_for(self.items.get(), WAIT)
        assert got is not None, "the stream ended"
        return got

    async def close(self) -> None:
        self.reader.cancel()
        await asyncio.gather(self.reader, return_exceptions=True)
        await self.stream.aclose()


async def open_channel(server: LegacyServer, principal: Principal = ANONYMOUS) -> Channel:
    token, stream = await server.sse_open(principal)
    return Channel(server, token, stream, principal)


async def initialized(ch: Channel) -> dict[str, Any]:
    accepted = await ch.post(INIT)
    assert accepted.kind is LegacyOutcome.ACCEPTED and accepted.message is None
    result = await ch.message()
    assert (await ch.post(rpc("notifications/initialized"))).kind is LegacyOutcome.ACCEPTED
    return result


async def test_requests_before_initialize_are_answered_on_the_stream_and_a_notification_refused() -> None:
    app = make_app()
    server = LegacyServer(app)
    ch = await open_channel(server)
    try:
        probe = await ch.post(rpc("server/discover", {}, "d"))
        assert probe.kind is LegacyOutcome.ACCEPTED and probe.message is None
        assert await ch.message() == {"jsonrpc": "2.0", "id": "d", "error": {
            "code": -32601, "message": "Method not found: server/discover (this is the 2024-11-05 HTTP+SSE "
                                       "transport: send initialize)"}}
        early = await ch.post(rpc("tools/list", {}, 1))
        assert early.kind is LegacyOutcome.ACCEPTED
        assert await ch.message() == {"jsonrpc": "2.0", "id": 1, "error": {
            "code": -32600, "message": "send initialize first (tools/list before initialize)"}}
        note = await ch.post(rpc("notifications/initialized"))
        assert note.kind is LegacyOutcome.BAD_REQUEST
        assert note.message == {"jsonrpc": "2.0", "error": {
            "code": -32600, "message": "send initialize first"}}
        malformed = await ch.post({"jsonrpc": "2.0", "id": 3})
        assert malformed.kind is LegacyOutcome.BAD_REQUEST and malformed.message is not None
        assert malformed.message["error"]["code"] == -32600
        result = await initialized(ch)
        assert result["id"] == 0 and result["result"]["protocolVersion"] == "2024-11-05"
        assert result["result"]["serverInfo"] == {"name": "sse-seam", "version": "1.0.0"}
        twice = await ch.post({**INIT, "id": 2})
        assert twice.kind is LegacyOutcome.BAD_REQUEST
        assert twice.message == {"jsonrpc": "2.0", "id": 2, "error": {
            "code": -32600, "message": "this SSE session is initialized already"}}
    finally:
        await ch.close()


async def test_a_calls_messages_reach_the_stream_in_order_then_its_response() -> None:
    app = make_app()
    server = LegacyServer(app)
    ch = await open_channel(server)
    try:
        await initialized(ch)
        assert (await ch.post(rpc("logging/setLevel", {"level": "info"}, 1))).kind is LegacyOutcome.ACCEPTED
        assert await ch.message() == {"jsonrpc": "2.0", "id": 1, "result": {}}
        call = rpc("tools/call", {"name": "chatty", "arguments": {}, "_meta": {"progressToken": "p"}}, 2)
        assert (await ch.post(call)).kind is LegacyOutcome.ACCEPTED
        got = [await ch.message() for _ in range(4)]
        assert [m.get("method") for m in got] == ["notifications/message", "notifications/progress",
                                                   "notifications/progress", None]
        assert got[0]["params"]["data"] == "info line" and got[0]["params"]["level"] == "info"
        assert [m["params"]["progress"] for m in got[1:3]] == [1, 2]
        assert got[3] == {"jsonrpc": "2.0", "id": 2, "result": {
            "content": [{"type": "text", "text": "done"}]}}
        greet = rpc("tools/call", {"name": "greet", "arguments": {"name": "Ann"}}, "g")
        assert (await ch.post(greet)).kind is LegacyOutcome.ACCEPTED
        assert (await ch.message())["result"]["content"] == [{"type": "text", "text": "Hello, Ann!"}]
    finally:
        await ch.close()


async def test_a_question_to_the_client_goes_out_on_the_stream_and_its_answer_is_taken_inline() -> None:
    app = make_app()
    server = LegacyServer(app)
    ch = await open_channel(server)
    try:
        await initialized(ch)
        await ch.post(rpc("tools/call", {"name": "ask_name", "arguments": {}}, 5))
        ask = await ch.message()
        assert ask["method"] == "elicitation/create" and ask["params"]["message"] == "What is your name?"
        answer = await ch.post({"jsonrpc": "2.0", "id": ask["id"],
                                "result": {"action": "accept", "content": {"name": "Bo"}}})
        assert answer.kind is LegacyOutcome.ACCEPTED and answer.message is None
        assert await ch.message() == {"jsonrpc": "2.0", "id": 5, "result": {
            "content": [{"type": "text", "text": "Hello, Bo (accept)"}]}}
        # A list change reaches the session's stream (what the GET stream carries on Streamable HTTP).
        await ch.post(rpc("tools/call", {"name": "change_tools", "arguments": {}}, 6))
        got = [await ch.message(), await ch.message()]
        assert {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"} in got
        assert next(m for m in got if m.get("id") == 6)["result"]["content"][0]["text"] == "changed"
    finally:
        await ch.close()


async def test_a_forged_reference_and_a_closed_stream_are_unknown_sessions() -> None:
    app = make_app()
    server = LegacyServer(app)
    ch = await open_channel(server)
    await initialized(ch)
    forged = await ch.post(rpc("ping", {}, 7), token=ch.token[:-4] + "AAAA")
    assert forged.kind is LegacyOutcome.UNKNOWN_SESSION
    assert forged.message == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32001, "message": "Session not found"}}
    other = await ch.server.sse_post(ch.token, rpc("ping", {}, 8), HEADERS, Principal("mallory"))
    assert other.kind is LegacyOutcome.UNKNOWN_SESSION  # sealed for another principal
    assert (await ch.post(rpc("ping", {}, 9))).kind is LegacyOutcome.ACCEPTED
    assert await ch.message() == {"jsonrpc": "2.0", "id": 9, "result": {}}
    await ch.close()
    for _ in range(100):  # the stream's end is cleaned up by a task of its own
        gone = await ch.post(rpc("ping", {}, 10))
        if gone.kind is LegacyOutcome.UNKNOWN_SESSION:
            break
        await asyncio.sleep(0.01)
    assert gone.kind is LegacyOutcome.UNKNOWN_SESSION
    assert gone.message == {"jsonrpc": "2.0", "id": 10, "error": {
        "code": -32001, "message": "Session not found: its SSE stream was closed"}}
    assert await server.state().records.get(CHANNEL_NS, "anything") is None


async def test_an_idle_stream_gets_keepalives_and_a_stream_nobody_reads_is_closed_at_its_bound(
        caplog: pytest.LogCaptureFixture) -> None:
    app = make_app()
    server = LegacyServer(app, keepalive_s=0.05, max_stream_bytes=4096)
    token, stream = await server.sse_open(ANONYMOUS)

    async def post(message: dict[str, Any]) -> Any:
        return await server.sse_post(token, message, HEADERS, ANONYMOUS)

    try:
        await post(INIT)
        first = await asyncio.wait_for(anext(stream), WAIT)
        assert isinstance(first, SseEvent) and first.message is not None and first.message["id"] == 0
        # Nothing waiting for the client: a keep-alive each interval.
        assert [await asyncio.wait_for(anext(stream), WAIT) for _ in range(2)] == [KEEPALIVE, KEEPALIVE]
        # From now on the client reads nothing: four answers of 1.5 kB pass the 4 kB bound.
        with caplog.at_level(logging.WARNING, logger="mcp_stateless.legacy"):
            for i in range(4):
                await post(rpc("tools/call", {"name": "big", "arguments": {"size": 1500}}, 20 + i))
            for _ in range(500):
                if any("not reading its stream" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.01)
        warned = [r for r in caplog.records if "not reading its stream" in r.getMessage()]
        assert len(warned) == 1
        assert warned[0].getMessage() == ("a 2024-11-05 SSE client is not reading its stream (over 4096 bytes "
                                          "waiting): closed")
        assert getattr(warned[0], "era", None) == "legacy"
        for _ in range(100):
            gone = await post(rpc("ping", {}, 30))
            if gone.kind is LegacyOutcome.UNKNOWN_SESSION:
                break
            await asyncio.sleep(0.01)
        assert gone.kind is LegacyOutcome.UNKNOWN_SESSION  # the channel and its session ended with it
        assert gone.message == {"jsonrpc": "2.0", "id": 30, "error": {
            "code": -32001, "message": "Session not found: its SSE stream was closed"}}
    finally:
        await stream.aclose()


async def test_the_byte_bounded_queue() -> None:
    q = _ByteBoundedQueue(100)
    assert q.empty()
    assert q.put("a", 150)  # one message always goes in when none waits, however large
    assert not q.empty() and q.bytes == 150
    assert await q.get() == "a" and q.bytes == 0 and q.empty()
    assert q.put("b", 60) and q.put("c", 40) and q.bytes == 100  # exactly at the bound: still in
    assert not q.put("d", 1)  # over it: refused, and the queue is closed and emptied
    assert q.bytes == 0 and q.empty()
    assert not q.put("e", 0)
    assert await q.get() is None
    r = _ByteBoundedQueue(10)
    waiter = asyncio.ensure_future(r.get())
    await asyncio.sleep(0)
    assert r.put("late", 3)
    assert await asyncio.wait_for(waiter, 1) == "late"
    r.close()
    assert await asyncio.wait_for(r.get(), 1) is None


async def test_of_two_initializes_sent_at_once_one_wins_and_a_bad_one_is_answered_on_the_stream() -> None:
    app = make_app()
    server = LegacyServer(app)
    ch = await open_channel(server)
    try:
        bad = await ch.post(rpc("initialize", {"capabilities": {}}, "b"))  # no protocolVersion: no session
        assert bad.kind is LegacyOutcome.ACCEPTED
        refused = await ch.message()
        assert refused["id"] == "b" and refused["error"]["code"] == -32602
        # Sent together: in one process the first is through before the second reads the channel's record
        # (the swap that settles a race between instances is not reached here).
        first, second = await asyncio.gather(ch.post(INIT), ch.post({**INIT, "id": 1}))
        kinds = sorted([first.kind.value, second.kind.value])
        assert kinds == ["accepted", "bad_request"]
        lost = first if first.kind is LegacyOutcome.BAD_REQUEST else second
        assert lost.message is not None and lost.message["error"] == {
            "code": -32600, "message": "this SSE session is initialized already"}
        assert lost.message["id"] in (0, 1)
        won = await ch.message()
        assert won["id"] != lost.message["id"] and won["result"]["protocolVersion"] == "2024-11-05"
    finally:
        await ch.close()


async def test_an_initialize_over_the_principals_session_bound_is_refused_on_the_stream() -> None:
    app = make_app()
    server = LegacyServer(app, max_sessions_per_principal=1)
    carol = Principal("carol")
    a, b = await open_channel(server, carol), await open_channel(server, carol)
    try:
        await initialized(a)
        assert (await b.post({**INIT, "id": 4})).kind is LegacyOutcome.ACCEPTED
        assert await b.message() == {"jsonrpc": "2.0", "id": 4, "error": {
            "code": -32600, "message": "Too many sessions: this principal has 1 open; end one (DELETE) or wait "
                                       "for one to expire", "data": {"limit": 1, "scope": "sessions"}}}
        # No session was recorded for the refused channel: its requests still need initialize.
        assert (await b.post(rpc("ping", {}, 5))).kind is LegacyOutcome.ACCEPTED
        assert (await b.message())["error"]["message"] == "send initialize first (ping before initialize)"
    finally:
        await a.close()
        await b.close()


class Swaps(MemoryRecords):
    """The memory engine, with the expiry of every swap kept by (namespace, key)."""

    def __init__(self) -> None:
        super().__init__()
        self.swapped: dict[tuple[str, str], float | None] = {}

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        self.swapped[(ns, key)] = expires_at
        return await super().swap(ns, key, expected_version, data, expires_at=expires_at, due=due)


async def test_a_channel_lives_the_session_lifetime_from_its_initialize() -> None:
    app = make_app()
    records, bus = Swaps(), MemoryBus()
    app.use_state(StateBundle("memory://", records, bus, HandleStore(records), ChangeEventBus(bus)))
    server = LegacyServer(app, session_ttl_s=600.0)
    ch = await open_channel(server)
    try:
        t0 = time.time()
        await initialized(ch)
        (expires,) = [e for (ns, _), e in records.swapped.items() if ns == CHANNEL_NS]
        assert expires is not None and t0 + 600.0 <= expires <= time.time() + 600.0
    finally:
        await ch.close()


async def test_a_cancelled_call_stops_its_handler_and_sends_nothing_more() -> None:
    app = make_app()
    finished: list[str] = []

    @app.tool()
    async def slow() -> str:
        """Takes a while"""
        await asyncio.sleep(0.3)
        finished.append("slow")
        return "slow done"

    server = LegacyServer(app)
    ch = await open_channel(server)
    try:
        await initialized(ch)
        assert (await ch.post(rpc("tools/call", {"name": "slow", "arguments": {}}, 8))).kind is LegacyOutcome.ACCEPTED
        await asyncio.sleep(0.05)
        cancel = await ch.post(rpc("notifications/cancelled", {"requestId": 8}))
        assert cancel.kind is LegacyOutcome.ACCEPTED
        await ch.post(rpc("ping", {}, 9))
        assert await ch.message() == {"jsonrpc": "2.0", "id": 9, "result": {}}
        await asyncio.sleep(0.5)
        assert finished == [] and ch.items.empty()
    finally:
        await ch.close()
