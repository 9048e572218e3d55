"""What one 2025 client may take of a server: bounded, refused with a clear error beyond the bound, and
other clients served as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from mcp_stateless import App
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.server.legacy.server import MAX_SUBSCRIBED_CHARS, MAX_URI

V = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def _app() -> App:
    app = App("bounds-tests")

    @app.tool()
    def noop() -> str:
        return "ok"

    return app


def _open(url: str) -> dict[str, str]:
    r = httpx.post(url, headers={"accept": ACCEPT}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    assert r.status_code == 200, r.text
    return {"accept": ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": V}


def _subscribe(client: httpx.Client, url: str, headers: dict[str, str], uri: str, id_: int) -> dict[str, Any]:
    r = client.post(url, headers=headers, json={"jsonrpc": "2.0", "id": id_, "method": "resources/subscribe",
                                                "params": {"uri": uri}})
    assert r.status_code == 200
    got: dict[str, Any] = r.json()
    return got


def test_a_subscribed_uri_and_a_sessions_subscriptions_are_bounded_in_size(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    session = _open(s.url)
    with httpx.Client(timeout=30) as client:
        huge = _subscribe(client, s.url, session, "test://" + "x" * (1 << 20), 1)  # 1 MiB
        assert huge["error"]["code"] == -32602 and f"longer than {MAX_URI}" in huge["error"]["message"]
        longest = "test://" + "y" * (MAX_URI - len("test://") - 4)
        n = 0
        while True:  # URIs just under the per-URI bound until the session's total is reached
            got = _subscribe(client, s.url, session, f"{longest}{n:04d}", 2 + n)
            if "error" in got:
                break
            assert got["result"] == {}
            n += 1
            assert n <= MAX_SUBSCRIBED_CHARS // MAX_URI, "the session's subscriptions grew past their bound"
        assert n == MAX_SUBSCRIBED_CHARS // MAX_URI
        assert got["error"]["code"] == -32602 and "at most" in got["error"]["message"]
        # a short URI still fits after an unsubscribe, and the session goes on
        gone = client.post(s.url, headers=session, json={"jsonrpc": "2.0", "id": 99, "method": "resources/unsubscribe",
                                                         "params": {"uri": f"{longest}0000"}})
        assert gone.json()["result"] == {}
        assert _subscribe(client, s.url, session, "test://short", 100)["result"] == {}
