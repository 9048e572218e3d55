"""An entry that names two scopes needs both, on every path that reaches it: tools/call, prompts/get,
resources/read, completion/complete (prompt and template), the three lists, listen update notifications and a
legacy session's resources/subscribe. A caller with one of the two is refused exactly as one with none is, so
a rule that checked "any of them" instead of "all of them" fails here (one-scope fixtures cannot tell)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_stateless import App
from mcp_stateless.protocol import envelope
from mcp_stateless.protocol.endpoint import Call, ListenEvent
from mcp_stateless.protocol.envelope import Request
from mcp_stateless.protocol.principal import Principal

PV = "2026-07-28"
BOTH = frozenset({"ledger:read", "ledger:write"})
HALF = Call(Principal("iss#half", frozenset({"ledger:read", "other:x"})))
FULL = Call(Principal("iss#full", BOTH))


def request(app: App, method: str, params: dict[str, Any], rid: int = 1) -> Request:
    meta = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}
    decision = envelope.classify({"jsonrpc": "2.0", "id": rid, "method": method,
                                  "params": {**params, "_meta": meta}}, None, app.table)
    assert isinstance(decision, Request), decision
    return decision


def make_app() -> App:
    app = App("two-scopes")
    scopes = sorted(BOTH)

    @app.tool(scopes=scopes)
    def post_entry(amount: int) -> str:
        return f"posted {amount}"

    @app.prompt(scopes=scopes)
    def reconcile(account: str) -> str:
        return f"reconcile {account}"

    @app.completion(prompt="reconcile")
    def accounts(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return ["payroll"]

    @app.resource("ledger://{book}", scopes=scopes)
    def book(book: str) -> str:
        return "entries"

    @app.completion(resource="ledger://{book}")
    def books(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return ["2026"]

    @app.resource("ledger://index")
    def index() -> str:
        return "public"

    return app


PATHS = [
    ("tools/call", {"name": "post_entry", "arguments": {"amount": 3}}, "tool post_entry"),
    ("prompts/get", {"name": "reconcile", "arguments": {"account": "payroll"}}, "prompt reconcile"),
    ("resources/read", {"uri": "ledger://2026"}, "resource ledger://2026"),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "reconcile"},
                             "argument": {"name": "account", "value": ""}}, "prompt reconcile"),
    ("completion/complete", {"ref": {"type": "ref/resource", "uri": "ledger://{book}"},
                             "argument": {"name": "book", "value": ""}}, "resource ledger://{book}"),
]


@pytest.mark.parametrize(("method", "params", "what"), PATHS, ids=[f"{m}:{w}" for m, _, w in PATHS])
async def test_one_of_two_scopes_is_refused_and_both_are_served(method: str, params: dict[str, Any],
                                                                 what: str) -> None:
    app = make_app()
    refused = await app.handle(request(app, method, params), HALF)
    assert refused.scopes == BOTH, refused.message
    assert refused.message["error"] == {
        "code": -32600, "message": f"Insufficient scope: {what} needs ledger:read ledger:write",
        "data": {"requiredScopes": ["ledger:read", "ledger:write"]}}
    served = await app.handle(request(app, method, params), FULL)
    assert served.error_code is None, served.message
    assert "result" in served.message


@pytest.mark.parametrize(("method", "key", "field", "name"), [
    ("tools/list", "tools", "name", "post_entry"),
    ("prompts/list", "prompts", "name", "reconcile"),
    ("resources/templates/list", "resourceTemplates", "uriTemplate", "ledger://{book}"),
])
async def test_lists_show_a_two_scope_entry_only_to_a_caller_with_both(method: str, key: str, field: str,
                                                                       name: str) -> None:
    app = make_app()
    half = await app.handle(request(app, method, {}), HALF)
    full = await app.handle(request(app, method, {}), FULL)
    assert name not in [e[field] for e in half.message["result"][key]]
    assert name in [e[field] for e in full.message["result"][key]]


async def _updates(app: App, call: Call) -> list[str]:
    stream = app.listen(request(app, "subscriptions/listen",
                                {"notifications": {"resourceSubscriptions": ["ledger://"]}}), call)
    assert isinstance(await anext(stream), ListenEvent)
    await app.notify_resource_updated("ledger://2026")
    await app.notify_resource_updated("ledger://index")  # unscoped: always heard, and last
    got: list[str] = []
    try:
        while True:
            item = await asyncio.wait_for(anext(stream), 2)
            assert isinstance(item, ListenEvent)
            got.append(item.message["params"]["uri"])
            if got[-1] == "ledger://index":
                return got
    finally:
        await stream.aclose()


async def test_listen_updates_of_a_two_scope_resource_reach_only_a_caller_with_both() -> None:
    app = make_app()
    assert await _updates(app, HALF) == ["ledger://index"]
    assert await _updates(app, FULL) == ["ledger://2026", "ledger://index"]


async def test_a_legacy_subscribe_to_a_two_scope_resource_needs_both() -> None:
    from mcp_stateless.server.legacy import LegacyServer
    from mcp_stateless.transports.http.legacy import STATUS

    app = make_app()
    legacy = LegacyServer(app)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}
    plain = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    for call, status in [(HALF, 403), (FULL, 200)]:
        opened = await legacy.exchange("POST", init, plain, call.principal, False)
        sid = opened.session_id
        assert sid is not None
        session = {**plain, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        sub = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "ledger://2026"}}
        answer = await legacy.exchange("POST", sub, session, call.principal, False)
        assert STATUS[answer.kind] == status, answer.message
        if status == 403:
            assert answer.scopes == BOTH
