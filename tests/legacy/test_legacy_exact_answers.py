"""Exact answers of the 2025 branch at its seam (`LegacyServer.exchange`), in process: the GET stream's
notification for each change, a bad log level, a request needing a capability the session did not declare
(other than a tool call), and a session that ended while it was being updated."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_stateless import App, Context
from mcp_stateless.protocol.endpoint import KEEPALIVE, LegacyOutcome, LegacyReply, SseEvent
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.legacy import LegacyRequest, classify
from mcp_stateless.protocol.principal import ANONYMOUS, Principal
from mcp_stateless.server.legacy import LegacyServer, close_stream, replies
from mcp_stateless.server.legacy.getstream import notification
from mcp_stateless.server.legacy.methods import MAX_SUBSCRIBED_CHARS, MAX_SUBSCRIPTIONS, MAX_URI, _subscribe
from mcp_stateless.server.legacy.sessions import SessionGone, SessionState
from mcp_stateless.state.events import ChangeEvent

PLAIN = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def make_app() -> App:
    app = App("exact-answers", "1.0.0")

    @app.prompt()
    def named(ctx: Context) -> str:
        """Asks the user's name to write the prompt"""
        answer = ctx.elicit("What is your name?", NAME_FORM, key="name")
        return f"Hello {(answer.content or {}).get('name')}"

    return app


async def opened(server: LegacyServer, capabilities: dict[str, Any] | None = None,
                 who: Principal = ANONYMOUS) -> dict[str, str]:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities or {},
        "clientInfo": {"name": "exact", "version": "1"}}}
    reply = await server.exchange("POST", init, PLAIN, who, False)
    assert reply.session_id is not None
    return {**PLAIN, "mcp-session-id": reply.session_id, "mcp-protocol-version": "2025-11-25"}


@pytest.mark.parametrize(("kind", "method"), [("tools", "notifications/tools/list_changed"),
                                              ("prompts", "notifications/prompts/list_changed"),
                                              ("resources", "notifications/resources/list_changed")])
def test_a_list_change_is_its_notification_for_every_session(kind: str, method: str) -> None:
    assert notification(SessionState(), ChangeEvent(kind)) == {"jsonrpc": "2.0", "method": method}


def test_a_resource_update_reaches_only_a_session_subscribed_to_that_uri() -> None:
    subscribed = SessionState(subscriptions=["test://a"])
    assert notification(subscribed, ChangeEvent("resource_updated", "test://a")) == {
        "jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "test://a"}}
    assert notification(subscribed, ChangeEvent("resource_updated", "test://b")) is None
    assert notification(SessionState(), ChangeEvent("resource_updated", "test://a")) is None
    assert notification(SessionState(subscriptions=["test://a"]), ChangeEvent("resource_updated")) is None
    # A task event names a task id in `uri`: never a resource update, even if a URI equals it.
    assert notification(SessionState(subscriptions=["t1"]), ChangeEvent("task", "t1")) is None


async def test_a_bad_log_level_is_invalid_params_naming_the_levels() -> None:
    app = make_app()
    server = LegacyServer(app)
    session = await opened(server)
    bad = {"jsonrpc": "2.0", "id": 4, "method": "logging/setLevel", "params": {"level": "loud"}}
    reply = await server.exchange("POST", bad, session, ANONYMOUS, False)
    assert reply.kind is LegacyOutcome.OK
    assert reply.message == {"jsonrpc": "2.0", "id": 4, "error": {
        "code": -32602,
        "message": "level must be one of debug, info, notice, warning, error, critical, alert, emergency"}}


NEEDS_ELICITATION = ("This request needs the client capability: elicitation (the client did not declare it at "
                     "initialize)")


async def test_a_request_needing_an_undeclared_capability_is_a_tool_error_or_invalid_request() -> None:
    app = make_app()

    @app.tool()
    def ask_name(ctx: Context) -> str:
        """Asks the user's name"""
        ctx.elicit("What is your name?", NAME_FORM, key="name")
        return "asked"

    server = LegacyServer(app)
    session = await opened(server)  # no elicitation declared
    # A tool call: a tool error the model can read (agent frameworks abort a run on a JSON-RPC error).
    tool = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}}
    assert (await server.exchange("POST", tool, session, ANONYMOUS, False)).message == {
        "jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": NEEDS_ELICITATION}],
                                              "isError": True}}
    # Any other request: -32600 with the same message, and the modern refusal's data.
    get = {"jsonrpc": "2.0", "id": "p1", "method": "prompts/get", "params": {"name": "named"}}
    assert (await server.exchange("POST", get, session, ANONYMOUS, False)).message == {
        "jsonrpc": "2.0", "id": "p1", "error": {"code": -32600, "message": NEEDS_ELICITATION,
                                                "data": {"requiredCapabilities": {"elicitation": {"form": {}}}}}}


async def test_an_update_of_an_ended_session_raises_session_gone() -> None:
    app = make_app()
    server = LegacyServer(app)
    headers = await opened(server)
    sessions = server.sessions
    session = sessions.open(headers["mcp-session-id"], ANONYMOUS.id)
    assert session is not None
    await sessions.end(session)
    with pytest.raises(SessionGone) as gone:
        await sessions.update(session, lambda s: None)
    assert gone.value.code == -32001
    assert gone.value.message == "Session not found: it was terminated"


def streaming_app() -> App:
    app = App("exact-streams", "1.0.0")

    @app.tool()
    async def slowly(ctx: Context) -> str:
        """Reports progress, then answers a little later (so the answer is an SSE stream)"""
        ctx.report_progress(1, 2)
        await asyncio.sleep(0.3)
        return "slow done"

    @app.tool()
    async def poll_me(ctx: Context) -> str:
        """Closes its client's SSE connection (SEP-1699), then answers"""
        closed = close_stream(ctx)
        await asyncio.sleep(0.05)
        return f"closed: {closed}"

    @app.tool()
    async def change_tools() -> str:
        """A list change, logged for the GET streams"""
        await app.notify_tools_changed()
        return "changed"

    return app


def call(id_: int, name: str, progress: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {}}
    if progress:
        params["_meta"] = {"progressToken": id_}
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


async def test_a_get_resumes_the_rest_of_a_calls_stream_and_refuses_what_is_not_this_sessions() -> None:
    app = streaming_app()
    server = LegacyServer(app)
    session = await opened(server)
    reply = await server.exchange("POST", call(1, "slowly", progress=True), session, ANONYMOUS, True)
    assert reply.kind is LegacyOutcome.OK and reply.stream is not None
    priming = await anext(reply.stream)
    assert isinstance(priming, SseEvent) and priming.message is None and priming.retry == 1000
    progress = await anext(reply.stream)
    assert isinstance(progress, SseEvent) and progress.message is not None
    assert progress.message["method"] == "notifications/progress"
    await reply.stream.aclose()  # the client's connection drops; the call goes on
    stream_name, _, seq = (progress.id or "").rpartition(":")
    assert seq == "1" and priming.id == f"{stream_name}:0"
    other = await opened(server)
    refused = await server.exchange("GET", None, {**other, "last-event-id": progress.id or ""}, ANONYMOUS, True)
    assert refused.kind is LegacyOutcome.BAD_REQUEST and refused.message == {"jsonrpc": "2.0", "error": {
        "code": -32600, "message": "Last-Event-ID names no stream of this session (it may have expired)"}}
    unknown = await server.exchange("GET", None, {**session, "last-event-id": "nosuchstream:1"}, ANONYMOUS, True)
    assert unknown.kind is LegacyOutcome.BAD_REQUEST and unknown.message == refused.message
    resumed = await server.exchange("GET", None, {**session, "last-event-id": progress.id or ""}, ANONYMOUS, True)
    assert resumed.kind is LegacyOutcome.OK and resumed.stream is not None
    rest = [item async for item in resumed.stream]
    assert rest[0] is KEEPALIVE
    assert [(e.id, e.message) for e in rest[1:] if isinstance(e, SseEvent)] == [
        (f"{stream_name}:2", {"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "slow done"}]}})]


async def test_a_get_stream_needs_sse_and_an_event_id_this_server_sent() -> None:
    app = streaming_app()
    server = LegacyServer(app)
    session = await opened(server)
    plain = await server.exchange("GET", None, session, ANONYMOUS, False)
    assert plain.kind is LegacyOutcome.NOT_ACCEPTABLE and plain.stream is None
    assert plain.message == {"jsonrpc": "2.0", "error": {
        "code": -32600, "message": "Not Acceptable: the GET stream needs Accept: text/event-stream"}}
    for junk in ("nope", "get:", ":5", "get:x", "get:-1"):
        bad = await server.exchange("GET", None, {**session, "last-event-id": junk}, ANONYMOUS, True)
        assert bad.kind is LegacyOutcome.BAD_REQUEST, junk
        assert bad.message == {"jsonrpc": "2.0", "error": {"code": -32600, "message": (
            "Bad Request: Last-Event-ID must be an event id this server sent (<stream>:<number>)")}}
    await server.exchange("POST", call(2, "change_tools"), session, ANONYMOUS, False)
    assert await server.change_log.head() == 1
    fresh = await server.exchange("GET", None, session, ANONYMOUS, True)
    assert fresh.kind is LegacyOutcome.OK and fresh.stream is not None
    assert await anext(fresh.stream) == SseEvent(None, id="get:1", retry=1000)  # from now on: the head
    await server.exchange("POST", call(3, "change_tools"), session, ANONYMOUS, False)
    assert await asyncio.wait_for(anext(fresh.stream), 3) == SseEvent(
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, id="get:2")
    await fresh.stream.aclose()
    for asked, primed in (("get:0", "get:0"), ("get:99", "get:2")):  # beyond the head: the log was reset
        resumed = await server.exchange("GET", None, {**session, "last-event-id": asked}, ANONYMOUS, True)
        assert resumed.kind is LegacyOutcome.OK and resumed.stream is not None
        assert await anext(resumed.stream) == SseEvent(None, id=primed, retry=1000)
        if asked == "get:0":
            changed = await asyncio.wait_for(anext(resumed.stream), 3)
            assert changed == SseEvent({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
                                       id="get:1")
        await resumed.stream.aclose()


async def test_a_handler_closes_its_sse_stream_only_where_there_is_one() -> None:
    app = streaming_app()
    server = LegacyServer(app)
    session = await opened(server)
    json = await server.exchange("POST", call(3, "poll_me"), session, ANONYMOUS, False)
    assert json.message == {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text",
                                                                               "text": "closed: False"}]}}
    streamed = await server.exchange("POST", call(4, "poll_me"), session, ANONYMOUS, True)
    assert streamed.stream is not None
    items = [item async for item in streamed.stream]
    assert [type(i).__name__ for i in items] == ["SseEvent"] and isinstance(items[0], SseEvent)
    assert items[0].message is None  # only the priming event: the stream ended before the answer
    stream_name = (items[0].id or "").rpartition(":")[0]
    for _ in range(100):
        resumed = await server.exchange("GET", None, {**session, "last-event-id": items[0].id or ""},
                                        ANONYMOUS, True)
        assert resumed.stream is not None
        rest = [i for i in [item async for item in resumed.stream] if isinstance(i, SseEvent)]
        if rest:
            break
    assert [(e.id, e.message) for e in rest] == [(f"{stream_name}:1", {"jsonrpc": "2.0", "id": 4, "result": {
        "content": [{"type": "text", "text": "closed: True"}]}})]


async def test_unsubscribing_takes_only_that_uri_out_of_the_sessions_subscriptions() -> None:
    app = make_app()
    server = LegacyServer(app)
    headers = await opened(server)
    for n, (method, uri) in enumerate([("resources/subscribe", "test://a"), ("resources/subscribe", "test://b"),
                                       ("resources/unsubscribe", "test://a"),
                                       ("resources/unsubscribe", "test://never")]):
        reply = await server.exchange("POST", {"jsonrpc": "2.0", "id": n, "method": method,
                                               "params": {"uri": uri}}, headers, ANONYMOUS, False)
        assert reply.message == {"jsonrpc": "2.0", "id": n, "result": {}}
    session = server.sessions.open(headers["mcp-session-id"], ANONYMOUS.id)
    assert session is not None
    state = await server.sessions.state(session)
    assert state is not None and state.subscriptions == ["test://b"]


def test_a_failed_exchange_is_the_servers_fault_only_for_an_internal_error() -> None:
    internal = replies.failed(6, McpError(-32603, "the store is down"))
    assert internal.kind is LegacyOutcome.FAILED
    assert internal.message == {"jsonrpc": "2.0", "id": 6, "error": {"code": -32603, "message": "the store is down"}}
    other = replies.failed(None, McpError(-32602, "bad"))
    assert other.kind is LegacyOutcome.BAD_REQUEST
    assert other.message == {"jsonrpc": "2.0", "error": {"code": -32602, "message": "bad"}}
    assert replies.error(7, McpError(-32601, "no")) == LegacyReply(
        LegacyOutcome.OK, {"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "no"}})


def scoped_app() -> App:
    app = App("exact-scoped", "1.0.0")

    @app.resource("vault://{name}", scopes=["tools:admin"])
    def vault(name: str) -> str:
        return f"secret {name}"

    return app


async def subscription(server: LegacyServer, headers: dict[str, str], method: str, params: dict[str, Any],
                       id_: int, who: Principal = ANONYMOUS) -> dict[str, Any] | None:
    reply = await server.exchange("POST", {"jsonrpc": "2.0", "id": id_, "method": method, "params": params},
                                  headers, who, False)
    return reply.message


async def test_subscribe_needs_a_uri_of_at_most_max_uri_characters() -> None:
    app = make_app()
    server = LegacyServer(app)
    headers = await opened(server)
    assert await subscription(server, headers, "resources/subscribe", {}, 1) == {"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32602, "message": "resources/subscribe needs params.uri"}}
    assert await subscription(server, headers, "resources/unsubscribe", {"uri": 5}, 2) == {
        "jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "resources/unsubscribe needs params.uri"}}
    longest = "test://" + "x" * (MAX_URI - len("test://"))
    assert await subscription(server, headers, "resources/subscribe", {"uri": longest}, 3) == {
        "jsonrpc": "2.0", "id": 3, "result": {}}
    assert await subscription(server, headers, "resources/subscribe", {"uri": longest + "x"}, 4) == {
        "jsonrpc": "2.0", "id": 4, "error": {"code": -32602,
                                             "message": f"params.uri is longer than {MAX_URI} characters"}}
    # A bound reached inside the update is the request's error, with its id.
    full = [f"u://{n}" for n in range(MAX_SUBSCRIPTIONS - 1)]
    session = server.sessions.open(headers["mcp-session-id"], ANONYMOUS.id)
    assert session is not None
    await server.sessions.update(session, lambda s: s.subscriptions.extend(full))
    assert await subscription(server, headers, "resources/subscribe", {"uri": "u://over"}, 5) == {
        "jsonrpc": "2.0", "id": 5, "error": {"code": -32602, "message": (
            f"a session may subscribe to at most {MAX_SUBSCRIPTIONS} resources")}}
    state = await server.sessions.state(session)
    assert state is not None and state.subscriptions == [longest, *full]


def test_a_sessions_subscriptions_are_bounded_in_count_and_in_characters() -> None:
    state = SessionState(subscriptions=[f"u://{n}" for n in range(MAX_SUBSCRIPTIONS - 1)])
    _subscribe("u://last")(state)  # the thousandth fits
    assert len(state.subscriptions) == MAX_SUBSCRIPTIONS and state.subscriptions[-1] == "u://last"
    _subscribe("u://3")(state)  # one it has already: nothing changes, nothing refused
    assert len(state.subscriptions) == MAX_SUBSCRIPTIONS
    with pytest.raises(McpError) as over:
        _subscribe("u://more")(state)
    assert over.value.code == -32602
    assert over.value.message == f"a session may subscribe to at most {MAX_SUBSCRIPTIONS} resources"
    chars = SessionState(subscriptions=["a" * (MAX_SUBSCRIBED_CHARS - 10)])
    _subscribe("b" * 10)(chars)  # exactly at the bound
    assert chars.subscriptions == ["a" * (MAX_SUBSCRIBED_CHARS - 10), "b" * 10]
    with pytest.raises(McpError) as long:
        _subscribe("c")(chars)
    assert long.value.code == -32602
    assert long.value.message == f"a session's subscribed URIs may total at most {MAX_SUBSCRIBED_CHARS} characters"
    assert len(chars.subscriptions) == 2


async def test_unsubscribing_needs_no_scope_and_a_session_ended_meanwhile_is_unknown() -> None:
    app = scoped_app()
    server = LegacyServer(app)
    reader = Principal("reader", frozenset({"tools:read"}))
    headers = await opened(server, who=reader)
    assert await subscription(server, headers, "resources/subscribe", {"uri": "vault://a"}, 1, reader) == {
        "jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": (
            "Insufficient scope: resource vault://a needs tools:admin"), "data": {"requiredScopes": ["tools:admin"]}}}
    # Leaving what one may not read is always allowed (nothing about the resource is learnt).
    assert await subscription(server, headers, "resources/unsubscribe", {"uri": "vault://a"}, 2, reader) == {
        "jsonrpc": "2.0", "id": 2, "result": {}}
    session = server.sessions.open(headers["mcp-session-id"], reader.id)
    assert session is not None
    await server.sessions.end(session)  # between the gate and the update, as a DELETE elsewhere would
    for n, (method, params) in enumerate([("resources/subscribe", {"uri": "test://x"}),
                                          ("resources/unsubscribe", {"uri": "test://x"}),
                                          ("logging/setLevel", {"level": "info"})], start=3):
        req = classify({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
        assert isinstance(req, LegacyRequest)
        if method == "logging/setLevel":
            reply = await server.methods._set_level(req, session)
        else:
            reply = await server.methods._subscription(req, session, reader)
        assert reply.kind is LegacyOutcome.UNKNOWN_SESSION
        assert reply.message == {"jsonrpc": "2.0", "id": n, "error": {
            "code": -32001, "message": "Session not found: it was terminated"}}


async def test_a_question_from_a_call_answered_as_json_has_nowhere_to_go() -> None:
    app = App("exact-no-stream", "1.0.0")

    @app.tool()
    def ask_name(ctx: Context) -> str:
        """Asks the user's name"""
        ctx.elicit("What is your name?", NAME_FORM, key="name")
        return "asked"

    server = LegacyServer(app)
    headers = await opened(server, {"elicitation": {}})
    # can_sse False: the client takes only a JSON response, so no request can be sent to it mid-call.
    reply = await server.exchange("POST", call(9, "ask_name"), headers, ANONYMOUS, False)
    assert reply.message == {"jsonrpc": "2.0", "id": 9, "error": {
        "code": -32603, "message": "this call has no stream to send a request to the client on"}}


async def test_a_running_call_holds_one_place_of_its_session_and_of_its_principal() -> None:
    app = streaming_app()
    server = LegacyServer(app)
    headers = await opened(server)
    session = server.sessions.open(headers["mcp-session-id"], ANONYMOUS.id)
    assert session is not None
    reply = await server.exchange("POST", call(1, "slowly", progress=True), headers, ANONYMOUS, True)
    assert reply.stream is not None
    assert server.calls.in_flight() == ({session.key: 1}, {ANONYMOUS.id: 1})
    items = [item async for item in reply.stream]  # to the call's end
    assert isinstance(items[-1], SseEvent) and items[-1].message is not None and items[-1].message["id"] == 1
    for _ in range(100):
        if server.calls.in_flight() == ({}, {}):
            break
        await asyncio.sleep(0.01)
    assert server.calls.in_flight() == ({}, {})


async def test_a_response_nobody_waits_for_is_refused_naming_its_id() -> None:
    app = make_app()
    server = LegacyServer(app)
    headers = await opened(server, {"elicitation": {}})
    for rid in (5, "abc", "mcps-abc.never-asked"):
        reply = await server.exchange("POST", {"jsonrpc": "2.0", "id": rid, "result": {}}, headers, ANONYMOUS, False)
        assert reply.kind is LegacyOutcome.BAD_REQUEST, rid
        assert reply.message == {"jsonrpc": "2.0", "error": {
            "code": -32600, "message": f"no request with id {rid!r} is waiting for a response"}}


async def test_set_level_is_kept_in_the_sessions_state() -> None:
    app = make_app()
    server = LegacyServer(app)
    headers = await opened(server)
    session = server.sessions.open(headers["mcp-session-id"], ANONYMOUS.id)
    assert session is not None
    level = {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "error"}}
    assert (await server.exchange("POST", level, headers, ANONYMOUS, False)).message == {
        "jsonrpc": "2.0", "id": 1, "result": {}}
    state = await server.sessions.state(session)
    assert state is not None and state.log_level == "error"


async def test_a_delete_ends_the_session_and_frees_its_principals_place() -> None:
    app = make_app()
    server = LegacyServer(app, max_sessions_per_principal=1)
    dana = Principal("dana")
    first = await opened(server, who=dana)
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "exact", "version": "1"}}}
    over = await server.exchange("POST", init, PLAIN, dana, False)
    assert over.kind is LegacyOutcome.TOO_MANY and over.session_id is None and over.retry_after_s == 60
    session = server.sessions.open(first["mcp-session-id"], dana.id)
    assert session is not None
    assert (await server.exchange("DELETE", None, first, dana, False)).kind is LegacyOutcome.OK
    assert await server.sessions.state(session) is None
    again = await server.exchange("POST", init, PLAIN, dana, False)
    assert again.kind is LegacyOutcome.OK and again.session_id is not None
