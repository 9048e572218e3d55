"""An upstream whose channel fails in the middle of a call, in process: the call gets a clear -32603, the
session it was on is dropped from the pool, and the next call is served on a new session. The channel is a
real `MemoryChannel` to a real 2025 server, wrapped so that its next `tools/call` exchange fails the way a
dead upstream's does (a `ChannelError`)."""

from __future__ import annotations

from typing import Any

from failing_channel import FailingChannel

from mcp_stateless import App, Context
from mcp_stateless.bridge import Bridge
from mcp_stateless.client.memory import MemoryChannel
from mcp_stateless.endpoint import Call, Request
from mcp_stateless.server.legacy import LegacyServer

ELICIT: dict[str, Any] = {"elicitation": {}}


def _bridge() -> Bridge:
    app = App("breaking-upstream")

    @app.tool()
    def hi() -> str:
        return "hi"

    @app.tool()
    def ask_name(ctx: Context) -> str:
        return "asked"

    return Bridge(lambda: FailingChannel(MemoryChannel(app, legacy=LegacyServer(app))))


def _call(caps: dict[str, Any] | None = None) -> Request:
    return Request(2, "tools/call", {"name": "hi", "arguments": {}}, "2026-07-28", caps or {}, None, None, None)


async def _check_broken_then_served(caps: dict[str, Any] | None) -> None:
    b = _bridge()
    try:
        assert (await b.handle(_call(caps), Call())).message["result"]["content"][0]["text"] == "hi"
        assert b.pool.opened == 1 and len(b.pool.leases) == 1
        FailingChannel.failing = {"tools/call"}
        reply = await b.handle(_call(caps), Call())
        assert reply.message == {"jsonrpc": "2.0", "id": 2, "error": {
            "code": -32603, "message": "the upstream server failed: the upstream went away"}}
        assert b.pool.leases == [] and b.pending == {}  # the session it was on is gone, nothing held
        FailingChannel.failing = set()
        assert (await b.handle(_call(caps), Call())).message["result"]["content"][0]["text"] == "hi"
        assert b.pool.opened == 2 and len(b.pool.leases) == 1  # served on a new session
    finally:
        FailingChannel.failing = set()
        await b.aclose()


async def test_a_plain_call_on_a_failing_upstream_is_a_clear_error_and_the_next_gets_a_new_session() -> None:
    await _check_broken_then_served(None)


async def test_a_call_that_may_ask_on_a_failing_upstream_is_a_clear_error_and_the_next_gets_a_new_session() -> None:
    await _check_broken_then_served(ELICIT)
