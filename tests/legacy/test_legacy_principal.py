"""A legacy session is bound to the principal that opened it, and an App served with `HttpTransport`
directly gets the legacy branch only when it is given one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from mcp_stateless import App
from mcp_stateless.protocol.endpoint import LegacyCounters
from mcp_stateless.server.legacy import LegacyServer

V = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def _who(headers: Mapping[str, str] | None) -> str:
    return (headers or {}).get("x-user", "anonymous")


def _app() -> App:
    app = App("principal-tests", principal=_who)

    @app.tool()
    def whoami() -> str:
        return "me"

    return app


def _init(url: str, user: str) -> str:
    r = httpx.post(url, headers={"accept": ACCEPT, "x-user": user}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    assert r.status_code == 200
    sid: str = r.headers["mcp-session-id"]
    return sid


def test_a_session_is_bound_to_its_principal(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    sid = _init(s.url, "alice")
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    base = {"accept": ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": V}
    assert httpx.post(s.url, json=ping, headers={**base, "x-user": "alice"}).json()["result"] == {}
    stolen = httpx.post(s.url, json=ping, headers={**base, "x-user": "mallory"})
    assert stolen.status_code == 404 and stolen.json()["error"]["code"] == -32001
    # Nor can another principal end it.
    assert httpx.delete(s.url, headers={**base, "x-user": "mallory"}).status_code == 404
    assert httpx.post(s.url, json=ping, headers={**base, "x-user": "alice"}).status_code == 200


def test_without_a_legacy_branch_initialize_is_refused(served: Callable[..., Any]) -> None:
    s = served(_app())
    r = httpx.post(s.url, headers={"accept": ACCEPT}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": V, "capabilities": {}}})
    assert (r.status_code, r.json()["error"]["code"]) == (404, -32601)


def test_oversized_capabilities_are_refused(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    r = httpx.post(s.url, headers={"accept": ACCEPT}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": V, "capabilities": {"x": "y" * 5000}}})
    assert r.status_code == 200 and r.json()["error"]["code"] == -32602
    assert "mcp-session-id" not in r.headers


def test_legacy_exchanges_are_counted_apart(served: Callable[..., Any]) -> None:
    app = _app()
    legacy = LegacyServer(app)
    s = served(app, legacy=legacy)
    sid = _init(s.url, "alice")
    base = {"accept": ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": V, "x-user": "alice"}
    httpx.post(s.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=base)
    httpx.post(s.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=base)
    httpx.post(s.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers={**base, "mcp-session-id": "bad"})
    assert dict(legacy.counters) == {("initialize", 200): 1, ("notification", 202): 1, ("request", 200): 1,
                                     ("request", 404): 1}


def test_the_counter_snapshot_is_a_typed_copy(served: Callable[..., Any]) -> None:
    app = _app()
    legacy = LegacyServer(app)
    s = served(app, legacy=legacy, legacy_sse=True)
    sid = _init(s.url, "alice")
    base = {"accept": ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": V, "x-user": "alice"}
    httpx.post(s.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=base)
    httpx.post(s.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers={**base, "mcp-session-id": "bad"})
    snapshot = legacy.counter_snapshot()
    assert snapshot == LegacyCounters((("initialize", 200, 1), ("request", 200, 1), ("request", 404, 1)))
    assert (snapshot.total(), snapshot.total("request"), snapshot.total("get")) == (3, 2, 0)
    httpx.post(s.url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=base)
    assert snapshot.total("request") == 2  # a copy: later exchanges do not change it
    assert legacy.counter_snapshot().total("request") == 3


def test_an_sse_channel_is_bound_to_its_principal(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app), legacy_sse=True)
    with httpx.stream("GET", s.url, headers={"accept": "text/event-stream", "x-user": "alice"}, timeout=20) as r:
        lines = r.iter_lines()
        assert next(lines) == "event: endpoint"
        endpoint = next(lines).removeprefix("data: ")
        post = s.url.rsplit("/", 1)[0] + endpoint
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": V, "capabilities": {}}}
        stolen = httpx.post(post, json=init, headers={"x-user": "mallory"})
        assert stolen.status_code == 404 and stolen.json()["error"]["code"] == -32001
        assert httpx.post(post, json=init, headers={"x-user": "alice"}).status_code == 202
