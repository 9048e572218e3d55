"""`App` as an `Endpoint`: `handle()` returns a `Reply` that carries its error code, `listen()` yields
typed items, and the `Call`'s principal is what handlers see."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_stateless import App, Context
from mcp_stateless.protocol import envelope
from mcp_stateless.protocol.endpoint import KEEPALIVE, Call, Endpoint, ListenEnd, ListenEvent, Reply
from mcp_stateless.protocol.envelope import Request
from mcp_stateless.protocol.principal import Principal

PV = "2026-07-28"


def request(app: App, method: str, params: dict[str, Any] | None = None, id_: int | str = 1) -> Request:
    meta = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}
    decision = envelope.classify({"jsonrpc": "2.0", "id": id_, "method": method,
                                  "params": {**(params or {}), "_meta": meta}}, None, app.table)
    assert isinstance(decision, Request), decision
    return decision


def make_app() -> App:
    app = App("endpoint", listen_keepalive_s=0.05)

    @app.tool()
    async def whoami(ctx: Context) -> str:
        return f"{ctx.principal.id} {sorted(ctx.principal.scopes)}"

    return app


def test_app_is_an_endpoint() -> None:
    endpoint: Endpoint = make_app()  # checked by mypy: App satisfies the Protocol
    assert endpoint.supported_versions == (PV,)


async def test_reply_error_code_is_the_code_in_the_message() -> None:
    app = make_app()
    cases = [
        (request(app, "tools/call", {"name": "whoami", "arguments": {}}), None),
        (request(app, "tools/call", {"name": "nope", "arguments": {}}), -32602),
        (request(app, "tools/call", {"name": "whoami", "arguments": []}), -32602),
        (request(app, "tools/list"), None),
    ]
    for req, code in cases:
        reply = await app.handle(req, Call())
        assert isinstance(reply, Reply)
        assert reply.error_code == code
        if code is None:
            assert "result" in reply.message and "error" not in reply.message
        else:
            assert reply.message["error"]["code"] == code


async def test_an_unknown_method_carries_its_code() -> None:
    app = make_app()
    req = request(app, "tools/list")
    unknown = Request(req.id, "tasks/get", {}, req.version, {}, None, None, None)
    reply = await app.handle(unknown, Call())
    assert reply.error_code == -32601
    assert reply.message["error"] == {"code": -32601, "message": "Method not found: tasks/get"}


async def test_handlers_see_the_calls_principal() -> None:
    app = make_app()
    who = Principal("alice", frozenset({"b", "a"}))
    reply = await app.handle(request(app, "tools/call", {"name": "whoami", "arguments": {}}), Call(who, "memory"))
    assert reply.message["result"]["content"] == [{"type": "text", "text": "alice ['a', 'b']"}]


async def test_listen_yields_an_event_keepalives_and_an_end() -> None:
    app = make_app()
    await asyncio.sleep(0.01)  # the registrations' own change events are published before we listen
    stream = app.listen(request(app, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, "L"),
                        Call())
    ack = await anext(stream)
    assert isinstance(ack, ListenEvent)
    assert ack.message["method"] == "notifications/subscriptions/acknowledged"
    assert await asyncio.wait_for(anext(stream), 2) is KEEPALIVE
    await app.notify_tools_changed()
    changed = await asyncio.wait_for(anext(stream), 2)
    while changed is KEEPALIVE:
        changed = await asyncio.wait_for(anext(stream), 2)
    assert isinstance(changed, ListenEvent)
    assert changed.message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                               "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "L"}}}
    await app.aclose()
    end = await asyncio.wait_for(anext(stream), 2)
    while end is KEEPALIVE:
        end = await asyncio.wait_for(anext(stream), 2)
    assert isinstance(end, ListenEnd)
    assert end.message == {"jsonrpc": "2.0", "id": "L", "result": {
        "resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": "L"}}}
    await stream.aclose()
