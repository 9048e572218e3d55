"""The bridge endpoint's edges, in process over a real 2025 server in memory: a bridge whose sessions are
per caller on every path (start-up, discover, listen, plain and asking calls, watches), a credential
forwarded or refused, a plain call cancelled mid-flight, an asking call's progress and upstream errors, a
pending call outliving its lifetime or the bridge, a start-up probe that times out, and an upstream whose
identity changes between sessions."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from failing_channel import FailingChannel

from mcp_stateless import App, Context
from mcp_stateless.bridge import Bridge
from mcp_stateless.bridge.credentials import ForwardedCredentials
from mcp_stateless.bridge.endpoint import FORWARDED
from mcp_stateless.bridge.pool import ASKABLE_CALLS, pool_key
from mcp_stateless.client.memory import MemoryChannel
from mcp_stateless.endpoint import Call, Request
from mcp_stateless.protocol.endpoint import ListenEvent
from mcp_stateless.protocol.principal import Credentials, Principal
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.state.events import ChangeEventBus
from mcp_stateless.state.memory import MemoryBus

ELICIT: dict[str, Any] = {"elicitation": {}}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ALICE = Call(principal=Principal("alice"))


def _app(version: str = "1.0.0") -> App:
    app = App("edges-upstream", version)

    @app.tool()
    def hi() -> str:
        return "hi"

    @app.tool()
    async def slow() -> str:
        await asyncio.sleep(30)
        return "late"

    @app.tool()
    def ask_name(ctx: Context) -> str:
        answer = ctx.elicit("What is your name?", NAME_FORM, key="name")
        return f"Hello, {(answer.content or {}).get('name')}"

    @app.tool()
    async def count(ctx: Context) -> str:
        ctx.report_progress(1, 2)
        await asyncio.sleep(0.01)
        ctx.report_progress(2, 2)
        return "counted"

    @app.resource("test://watched", name="watched")
    def watched() -> str:
        return "watched"

    return app


def _channel(app: App) -> FailingChannel:
    return FailingChannel(MemoryChannel(app, legacy=LegacyServer(app)))


def _bridge(app: App | None = None, **kw: Any) -> Bridge:
    up = app or _app()
    return Bridge(lambda: _channel(up), **kw)


def _req(method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] | None = None,
         progress: Any = None) -> Request:
    return Request(1, method, params or {}, "2026-07-28", caps or {}, None, None, progress)


def _call_tool(name: str, caps: dict[str, Any] | None = None, progress: Any = None, **params: Any) -> Request:
    return _req("tools/call", {"name": name, "arguments": {}, **params}, caps, progress)


class Outbox:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def emit(self, message: dict[str, Any]) -> None:
        self.messages.append(message)


@pytest.fixture(autouse=True)
def _reset() -> Any:
    FailingChannel.reset()
    yield
    FailingChannel.reset()


@pytest.fixture
async def per_caller() -> AsyncIterator[Bridge]:
    b = _bridge(per_principal=True)
    try:
        yield b
    finally:
        await b.aclose()


ALICES = pool_key({}, "alice")


async def test_a_per_caller_bridge_listens_first_with_the_callers_session(per_caller: Bridge) -> None:
    stream = per_caller.listen(_req("subscriptions/listen", {"notifications": {"toolsListChanged": True}}), ALICE)
    ack = await asyncio.wait_for(anext(stream), 3)
    assert isinstance(ack, ListenEvent)
    # what is honoured is the upstream's: learnt from a session opened for this caller before the ack
    assert ack.message["params"]["notifications"] == {"toolsListChanged": True}
    assert [le.key for le in per_caller.pool.leases] == [ALICES]
    await stream.aclose()


async def test_a_per_caller_bridge_starts_discovers_and_calls_with_the_callers_sessions() -> None:
    b = _bridge(per_principal=True)
    try:
        await b.startup()  # the probe is no caller's: the anonymous principal's session
        assert b.upstream is not None and [le.key for le in b.pool.leases] == [pool_key({}, "anonymous")]
    finally:
        await b.aclose()
    b = _bridge(per_principal=True)
    try:
        discovered = await b.handle(_req("server/discover"), ALICE)
        assert discovered.message["result"]["capabilities"]["tools"] == {"listChanged": True}
        plain = await b.handle(_call_tool("hi"), ALICE)
        assert plain.message["result"]["content"] == [{"type": "text", "text": "hi"}]
        asked = await b.handle(_call_tool("ask_name", ELICIT), ALICE)
        assert asked.message["result"]["resultType"] == "input_required"
        assert sorted(le.key for le in b.pool.leases) == sorted([ALICES, pool_key(ELICIT, "alice")])
    finally:
        await b.aclose()


async def test_a_per_caller_bridges_watch_is_the_callers_session(per_caller: Bridge) -> None:
    await per_caller.startup()
    stream = per_caller.listen(_req("subscriptions/listen", {"notifications": {
        "resourceSubscriptions": ["test://watched"]}}), ALICE)
    await asyncio.wait_for(anext(stream), 3)
    watch = per_caller.watches.watches["alice"]
    assert watch.lease is not None and watch.lease.key == ALICES and watch.subscribed == {"test://watched"}
    await stream.aclose()


async def test_a_method_that_is_not_a_call_is_forwarded_whatever_its_params_say() -> None:
    b = _bridge()
    try:
        listed = await b.handle(_req("tools/list", {"requestState": "not a state"}, ELICIT), Call())
        assert [t["name"] for t in listed.message["result"]["tools"]] == ["hi", "slow", "ask_name", "count"]
        assert b.pending == {}
    finally:
        await b.aclose()


async def test_a_plain_call_cancelled_mid_flight_leaves_its_session_broken_and_a_list_does_not() -> None:
    b = _bridge()
    try:
        task = asyncio.ensure_future(b.handle(_call_tool("slow"), Call()))
        await asyncio.sleep(0.1)
        assert [le.busy for le in b.pool.leases] == [1] and b.pending == {}  # in the request's own coroutine
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert b.pool.leases == []  # the call's answer may still come on it: never lent again
        FailingChannel.hanging = {"tools/list"}
        task = asyncio.ensure_future(b.handle(_req("tools/list"), Call()))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [(le.busy, le.broken) for le in b.pool.leases] == [(0, False)]  # a list: the session stays
    finally:
        await b.aclose()


async def test_an_asking_call_relays_progress_and_the_upstreams_own_errors() -> None:
    b = _bridge()
    try:
        out = Outbox()
        reply = await b.handle(_call_tool("count", ELICIT, progress="tok"), Call(outbox=out))
        assert reply.message["result"]["content"] == [{"type": "text", "text": "counted"}]
        assert out.messages == [
            {"jsonrpc": "2.0", "method": "notifications/progress",
             "params": {"progressToken": "tok", "progress": 1, "total": 2}},
            {"jsonrpc": "2.0", "method": "notifications/progress",
             "params": {"progressToken": "tok", "progress": 2, "total": 2}}]
        plain = await b.handle(_req("tools/call", {"name": "nope", "arguments": {}}), Call())
        asking = await b.handle(_req("tools/call", {"name": "nope", "arguments": {}}, ELICIT), Call())
        assert "error" in plain.message and asking.message == plain.message  # the upstream's error, as it is
        assert b.pending == {} and all(not le.broken for le in b.pool.leases)
    finally:
        await b.aclose()


async def test_a_pending_call_past_its_lifetime_is_cancelled_and_its_session_dropped() -> None:
    b = _bridge(pending_ttl_s=0.3)
    try:
        first = (await b.handle(_call_tool("ask_name", ELICIT), Call())).message["result"]
        (pending,) = b.pending.values()
        for _ in range(300):
            if not b.pending and pending.task is not None and pending.task.done():
                break
            await asyncio.sleep(0.01)
        assert b.pending == {} and pending.task is not None and pending.task.cancelled()
        assert b.pool.leases == []  # cancelled mid-call: broken, closed
        late = await b.handle(_call_tool("ask_name", ELICIT, inputResponses={"q1": {"action": "decline"}},
                                         requestState=first["requestState"]), Call())
        # its state lived as long as the call was kept: the retry is told to start again
        assert late.message["error"] == {"code": -32602,
                                         "message": "requestState has expired; start the request again without it"}
    finally:
        await b.aclose()


async def test_closing_the_bridge_cancels_its_pending_calls() -> None:
    b = _bridge()
    await b.handle(_call_tool("ask_name", ELICIT), Call())
    (pending,) = b.pending.values()
    await b.aclose()
    assert pending.task is not None and pending.task.cancelled() and pending.ended and b.pending == {}


async def test_a_call_that_ends_on_its_own_instance_stops_listening_for_other_instances() -> None:
    b = _bridge(bus=MemoryBus())
    try:
        assert isinstance(b.events, ChangeEventBus) and b.events.bus is b.bus  # changes ride the given bus
        first = (await b.handle(_call_tool("ask_name", ELICIT), Call())).message["result"]
        (pending,) = b.pending.values()
        assert pending.listener is not None and not pending.listener.done()
        done = await b.handle(_call_tool("ask_name", ELICIT, requestState=first["requestState"], inputResponses={
            "q1": {"action": "accept", "content": {"name": "Ada"}}}), Call())
        assert done.message["result"]["content"] == [{"type": "text", "text": "Hello, Ada"}]
        await asyncio.sleep(0)
        assert pending.listener.cancelled()
    finally:
        await b.aclose()


async def test_a_start_up_probe_that_gets_no_answer_gives_up_after_its_timeout(
        caplog: pytest.LogCaptureFixture) -> None:
    FailingChannel.hanging = {"initialize"}
    b = _bridge(probe_timeout=0.2)
    try:
        started = asyncio.get_running_loop().time()
        with caplog.at_level(logging.WARNING, logger="mcp_stateless.bridge"):
            await asyncio.wait_for(b.startup(), 3)
        assert asyncio.get_running_loop().time() - started < 2 and b.upstream is None
        assert [r.getMessage() for r in caplog.records] == [
            "the upstream did not answer at start-up (timed out): it is tried again on demand"]
    finally:
        await b.aclose()


async def test_the_upstreams_identity_is_read_again_from_each_new_session() -> None:
    apps = iter([_app("1.0.0"), _app("2.0.0")])
    b = Bridge(lambda: _channel(next(apps)))
    try:
        await b.startup()
        assert b.upstream is not None and b.upstream["serverInfo"]["version"] == "1.0.0"
        (lease,) = b.pool.leases
        await b.pool.release(await b.pool.acquire({}, None), broken=True)  # the upstream restarted, say
        reply = await b.handle(_call_tool("hi"), Call())
        assert reply.message["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["version"] == "2.0.0"
        assert b.upstream["serverInfo"]["version"] == "2.0.0" and b.pool.leases != [lease]
    finally:
        await b.aclose()


async def _principal(creds: ForwardedCredentials, authorization: str | None) -> Principal:
    found = await creds.authenticate(Credentials("http", {"authorization": authorization} if authorization else {}))
    assert isinstance(found, Principal)
    return found


async def test_a_forwarding_bridge_opens_each_callers_sessions_with_its_credential() -> None:
    app, given = _app(), []

    def credentialed(authorization: str) -> FailingChannel:
        given.append(authorization)
        return _channel(app)

    b = Bridge(lambda: _channel(app), credentialed=credentialed)
    try:
        assert isinstance(b.authenticator, ForwardedCredentials) and b.per_principal
        assert b.pool.credentialed is credentialed
        alice = await _principal(b.authenticator, "Bearer alice-token")
        reply = await b.handle(_call_tool("hi"), Call(principal=alice))
        assert reply.message["result"]["content"] == [{"type": "text", "text": "hi"}]
        assert given == ["Bearer alice-token"]
        anonymous = await _principal(b.authenticator, None)
        await b.handle(_call_tool("hi"), Call(principal=anonymous))
        assert given == ["Bearer alice-token"] and b.pool.opened == 2  # no credential: the plain channel
        FailingChannel.refusing = 401
        bob = await _principal(b.authenticator, "Bearer bob-token")
        refused = await b.handle(_call_tool("hi"), Call(principal=bob))
        assert refused.message["error"] == {"code": -32603, "data": {"status": 401}, "message":
                                            "the upstream server refused the caller's credentials (HTTP 401)"}
        assert given == ["Bearer alice-token", "Bearer bob-token"]
    finally:
        await b.aclose()


def test_the_bridges_methods_are_exactly_the_ones_it_serves() -> None:
    assert _bridge().table.methods == frozenset({"server/discover", "subscriptions/listen", *FORWARDED,
                                                 *ASKABLE_CALLS})
    assert FORWARDED == ("tools/list", "prompts/list", "resources/list", "resources/templates/list",
                         "completion/complete")
    assert ASKABLE_CALLS == ("tools/call", "prompts/get", "resources/read")


async def test_the_card_of_an_upstream_without_title_or_instructions_is_described_by_its_name() -> None:
    b = _bridge()
    try:
        await b.startup()
        card = b.card_identity()
        assert card.description == "edges-upstream: an MCP server" and card.title is None
    finally:
        await b.aclose()
