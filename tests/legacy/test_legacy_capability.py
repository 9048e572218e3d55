"""A 2025 client without a capability a handler needs is answered in its era's terms: a tool call gets a
tool error result (`isError: true`) naming the capability, other requests -32600; never -32021, a code
that exists only from 2026-07-28 on (agent frameworks abort a run on a JSON-RPC error, not on isError)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from helpers import headers_for
from mcp_stateless import App, Context
from mcp_stateless.server.legacy import LegacyServer

V = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _app() -> App:
    app = App("capability-tests")

    @app.tool()
    def ask_name(ctx: Context) -> str:
        answer = ctx.elicit("What is your name?", FORM, key="name")
        return f"Hello, {(answer.content or {}).get('name')}"

    @app.prompt()
    def sampled(ctx: Context) -> str:
        got = ctx.sample("Say something", 20, key="s")
        return str(got.get("content"))

    return app


def _open(url: str, caps: dict[str, Any]) -> dict[str, str]:
    r = httpx.post(url, headers={"accept": ACCEPT}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": V, "capabilities": caps, "clientInfo": {"name": "t", "version": "0"}}})
    assert r.status_code == 200, r.text
    return {"accept": ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": V}


def test_a_tool_needing_an_undeclared_capability_is_a_tool_error(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    session = _open(s.url, {"sampling": {}})  # no elicitation
    r = httpx.post(s.url, headers=session, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                 "params": {"name": "ask_name", "arguments": {}}})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert "error" not in body and body["id"] == 1
    assert body["result"]["isError"] is True
    [block] = body["result"]["content"]
    assert block["type"] == "text" and "elicitation" in block["text"] and "initialize" in block["text"]


def test_another_request_needing_an_undeclared_capability_is_a_2025_error(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    session = _open(s.url, {"elicitation": {}})  # no sampling
    r = httpx.post(s.url, headers=session, json={"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
                                                 "params": {"name": "sampled", "arguments": {}}})
    assert r.status_code == 200
    error = r.json()["error"]
    assert error["code"] == -32600 and "sampling" in error["message"]
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_a_2026_client_still_gets_minus_32021(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "ask_name", "arguments": {}, "_meta": meta}}
    r = httpx.post(s.url, headers=headers_for(message), json=message)
    assert r.json()["error"]["code"] == -32021
