"""A 2025 session over stdio (server/legacy/stdio.py) at the seam, in process: `LegacyServer.stdio_session`
with the lines the server would write collected in a list. What test_legacy_stdio.py sees through a
`serve --stdio` process is pinned here exactly: the refusals before `initialize`, list changes written only
after `initialized`, a question to the client answered on stdin, a cancelled request, and `aclose`."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_stateless import App, Context
from mcp_stateless.protocol.principal import ANONYMOUS
from mcp_stateless.server.legacy import LegacyServer

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "s", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def make_app(finished: list[str]) -> App:
    app = App("stdio-seam", "1.0.0")

    @app.tool()
    def ask_name(ctx: Context) -> str:
        """Asks the user's name"""
        answer = ctx.elicit("What is your name?", NAME_FORM, key="name")
        return f"Hello, {(answer.content or {}).get('name')}"

    @app.tool()
    async def change_tools() -> str:
        """Tells every listener that the tool list changed"""
        await app.notify_tools_changed()
        return "changed"

    @app.tool()
    async def chatty(ctx: Context) -> str:
        """Logs at info and at error"""
        ctx.log("info", "info line")
        ctx.log("error", "error line")
        return "logged"

    @app.tool()
    async def slow() -> str:
        """Takes a while"""
        await asyncio.sleep(0.3)
        finished.append("slow")
        return "slow done"

    return app


def call(id_: int, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}


async def until(out: list[dict[str, Any]], test: Any, timeout: float = 3.0) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        for m in out:
            if test(m):
                return m
        await asyncio.sleep(0.005)
    raise AssertionError(f"no such message in {out}")


async def test_before_initialize_a_request_is_refused_and_a_malformed_message_answered() -> None:
    app = make_app([])
    out: list[dict[str, Any]] = []
    s = LegacyServer(app).stdio_session(ANONYMOUS, out.append)
    s.receive({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    s.receive({"jsonrpc": "2.0", "method": "notifications/initialized"})  # no session: nothing happens
    s.receive({"jsonrpc": "2.0", "id": 2, "result": {}})  # an answer with no session: ignored
    s.receive({"jsonrpc": "2.0", "id": 3})
    await asyncio.sleep(0.05)
    assert out[0] == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": "send initialize first"}}
    assert len(out) == 2 and out[1]["id"] == 3 and out[1]["error"]["code"] == -32600
    await s.aclose()


async def test_list_changes_are_written_after_initialized_and_a_question_is_answered_on_stdin() -> None:
    app = make_app([])
    out: list[dict[str, Any]] = []
    s = LegacyServer(app).stdio_session(ANONYMOUS, out.append)
    try:
        s.receive(INIT)
        assert out[0]["id"] == 0 and out[0]["result"]["protocolVersion"] == "2025-11-25"
        s.receive(call(1, "change_tools"))  # before initialized: the change is not written
        await until(out, lambda m: m.get("id") == 1)
        await asyncio.sleep(0.05)
        assert CHANGED not in out
        s.receive(INITIALIZED)
        await asyncio.sleep(0.05)
        s.receive(call(2, "change_tools"))
        await until(out, lambda m: m == CHANGED)
        s.receive(call(3, "ask_name"))
        ask = await until(out, lambda m: m.get("method") == "elicitation/create")
        assert ask["params"]["message"] == "What is your name?"
        s.receive({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}})
        done = await until(out, lambda m: m.get("id") == 3)
        assert done == {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "Hello, Ada"}]}}
    finally:
        await s.aclose()


async def test_a_cancelled_request_writes_nothing_and_aclose_stops_what_runs() -> None:
    finished: list[str] = []
    app = make_app(finished)
    out: list[dict[str, Any]] = []
    s = LegacyServer(app).stdio_session(ANONYMOUS, out.append)
    s.receive(INIT)
    s.receive(INITIALIZED)
    s.receive(call(5, "slow"))
    await asyncio.sleep(0.05)
    s.receive({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}})
    await asyncio.sleep(0.4)
    assert finished == [] and [m for m in out if m.get("id") == 5] == []
    s.receive(call(6, "slow"))
    await asyncio.sleep(0.05)
    await s.aclose()  # the running call and the event pump are cancelled
    n = len(out)
    await app.notify_tools_changed()
    await asyncio.sleep(0.4)
    assert finished == [] and len(out) == n


async def test_an_id_is_free_again_once_its_request_is_answered_and_the_session_level_applies() -> None:
    app = make_app([])
    out: list[dict[str, Any]] = []
    s = LegacyServer(app).stdio_session(ANONYMOUS, out.append)
    try:
        s.receive(INIT)
        s.receive(INITIALIZED)
        s.receive({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "error"}})
        assert await until(out, lambda m: m.get("id") == 1) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        s.receive(call(1, "chatty"))  # the same id, now that its first request was answered
        done = await until(out, lambda m: m.get("id") == 1 and "content" in m.get("result", {}))
        assert done["result"]["content"] == [{"type": "text", "text": "logged"}]
        logs = [m["params"]["data"] for m in out if m.get("method") == "notifications/message"]
        assert logs == ["error line"]  # the session's level (error) holds for its later requests
    finally:
        await s.aclose()


async def test_list_changes_start_at_initialized_once_whatever_else_the_client_notifies() -> None:
    app = make_app([])
    out: list[dict[str, Any]] = []
    s = LegacyServer(app).stdio_session(ANONYMOUS, out.append)
    try:
        s.receive(INIT)
        s.receive({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})  # not initialized
        await asyncio.sleep(0.05)
        await app.notify_tools_changed()
        await asyncio.sleep(0.05)
        assert CHANGED not in out
        s.receive(INITIALIZED)
        s.receive(INITIALIZED)  # a second one starts nothing more
        await asyncio.sleep(0.05)
        await app.notify_tools_changed()
        await until(out, lambda m: m == CHANGED)
        await asyncio.sleep(0.1)
        assert out.count(CHANGED) == 1
    finally:
        await s.aclose()
