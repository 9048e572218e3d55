"""Scopes hold on every path that reaches a scoped prompt or resource, not only on its own method: its
argument completions and the update notifications of listen streams and legacy sessions."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_stateless import App, Context
from mcp_stateless.protocol import envelope
from mcp_stateless.protocol.endpoint import Call, ListenEvent
from mcp_stateless.protocol.envelope import Request
from mcp_stateless.protocol.principal import Principal

PV = "2026-07-28"
READER = Call(Principal("iss#reader", frozenset({"tools:read"})))
ADMIN = Call(Principal("iss#admin", frozenset({"tools:read", "tools:admin"})))


def request(app: App, method: str, params: dict[str, Any], rid: int = 1) -> Request:
    meta = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}
    decision = envelope.classify({"jsonrpc": "2.0", "id": rid, "method": method,
                                  "params": {**params, "_meta": meta}}, None, app.table)
    assert isinstance(decision, Request), decision
    return decision


def make_app() -> App:
    app = App("scoped")

    @app.prompt(scopes=["tools:admin"])
    def audit(account: str) -> str:
        return f"audit {account}"

    @app.completion(prompt="audit")
    def accounts(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return ["payroll", "treasury"]

    @app.resource("vault://{name}", scopes=["tools:admin"])
    def vault(name: str) -> str:
        return "secret"

    @app.completion(resource="vault://{name}")
    def vault_names(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return ["launch-codes"]

    @app.resource("vault://index")
    def index() -> str:
        return "public"

    return app


def complete(ref: dict[str, str], argument: str) -> dict[str, Any]:
    return {"ref": ref, "argument": {"name": argument, "value": ""}}


async def test_completions_of_a_scoped_prompt_or_template_need_its_scopes() -> None:
    app = make_app()
    for ref, arg, what in [({"type": "ref/prompt", "name": "audit"}, "account", "prompt audit"),
                           ({"type": "ref/resource", "uri": "vault://{name}"}, "name", "resource vault://{name}")]:
        refused = await app.handle(request(app, "completion/complete", complete(ref, arg)), READER)
        assert refused.scopes == frozenset({"tools:admin"}), refused.message
        assert refused.message["error"] == {"code": -32600, "message": f"Insufficient scope: {what} needs tools:admin",
                                            "data": {"requiredScopes": ["tools:admin"]}}
        allowed = await app.handle(request(app, "completion/complete", complete(ref, arg)), ADMIN)
        assert allowed.error_code is None, allowed.message
        assert allowed.message["result"]["completion"]["values"]


async def _updates(app: App, call: Call, subscriptions: list[str], uris: list[str]) -> list[str]:
    """The `notifications/resources/updated` URIs a listen stream of `call` receives for `uris`."""
    stream = app.listen(request(app, "subscriptions/listen",
                                {"notifications": {"resourceSubscriptions": [*subscriptions, "vault://index"]}}),
                        call)
    first = await anext(stream)
    assert isinstance(first, ListenEvent)
    for uri in uris:
        await app.notify_resource_updated(uri)
    await app.notify_resource_updated("vault://index")  # unscoped and subscribed: it comes, and last
    got: list[str] = []
    try:
        while True:
            item = await asyncio.wait_for(anext(stream), 2)
            assert isinstance(item, ListenEvent)
            uri = item.message["params"]["uri"]
            got.append(uri)
            if uri == "vault://index":
                return got
    finally:
        await stream.aclose()


async def test_a_listen_stream_gets_no_updates_of_resources_outside_its_scopes() -> None:
    app = make_app()
    # a prefix subscription would otherwise name every scoped resource under it as it changes
    assert await _updates(app, READER, ["vault://"], ["vault://launch-codes"]) == ["vault://index"]
    assert await _updates(app, READER, ["vault://launch-codes"], ["vault://launch-codes"]) == ["vault://index"]
    assert await _updates(app, ADMIN, ["vault://"], ["vault://launch-codes"]) == ["vault://launch-codes",
                                                                                  "vault://index"]


async def test_a_legacy_session_cannot_subscribe_to_a_resource_outside_its_scopes() -> None:
    from mcp_stateless.server.legacy import LegacyServer
    from mcp_stateless.transports.http.legacy import STATUS

    app = make_app()
    legacy = LegacyServer(app)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}
    plain = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    for call, status in [(READER, 403), (ADMIN, 200)]:
        opened = await legacy.exchange("POST", init, plain, call.principal, False)
        assert STATUS[opened.kind] == 200
        sid = opened.session_id
        assert sid is not None
        session = {**plain, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        sub = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "vault://launch-codes"}}
        answer = await legacy.exchange("POST", sub, session, call.principal, False)
        assert STATUS[answer.kind] == status, answer.message
        if status == 403:
            assert answer.scopes == frozenset({"tools:admin"})
            assert answer.message == {"jsonrpc": "2.0", "id": 2, "error": {
                "code": -32600, "message": "Insufficient scope: resource vault://launch-codes needs tools:admin",
                "data": {"requiredScopes": ["tools:admin"]}}}
        else:
            assert answer.message == {"jsonrpc": "2.0", "id": 2, "result": {}}
        public = {**sub, "id": 3, "params": {"uri": "vault://index"}}
        assert STATUS[(await legacy.exchange("POST", public, session, call.principal, False)).kind] == 200


async def test_a_task_run_sees_the_scopes_of_the_caller_that_created_it() -> None:
    """A task's handler runs from the task record (on any instance, after a restart): it sees the creating
    caller's scopes, as the same tool called without a task does, and not an empty set."""
    from mcp_stateless.tasks.model import EXTENSION_ID
    from mcp_stateless.tasks.runtime import TaskRuntime

    app = App("scoped-tasks")
    app.enable_tasks(TaskRuntime())

    @app.tool(scopes=["tools:read"], task="optional")
    async def my_scopes(ctx: Context) -> dict[str, Any]:
        return {"scopes": sorted(ctx.principal.scopes)}

    meta = {"io.modelcontextprotocol/protocolVersion": PV,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION_ID: {}}}}

    def req(rid: int, method: str, params: dict[str, Any]) -> Request:
        decision = envelope.classify({"jsonrpc": "2.0", "id": rid, "method": method,
                                      "params": {**params, "_meta": meta}}, None, app.table)
        assert isinstance(decision, Request), decision
        return decision

    created = (await app.handle(req(1, "tools/call", {"name": "my_scopes", "arguments": {}}), ADMIN)).message
    assert created["result"]["resultType"] == "task", created
    tid = created["result"]["taskId"]
    for rid in range(2, 200):
        task = (await app.handle(req(rid, "tasks/get", {"taskId": tid}), ADMIN)).message["result"]
        if task["status"] != "working":
            break
        await asyncio.sleep(0.02)
    assert task["status"] == "completed", task
    assert task["result"]["structuredContent"] == {"scopes": ["tools:admin", "tools:read"]}
