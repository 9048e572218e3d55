"""The bridge in process, in front of a real 2025-era server in memory: our `App` behind `LegacyServer`,
reached through `MemoryChannel` (the 2025 handshake, sessions, server->client requests and notifications
as on stdio, without a process). The slow tests put published servers behind it; these pin the bridge's
own rules exactly: discover and the cache hints, forwarding, MRTR rounds and their refusals, a retry
routed to the holding instance over the bus, the pool's bounds, listen events and the Server Card."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcp_stateless import App, Context
from mcp_stateless.bridge import Bridge
from mcp_stateless.bridge.pool import pool_key
from mcp_stateless.client.memory import MemoryChannel
from mcp_stateless.endpoint import Call, Reply, Request
from mcp_stateless.protocol.endpoint import ListenEnd, ListenEvent
from mcp_stateless.protocol.mrtr import KeyRing
from mcp_stateless.protocol.principal import Principal
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.state.memory import MemoryBus

SERVER_INFO = "io.modelcontextprotocol/serverInfo"
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ELICIT: dict[str, Any] = {"elicitation": {}}
UPSTREAM_INFO = {"name": "upstream", "version": "2.0.0"}


def upstream() -> App:
    app = App("upstream", "2.0.0", instructions="Be nice.")

    @app.tool()
    def greet(name: str) -> str:
        """Greets"""
        return f"Hello, {name}!"

    @app.tool()
    def ask_name(ctx: Context) -> str:
        """Asks the user's name"""
        answer = ctx.elicit("What is your name?", NAME_FORM, key="name")
        return f"Hello, {(answer.content or {}).get('name')} ({answer.action})"

    @app.tool()
    def two_rounds(ctx: Context) -> str:
        """Asks twice"""
        first = ctx.elicit("First?", NAME_FORM, key="first")
        second = ctx.elicit("Second?", NAME_FORM, key="second")
        return f"{(first.content or {}).get('name')} then {(second.content or {}).get('name')}"

    @app.tool()
    def haiku(ctx: Context) -> str:
        """Asks the client's model"""
        said = ctx.sample("Say something", 20, key="poem")
        content = said.get("content")
        return f"{said.get('model')}: {content.get('text') if isinstance(content, dict) else ''}"

    @app.tool()
    def roots_count(ctx: Context) -> str:
        """Asks the client for its roots"""
        return f"{len(ctx.list_roots())} roots"

    @app.tool()
    async def count(ctx: Context) -> str:
        """Reports progress twice"""
        ctx.report_progress(1, 2)
        await asyncio.sleep(0.01)
        ctx.report_progress(2, 2)
        return "counted"

    @app.tool()
    async def touch(uri: str) -> str:
        """Marks a resource updated"""
        await app.notify_resource_updated(uri)
        return f"touched {uri}"

    @app.tool()
    async def toggle() -> str:
        """Says the tool list changed"""
        await app.notify_tools_changed()
        return "toggled"

    @app.prompt()
    def hello(who: str) -> str:
        """Says hello"""
        return f"Hello {who}"

    @app.resource("test://watched", name="watched", mime_type="text/plain")
    def watched() -> str:
        return "watched content"

    return app


def bridge_to(app: App, **kw: Any) -> Bridge:
    return Bridge(lambda: MemoryChannel(app, legacy=LegacyServer(app)), **kw)


def req(method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] | None = None,
        id_: int = 1, progress: Any = None) -> Request:
    return Request(id_, method, params or {}, "2026-07-28", caps or {}, None, None, progress)


async def ask(bridge: Bridge, method: str, params: dict[str, Any] | None = None,
              caps: dict[str, Any] | None = None, call: Call | None = None) -> Reply:
    # bounded: a bridge that loses a call's answer fails here, not at the test runner's own timeout
    return await asyncio.wait_for(bridge.handle(req(method, params, caps), call or Call()), 10)


@pytest.fixture
async def bridge() -> AsyncIterator[Bridge]:
    b = bridge_to(upstream())
    await b.startup()
    try:
        yield b
    finally:
        await b.aclose()


async def test_discover_answers_from_the_upstreams_initialize_with_what_the_bridge_honours(bridge: Bridge) -> None:
    reply = await ask(bridge, "server/discover")
    assert reply.message == {"jsonrpc": "2.0", "id": 1, "result": {
        "supportedVersions": ["2026-07-28"],
        # no logging (a session log level is never forwarded), listChanged/subscribe as the upstream declares
        "capabilities": {"tools": {"listChanged": True}, "prompts": {"listChanged": True},
                         "resources": {"subscribe": True, "listChanged": True}},
        "instructions": "Be nice.", "resultType": "complete", "ttlMs": 0, "cacheScope": "public",
        "_meta": {SERVER_INFO: UPSTREAM_INFO}}}
    assert bridge.pool.opened == 1  # the start-up probe's session served it


async def test_lists_and_reads_are_forwarded_with_cache_hints_and_calls_without(bridge: Bridge) -> None:
    tools = (await ask(bridge, "tools/list")).message["result"]
    assert [t["name"] for t in tools["tools"]] == ["greet", "ask_name", "two_rounds", "haiku", "roots_count",
                                                   "count", "touch", "toggle"]
    assert (tools["resultType"], tools["ttlMs"], tools["cacheScope"]) == ("complete", 0, "public")
    read = (await ask(bridge, "resources/read", {"uri": "test://watched"})).message["result"]
    assert read["contents"] == [{"uri": "test://watched", "text": "watched content", "mimeType": "text/plain"}]
    assert (read["ttlMs"], read["cacheScope"]) == (0, "public")
    call = (await ask(bridge, "tools/call", {"name": "greet", "arguments": {"name": "Ann"},
                                             "_meta": {"progressToken": None}})).message["result"]
    assert call == {"content": [{"type": "text", "text": "Hello, Ann!"}], "resultType": "complete",
                    "_meta": {SERVER_INFO: UPSTREAM_INFO}}
    prompt = (await ask(bridge, "prompts/get", {"name": "hello", "arguments": {"who": "Zed"}})).message["result"]
    assert prompt["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello Zed"}}]
    assert "ttlMs" not in prompt and "cacheScope" not in prompt
    unknown = await ask(bridge, "prompts/get", {"name": "nope"})
    assert unknown.message == {"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32602, "message": "Unknown prompt: nope", "data": {"name": "nope"}}}
    assert bridge.pool.opened == 1  # one shared session served them all


async def test_sessions_per_principal_make_the_hints_private() -> None:
    app = upstream()
    b = bridge_to(app, per_principal=True)
    try:
        alice, bob = Call(Principal("alice")), Call(Principal("bob"))
        listed = (await ask(b, "tools/list", call=alice)).message["result"]
        assert (listed["ttlMs"], listed["cacheScope"]) == (0, "private")
        await ask(b, "tools/list", call=bob)
        await ask(b, "tools/list", call=alice)
        assert b.pool.opened == 2  # one session per caller, each reused
    finally:
        await b.aclose()


async def test_an_elicitation_is_an_mrtr_round_and_each_rounds_state_is_its_own(bridge: Bridge) -> None:
    first = (await ask(bridge, "tools/call", {"name": "two_rounds", "arguments": {}}, ELICIT)).message["result"]
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["q1"]
    assert first["inputRequests"]["q1"]["method"] == "elicitation/create"
    assert first["inputRequests"]["q1"]["params"]["message"] == "First?"
    assert len(bridge.pending) == 1
    lacking = await ask(bridge, "tools/call", {"name": "two_rounds", "arguments": {}, "inputResponses": {},
                                               "requestState": first["requestState"]}, ELICIT)
    assert lacking.message["error"] == {
        "code": -32602, "message": "inputResponses lacks 'q1', the answer the upstream waits for"}
    second = (await ask(bridge, "tools/call", {
        "name": "two_rounds", "arguments": {},
        "inputResponses": {"q1": {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": first["requestState"]}, ELICIT)).message["result"]
    assert second["resultType"] == "input_required" and list(second["inputRequests"]) == ["q2"]
    assert second["inputRequests"]["q2"]["params"]["message"] == "Second?"
    replay = await ask(bridge, "tools/call", {
        "name": "two_rounds", "arguments": {},
        "inputResponses": {"q2": {"action": "accept", "content": {"name": "Bo"}}},
        "requestState": first["requestState"]}, ELICIT)
    assert replay.message["error"] == {"code": -32602, "message": "this round was answered already"}
    other = await ask(bridge, "tools/call", {"name": "two_rounds", "arguments": {"x": 1},
                                             "requestState": second["requestState"]}, ELICIT)
    assert other.message["error"] == {"code": -32602, "message": "requestState belongs to a different request"}
    done = (await ask(bridge, "tools/call", {
        "name": "two_rounds", "arguments": {},
        "inputResponses": {"q2": {"action": "accept", "content": {"name": "Bo"}}},
        "requestState": second["requestState"]}, ELICIT)).message["result"]
    assert done["content"] == [{"type": "text", "text": "Ada then Bo"}] and done["resultType"] == "complete"
    assert bridge.pending == {}
    again = await ask(bridge, "tools/call", {
        "name": "two_rounds", "arguments": {},
        "inputResponses": {"q2": {"action": "decline"}}, "requestState": second["requestState"]}, ELICIT)
    assert again.message["error"]["code"] == -32603
    assert again.message["error"]["message"] == (
        "the bridge instance holding this call is gone (or the call ended); it was not run again: start the "
        "request again without requestState")
    assert again.message["error"]["data"] == {"instance": bridge.instance}


async def test_a_state_that_is_not_the_bridges_is_invalid(bridge: Bridge) -> None:
    from mcp_stateless.protocol.mrtr import StateContext, seal

    sctx = StateContext.of("anonymous", "tools/call", {"name": "greet", "arguments": {}})
    for payload in ({"x": 1}, {"b": 5}, ["b"]):
        state = seal(bridge.key_ring, sctx, payload, 60)
        reply = await ask(bridge, "tools/call", {"name": "greet", "arguments": {}, "requestState": state})
        assert reply.message["error"] == {"code": -32602, "message": "requestState is not valid"}, payload


async def test_a_retry_on_another_instance_is_routed_to_the_holder_over_the_bus(
        caplog: pytest.LogCaptureFixture) -> None:
    app = upstream()
    bus, ring = MemoryBus(), KeyRing.generate()
    a, b = bridge_to(app, bus=bus, key_ring=ring), bridge_to(app, bus=bus, key_ring=ring, holder_timeout=0.5)
    try:
        first = (await ask(a, "tools/call", {"name": "two_rounds", "arguments": {}}, ELICIT)).message["result"]
        with caplog.at_level(logging.DEBUG, logger="mcp_stateless.bridge"):
            lacking = await ask(b, "tools/call", {"name": "two_rounds", "arguments": {}, "inputResponses": {},
                                                  "requestState": first["requestState"]}, ELICIT)
        (held,) = a.pending
        assert f"an answer for pending call {held} from another instance" in [r.getMessage() for r in caplog.records]
        assert lacking.message["error"] == {  # the holder's refusal, carried back
            "code": -32602, "message": "inputResponses lacks 'q1', the answer the upstream waits for"}
        second = (await ask(b, "tools/call", {
            "name": "two_rounds", "arguments": {},
            "inputResponses": {"q1": {"action": "accept", "content": {"name": "Ada"}}},
            "requestState": first["requestState"]}, ELICIT)).message["result"]
        assert second["resultType"] == "input_required"
        assert second["inputRequests"]["q2"]["params"]["message"] == "Second?"
        assert b.pending == {} and len(a.pending) == 1  # the call stays where it runs
        replay = await ask(b, "tools/call", {  # the first round's state again, through the other instance
            "name": "two_rounds", "arguments": {},
            "inputResponses": {"q2": {"action": "accept", "content": {"name": "Bo"}}},
            "requestState": first["requestState"]}, ELICIT)
        assert replay.message["error"] == {"code": -32602, "message": "this round was answered already"}
        done = (await ask(b, "tools/call", {
            "name": "two_rounds", "arguments": {},
            "inputResponses": {"q2": {"action": "accept", "content": {"name": "Bo"}}},
            "requestState": second["requestState"]}, ELICIT)).message["result"]
        assert done["content"] == [{"type": "text", "text": "Ada then Bo"}]
        assert a.pending == {} and a.pool.opened == 1 and b.pool.opened == 0  # b never opened a session
        # The holder is gone: the retry waits holder_timeout for an answer, then says so.
        third = (await ask(a, "tools/call", {"name": "ask_name", "arguments": {}}, ELICIT)).message["result"]
        await a.aclose()
        t0 = asyncio.get_running_loop().time()
        gone = await ask(b, "tools/call", {"name": "ask_name", "arguments": {},
                                           "inputResponses": {"q1": {"action": "decline"}},
                                           "requestState": third["requestState"]}, ELICIT)
        assert 0.4 <= asyncio.get_running_loop().time() - t0 < 3
        assert gone.message["error"]["code"] == -32603
        assert gone.message["error"]["data"] == {"instance": a.instance}
    finally:
        await a.aclose()
        await b.aclose()


async def test_progress_of_a_bridged_call_reaches_the_callers_outbox(bridge: Bridge) -> None:
    class Outbox:
        def __init__(self) -> None:
            self.messages: list[dict[str, Any]] = []

        def emit(self, message: dict[str, Any]) -> None:
            self.messages.append(message)

    out = Outbox()
    call = Call(outbox=out)  # the one method the bridge uses (Outbox is a protocol)
    reply = await bridge.handle(req("tools/call", {"name": "count", "arguments": {}}, progress="tok"), call)
    assert reply.message["result"]["content"] == [{"type": "text", "text": "counted"}]
    assert [m["params"] for m in out.messages] == [{"progressToken": "tok", "progress": 1, "total": 2},
                                                    {"progressToken": "tok", "progress": 2, "total": 2}]
    assert {m["method"] for m in out.messages} == {"notifications/progress"}
    silent = await bridge.handle(req("tools/call", {"name": "count", "arguments": {}}), Call(outbox=out))
    assert silent.message["result"]["content"][0]["text"] == "counted" and len(out.messages) == 2


async def test_the_pool_lends_an_asking_session_to_one_call_and_is_bounded() -> None:
    app = upstream()
    b = bridge_to(app, max_sessions=2)
    try:
        r1 = (await ask(b, "tools/call", {"name": "ask_name", "arguments": {}}, ELICIT)).message["result"]
        r2 = (await ask(b, "tools/call", {"name": "ask_name", "arguments": {}}, ELICIT)).message["result"]
        assert r1["resultType"] == r2["resultType"] == "input_required"
        assert b.pool.opened == 2  # the first call holds its session: the second needs its own
        assert {lease.busy for lease in b.pool.leases} == {1} and all(le.exclusive for le in b.pool.leases)
        for r, name in ((r1, "Ann"), (r2, "Bo")):
            done = await ask(b, "tools/call", {"name": "ask_name", "arguments": {},
                                               "inputResponses": {"q1": {"action": "accept",
                                                                         "content": {"name": name}}},
                                               "requestState": r["requestState"]}, ELICIT)
            assert done.message["result"]["content"] == [{"type": "text", "text": f"Hello, {name} (accept)"}]
        await ask(b, "tools/list")  # another key: the least recently used idle session makes room
        assert b.pool.opened == 3 and len(b.pool.leases) == 2
        assert sorted(le.exclusive for le in b.pool.leases) == [False, True]
    finally:
        await b.aclose()


async def test_an_idle_session_is_closed_after_idle_s() -> None:
    app = upstream()
    b = bridge_to(app, idle_s=0.05)
    try:
        await ask(b, "tools/list")
        assert b.pool.opened == 1
        await asyncio.sleep(0.1)
        await ask(b, "tools/list")
        assert b.pool.opened == 2 and len(b.pool.leases) == 1
    finally:
        await b.aclose()


async def test_an_upstream_that_cannot_start_is_a_clear_internal_error() -> None:
    def refuse() -> MemoryChannel:
        raise OSError("no such upstream")

    b = Bridge(refuse, probe_timeout=1.0)
    await b.startup()  # logged, tried again on demand
    try:
        reply = await ask(b, "tools/list")
        assert reply.message == {"jsonrpc": "2.0", "id": 1, "error": {
            "code": -32603, "message": "the upstream server is unavailable: no such upstream"}}
        assert b.pool.leases == []
    finally:
        await b.aclose()


async def test_an_upstream_list_change_is_a_listen_event_and_the_card_names_the_upstream(bridge: Bridge) -> None:
    stream = bridge.listen(req("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id_=7),
                           Call())
    ack = await anext(stream)
    assert isinstance(ack, ListenEvent)
    assert ack.message["params"] == {"notifications": {"toolsListChanged": True},
                                     "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}
    toggled = await ask(bridge, "tools/call", {"name": "toggle", "arguments": {}})
    assert toggled.message["result"]["content"] == [{"type": "text", "text": "toggled"}]
    event = await asyncio.wait_for(anext(stream), 3)
    assert isinstance(event, ListenEvent)
    assert event.message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                             "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}
    await bridge.drain()
    end = await asyncio.wait_for(anext(stream), 3)
    assert isinstance(end, ListenEnd)
    await stream.aclose()
    card = bridge.card_identity()
    assert card.name == "dev.mcp-stateless.local/upstream" and card.version == "2.0.0"
    assert card.description == "Be nice." and card.title is None
    assert card.bridge is not None
    assert card.bridge["upstream"] == {"name": "upstream", "version": "2.0.0", "title": None,
                                       "protocolVersion": "2025-11-25", "transport": "memory"}
    assert card.bridge["eras"] == {"front": {"era": "modern", "versions": ["2026-07-28"]},
                                   "upstream": {"era": "legacy", "versions": ["2025-11-25"]}}
    assert card.bridge["mrtr"] == ["elicitation/create", "roots/list", "sampling/createMessage"]
    assert card.bridge["listen"] == {"toolsListChanged": True, "promptsListChanged": True,
                                     "resourcesListChanged": True, "resourceSubscriptions": True}
    assert card.bridge["perInstanceUpstream"] is True
    assert card.bridge["bridge"]["name"] == "mcp-stateless-bridge"


async def test_a_resource_subscription_of_a_listen_stream_is_held_upstream_while_the_stream_is(
        bridge: Bridge) -> None:
    stream = bridge.listen(req("subscriptions/listen", {"notifications": {
        "resourceSubscriptions": ["test://watched"]}}, id_=8), Call())
    ack = await asyncio.wait_for(anext(stream), 3)
    assert isinstance(ack, ListenEvent)
    assert ack.message["params"]["notifications"] == {"resourceSubscriptions": ["test://watched"]}
    watch = bridge.watches.watches[None]  # the anonymous callers' watch: sessions are not per caller here
    assert watch.subscribed == {"test://watched"} and watch.streams == 1
    assert watch.lease is not None and watch.lease.busy == 1  # held: never evicted meanwhile
    await ask(bridge, "tools/call", {"name": "touch", "arguments": {"uri": "test://other"}})
    await ask(bridge, "tools/call", {"name": "touch", "arguments": {"uri": "test://watched"}})
    event = await asyncio.wait_for(anext(stream), 3)
    assert isinstance(event, ListenEvent)
    assert event.message == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {
        "uri": "test://watched", "_meta": {"io.modelcontextprotocol/subscriptionId": 8}}}
    await stream.aclose()
    for _ in range(100):  # unsubscribing upstream runs after the stream's end, in a task of its own
        if watch.lease is None:
            break
        await asyncio.sleep(0.01)
    assert watch.lease is None and watch.subscribed == set() and watch.streams == 0
    assert {lease.busy for lease in bridge.pool.leases} == {0}


def test_an_upstream_notification_is_the_change_it_announces() -> None:
    from mcp_stateless.bridge.events import change_of
    from mcp_stateless.state.events import ChangeEvent

    for method, kind in (("notifications/tools/list_changed", "tools"),
                         ("notifications/prompts/list_changed", "prompts"),
                         ("notifications/resources/list_changed", "resources")):
        assert change_of({"jsonrpc": "2.0", "method": method}) == ChangeEvent(kind)  # type: ignore[arg-type]
    assert change_of({"method": "notifications/resources/updated", "params": {"uri": "a://b"}}) == ChangeEvent(
        "resource_updated", "a://b")
    for junk in ({"method": "notifications/resources/updated"}, {"method": "notifications/resources/updated",
                                                                  "params": {"uri": ""}},
                 {"method": "notifications/resources/updated", "params": {"uri": 5}},
                 {"method": "notifications/resources/updated", "params": ["a://b"]},
                 {"method": "notifications/message", "params": {}}, {"method": 5}, {"id": 1, "result": {}}):
        assert change_of(junk) is None, junk


async def test_the_relay_coalesces_a_change_still_waiting_and_bounds_what_waits(
        caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from mcp_stateless.bridge.events import Relay
    from mcp_stateless.state.events import ChangeEvent, MemoryEventBus

    bus = MemoryEventBus()
    sub = bus.subscribe()
    relay = Relay(bus, max_pending=2)
    try:
        with caplog.at_level(logging.WARNING, logger="mcp_stateless.bridge"):
            relay.notify({"method": "notifications/tools/list_changed"})
            relay.notify({"method": "notifications/tools/list_changed"})  # equal to one waiting: coalesced
            relay.notify({"method": "notifications/prompts/list_changed"})
            relay.notify({"method": "notifications/resources/list_changed"})  # a third distinct: dropped
            relay.notify({"method": "notifications/resources/list_changed"})
            relay.notify({"method": "notifications/message"})  # not a change: nothing
        assert (relay.coalesced, relay.dropped) == (1, 2)
        warned = [r.getMessage() for r in caplog.records if r.name == "mcp_stateless.bridge"]
        assert warned == ["more than 2 upstream changes wait to be published: dropping"]  # once
        got = [await asyncio.wait_for(sub.get(1), 3) for _ in range(2)]
        assert got == [ChangeEvent("tools"), ChangeEvent("prompts")]  # in order
        relay.notify({"method": "notifications/tools/list_changed"})  # published already: a new change
        assert await asyncio.wait_for(sub.get(1), 3) == ChangeEvent("tools")
    finally:
        await relay.aclose()
        sub.close()


def test_the_capabilities_honoured_are_the_upstreams_flags_that_are_true_and_no_others() -> None:
    from mcp_stateless.bridge.endpoint import _modern_capabilities

    assert _modern_capabilities({
        "tools": {"listChanged": False, "x": 1}, "prompts": {"listChanged": True},
        "resources": {"subscribe": False, "listChanged": True}, "completions": {}, "logging": {},
        "experimental": {"y": {}}, "tasks": {"list": {}}, "sampling": "no"}) == {
        "tools": {"x": 1}, "prompts": {"listChanged": True}, "resources": {"listChanged": True}, "completions": {}}
    assert _modern_capabilities({"tools": True}) == {}


async def test_the_card_of_an_upstream_with_a_title_and_no_instructions() -> None:
    app = App("titled-upstream", "3.1.0", title="Titled Upstream")
    b = bridge_to(app)
    try:
        assert b.card_identity().bridge["upstream"] is None  # type: ignore[index]  # before any session
        assert b.card_identity().name == "dev.mcp-stateless.local/mcp-stateless-bridge"
        await b.startup()
        card = b.card_identity()
        assert card.name == "dev.mcp-stateless.local/titled-upstream" and card.version == "3.1.0"
        assert card.bridge is not None and card.bridge["bridge"] == {"name": "mcp-stateless-bridge",
                                                                     "version": card.bridge["bridge"]["version"]}
        assert card.bridge["bridge"]["version"] == b.card_identity().bridge["bridge"]["version"] != ""  # type: ignore[index]
        assert card.title == "Titled Upstream"
        assert card.description == "Titled Upstream: an MCP server"  # no instructions: named by its title
        assert card.bridge["upstream"]["title"] == "Titled Upstream"
        assert card.bridge["eras"]["upstream"] == {"era": "legacy", "versions": ["2025-11-25"]}
    finally:
        await b.aclose()


async def test_an_upstream_that_is_not_there_at_start_up_is_logged_and_tried_again_on_demand(
        caplog: pytest.LogCaptureFixture) -> None:
    import logging

    tries: list[int] = []
    app = upstream()

    def flaky() -> MemoryChannel:
        tries.append(1)
        if len(tries) == 1:
            raise OSError("not yet")
        return MemoryChannel(app, legacy=LegacyServer(app))

    b = Bridge(flaky, probe_timeout=2.0)
    try:
        with caplog.at_level(logging.WARNING, logger="mcp_stateless.bridge"):
            await b.startup()
        assert [r.getMessage() for r in caplog.records if r.name == "mcp_stateless.bridge"] == [
            "the upstream did not answer at start-up (the upstream server is unavailable: not yet): it is tried "
            "again on demand"]
        assert b.upstream is None
        discover = (await ask(b, "server/discover")).message["result"]  # learnt on the first request
        assert discover["instructions"] == "Be nice." and b.upstream is not None
        assert b.pool.opened == 1 and {lease.busy for lease in b.pool.leases} == {0}
    finally:
        await b.aclose()


async def test_a_question_after_the_calls_answer_is_refused_at_once() -> None:
    from mcp_stateless.bridge.endpoint import Pending
    from mcp_stateless.protocol.errors import McpError

    pending = Pending("p1")
    pending.end()
    with pytest.raises(McpError) as refused:
        await pending.ask("roots/list", {})
    assert refused.value.code == -32600
    assert refused.value.message.startswith("roots/list cannot be answered here: the 2026-07-28 client")
    live = Pending("p2")
    asked = asyncio.ensure_future(live.ask("sampling/createMessage", {"x": 1}))
    kind, (method, params, fut) = await asyncio.wait_for(live.events.get(), 3)
    assert (kind, method, params) == ("ask", "sampling/createMessage", {"x": 1})
    fut.set_result({"ok": True})
    assert await asyncio.wait_for(asked, 3) == {"ok": True}


@pytest.mark.parametrize(("tool", "caps", "method", "answer", "text"), [
    ("haiku", {"sampling": {}}, "sampling/createMessage",
     {"role": "assistant", "content": {"type": "text", "text": "rain"}, "model": "m1"}, "m1: rain"),
    ("roots_count", {"roots": {}}, "roots/list", {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}, "2 roots"),
    ("ask_name", {"elicitation": {"form": {}}}, "elicitation/create", {"action": "accept", "content": {"name": "Ida"}},
     "Hello, Ida (accept)"),
])
async def test_each_declared_capability_lets_the_upstream_ask_and_the_question_is_a_round(
        bridge: Bridge, tool: str, caps: dict[str, Any], method: str, answer: dict[str, Any], text: str) -> None:
    first = (await ask(bridge, "tools/call", {"name": tool, "arguments": {}}, caps)).message["result"]
    assert first["resultType"] == "input_required"
    assert [q["method"] for q in first["inputRequests"].values()] == [method]
    (key,) = first["inputRequests"]
    done = (await ask(bridge, "tools/call", {"name": tool, "arguments": {}, "inputResponses": {key: answer},
                                             "requestState": first["requestState"]}, caps)).message["result"]
    assert done["content"] == [{"type": "text", "text": text}]
    (lease,) = [le for le in bridge.pool.leases if le.exclusive]
    assert lease.key == pool_key(caps, None) and lease.ask is None and lease.busy == 0


async def test_without_the_capability_the_upstream_cannot_ask(bridge: Bridge) -> None:
    for tool, caps in (("haiku", {"roots": {}}), ("roots_count", {"sampling": {}}), ("ask_name", {"sampling": {}}),
                       ("ask_name", {"elicitation": {"url": {}}})):
        reply = (await ask(bridge, "tools/call", {"name": tool, "arguments": {}}, caps)).message
        result = reply.get("result", {})
        assert result.get("resultType") != "input_required", (tool, caps)


def test_a_pool_key_names_the_asking_capabilities_and_the_principal_only() -> None:
    assert pool_key({"sampling": {}, "roots": {"listChanged": True}, "experimental": {}}, "alice") == (
        '{"c":{"roots":{"listChanged":true},"sampling":{}},"p":"alice"}')
    assert pool_key({}, None) == '{"c":{},"p":null}'
    assert pool_key({"elicitation": {"form": {}}}, None) != pool_key({"elicitation": {"url": {}}}, None)


async def test_ending_a_pending_call_refuses_what_waits() -> None:
    from mcp_stateless.bridge.endpoint import Pending
    from mcp_stateless.protocol.errors import McpError

    pending = Pending("p3")
    answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    unanswered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    answered.set_result({"done": True})
    pending.waiting = {"q1": unanswered, "q0": answered}
    queued = asyncio.ensure_future(pending.ask("roots/list", {}))
    await asyncio.sleep(0)
    pending.events.put_nowait(("done", {}))
    pending.end()
    assert pending.ended
    with pytest.raises(McpError) as never:
        await unanswered
    assert (never.value.code, never.value.message) == (-32603, "the client's answer never came")
    with pytest.raises(McpError) as refused:
        await asyncio.wait_for(queued, 3)
    assert refused.value.code == -32600 and refused.value.message.startswith("roots/list cannot be answered here")
    assert pending.events.empty() and answered.result() == {"done": True}
