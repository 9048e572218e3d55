"""Log notifications per era: a 2025 session gets every level until it sends `logging/setLevel` (as the
official SDKs' servers do), a 2026 request only what its own `_meta` logLevel asks for, and neither era's
setting reaches the other."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from helpers import headers_for, open_legacy_session
from mcp_stateless import App, Context
from mcp_stateless.server.legacy import LegacyServer

LEVEL = "io.modelcontextprotocol/logLevel"


def _app() -> App:
    app = App("logging-tests")

    @app.tool()
    async def chatty(ctx: Context) -> str:
        ctx.log("debug", "debug line")
        ctx.log("info", "info line")
        ctx.log("error", "error line")
        return "done"

    return app


def _messages(r: httpx.Response) -> list[dict[str, Any]]:
    if r.headers["content-type"].startswith("application/json"):
        return [r.json()]
    return [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]


def _logs(r: httpx.Response) -> list[tuple[str, str]]:
    got = _messages(r)
    assert got[-1]["result"]["content"] == [{"type": "text", "text": "done"}], got
    return [(m["params"]["level"], m["params"]["data"]) for m in got if m.get("method") == "notifications/message"]


def _call(url: str, headers: dict[str, str], meta: dict[str, Any] | None = None, id_: int = 1) -> httpx.Response:
    params: dict[str, Any] = {"name": "chatty", "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    message = {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}
    return httpx.post(url, headers=headers, json=message)


ALL = [("debug", "debug line"), ("info", "info line"), ("error", "error line")]


def test_a_2025_session_that_never_set_a_level_gets_every_level(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    session = open_legacy_session(s.url)
    assert _logs(_call(s.url, session)) == ALL


def test_set_level_narrows_and_a_2026_meta_level_does_not_reach_the_2025_session(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    session = open_legacy_session(s.url)
    # a 2026-style per-request level on a 2025 request: not the 2025 way, ignored (neither narrows nor silences)
    assert _logs(_call(s.url, session, {LEVEL: "error"}, 2)) == ALL
    set_level = httpx.post(s.url, headers=session, json={
        "jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "warning"}})
    assert set_level.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert _logs(_call(s.url, session, None, 4)) == [("error", "error line")]
    assert _logs(_call(s.url, session, {LEVEL: "debug"}, 5)) == [("error", "error line")]


def _modern(level: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientCapabilities": {}}
    if level is not None:
        meta[LEVEL] = level
    return meta


def test_the_2025_default_does_not_reach_2026_requests(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    session = open_legacy_session(s.url)  # a 2025 session exists (and logs at every level) on the same server
    modern = headers_for({"method": "tools/call", "params": {"name": "chatty", "_meta": _modern(None)}})
    quiet = _call(s.url, modern, _modern(None))
    assert quiet.headers["content-type"] == "application/json" and _logs(quiet) == []
    # nor does a 2025 session's id on a 2026 request lend it the session's level
    assert _logs(_call(s.url, {**modern, "mcp-session-id": session["mcp-session-id"]}, _modern(None), 2)) == []
    assert _logs(_call(s.url, modern, _modern("info"), 3)) == ALL[1:]
    assert _logs(_call(s.url, session, None, 4)) == ALL
