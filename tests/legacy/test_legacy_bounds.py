"""What one 2025 client may take of a server: bounded, refused with a clear error beyond the bound, and
other clients served as before."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from helpers import open_legacy_session
from mcp_stateless import App
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.server.legacy.methods import MAX_SUBSCRIBED_CHARS, MAX_URI

V = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def _app() -> App:
    app = App("bounds-tests")

    @app.tool()
    def noop() -> str:
        return "ok"

    return app


def _subscribe(client: httpx.Client, url: str, headers: dict[str, str], uri: str, id_: int) -> dict[str, Any]:
    r = client.post(url, headers=headers, json={"jsonrpc": "2.0", "id": id_, "method": "resources/subscribe",
                                                "params": {"uri": uri}})
    assert r.status_code == 200
    got: dict[str, Any] = r.json()
    return got


def test_a_subscribed_uri_and_a_sessions_subscriptions_are_bounded_in_size(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    session = open_legacy_session(s.url)
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


def _principal_app(gate: threading.Event) -> App:
    app = App("inflight-tests", principal=lambda headers: (headers or {}).get("x-user", "anonymous"))

    @app.tool()
    def hold() -> str:
        """A sync tool that keeps its worker thread until the test opens the gate."""
        gate.wait(30)
        return "held"

    @app.tool()
    def quick() -> str:
        return "quick"

    return app


def _open_as(url: str, user: str) -> dict[str, str]:
    r = httpx.post(url, headers={"accept": ACCEPT, "x-user": user}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    assert r.status_code == 200, r.text
    return {"accept": ACCEPT, "x-user": user, "mcp-session-id": r.headers["mcp-session-id"],
            "mcp-protocol-version": V}


def _call(url: str, headers: dict[str, str], tool: str, id_: int) -> httpx.Response:
    return httpx.post(url, headers=headers, timeout=30, json={
        "jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": tool, "arguments": {}}})


def _start_and_drop(url: str, headers: dict[str, str], id_: int) -> None:
    """Start a `hold` call and leave: its stream opens (nothing sent within json_within_s), the client goes."""
    with httpx.stream("POST", url, headers=headers, timeout=30, json={
            "jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": "hold", "arguments": {}}}) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"


@pytest.mark.slow  # a few seconds: many requests through a real server
def test_calls_in_flight_are_bounded_per_session_and_per_principal(served: Callable[..., Any]) -> None:
    gate = threading.Event()
    app = _principal_app(gate)
    server = LegacyServer(app, max_inflight_per_session=3, max_inflight_per_principal=4)
    s = served(app, legacy=server)
    try:
        first, second = _open_as(s.url, "mallory"), _open_as(s.url, "mallory")
        for i in range(3):
            _start_and_drop(s.url, first, 10 + i)  # dropped, but a 2025 call runs on: it keeps its place
        over = _call(s.url, first, "quick", 20)
        assert over.status_code == 429 and over.headers["retry-after"] == "1"
        assert over.json() == {"jsonrpc": "2.0", "id": 20, "error": {
            "code": -32600, "message": "Too many requests: this session has 3 calls running already; retry when "
            "one ends", "data": {"limit": 3, "scope": "session"}}}
        _start_and_drop(s.url, second, 30)  # the principal's fourth
        refused = _call(s.url, second, "quick", 31)
        assert refused.status_code == 429 and refused.json()["error"]["data"] == {"limit": 4, "scope": "principal"}
        # ping and other session methods are not calls: still answered
        ping = httpx.post(s.url, headers=first, json={"jsonrpc": "2.0", "id": 32, "method": "ping"})
        assert ping.json() == {"jsonrpc": "2.0", "id": 32, "result": {}}
        # another principal's sync tool gets a thread at once: mallory's dropped calls hold 4, not all
        other = _open_as(s.url, "alice")
        started = time.monotonic()
        answered = _call(s.url, other, "quick", 40)
        assert answered.json()["result"]["content"] == [{"type": "text", "text": "quick"}]
        assert time.monotonic() - started < 2.0
    finally:
        gate.set()
    deadline = time.monotonic() + 10  # once the held calls end, their places are free again
    while any(server.calls.in_flight()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.calls.in_flight() == ({}, {})
    assert _call(s.url, first, "quick", 50).json()["result"]["content"] == [{"type": "text", "text": "quick"}]


def _big_app() -> App:
    app = App("stream-bytes-tests")

    @app.tool()
    def big() -> str:
        return "x" * (256 * 1024)

    return app


@pytest.mark.slow  # a few seconds: many requests through a real server
def test_an_http_sse_stream_nobody_reads_is_closed_at_its_byte_bound(served: Callable[..., Any]) -> None:
    """A 2024-11-05 client that opens its stream and never reads it: what waits for it is bounded in bytes
    (it was 4,096 messages of any size); beyond the bound the stream, its channel and session end."""
    app = _big_app()
    s = served(app, legacy=LegacyServer(app, max_stream_bytes=1 << 20), legacy_sse=True)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # keep the kernel's share of the backlog small
    sock.connect(("127.0.0.1", s.port))
    try:
        sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        head = b""
        while b"data: /mcp?" not in head or not head.endswith(b"\n\n"):
            head += sock.recv(1)  # up to the endpoint event, then never read again
        path = head.split(b"data: ", 1)[1].split(b"\n", 1)[0].decode()
        post = f"http://127.0.0.1:{s.port}{path}"
        assert httpx.post(post, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}).status_code == 202
        status = 202
        for i in range(200):  # 50 MiB of responses at most, far past any socket buffer
            status = httpx.post(post, json={"jsonrpc": "2.0", "id": 1 + i, "method": "tools/call",
                                            "params": {"name": "big", "arguments": {}}}).status_code
            if status == 404:
                break
            time.sleep(0.01)
        assert status == 404, "the stream of a client that never reads it was never closed"
        gone = httpx.post(post, json={"jsonrpc": "2.0", "id": 999, "method": "ping"})
        assert gone.status_code == 404 and gone.json()["error"]["code"] == -32001
    finally:
        sock.close()
    # the server goes on serving others
    assert httpx.post(s.url, headers={"accept": ACCEPT}, json={"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": V, "capabilities": {},
                                 "clientInfo": {"name": "t", "version": "0"}}}).status_code == 200


@pytest.mark.slow  # a few seconds: many requests through a real server
def test_open_sessions_are_bounded_per_authenticated_principal(served: Callable[..., Any]) -> None:
    app = _principal_app(threading.Event())
    s = served(app, legacy=LegacyServer(app, max_sessions_per_principal=3))

    def init(user: str | None) -> httpx.Response:
        extra = {} if user is None else {"x-user": user}
        return httpx.post(s.url, headers={"accept": ACCEPT, **extra}, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})

    bobs = [init("bob") for _ in range(3)]
    assert all(r.status_code == 200 for r in bobs)
    over = init("bob")
    assert over.status_code == 429 and "mcp-session-id" not in over.headers
    assert over.json() == {"jsonrpc": "2.0", "id": 0, "error": {
        "code": -32600, "message": "Too many sessions: this principal has 3 open; end one (DELETE) or wait for one "
        "to expire", "data": {"limit": 3, "scope": "sessions"}}}
    assert init("alice").status_code == 200  # another principal is not affected
    assert all(init(None).status_code == 200 for _ in range(5))  # anonymous callers are not counted together
    first = {"accept": ACCEPT, "x-user": "bob", "mcp-session-id": bobs[0].headers["mcp-session-id"],
             "mcp-protocol-version": V}
    assert httpx.delete(s.url, headers=first).status_code == 200
    assert init("bob").status_code == 200  # a DELETE frees its place
    assert init("bob").status_code == 429


def test_an_expired_session_frees_its_principals_place() -> None:
    from mcp_stateless.protocol.mrtr import KeyRing
    from mcp_stateless.server.legacy.sessions import Sessions
    from mcp_stateless.state.memory import open_bundle

    async def run() -> list[bool]:
        bundle = open_bundle()
        sessions = Sessions(KeyRing.generate(), bundle.records, ttl_s=3600)
        got = []
        try:
            _, old = sessions.issue("bob", V, {}, None)
            got.append(await sessions.admit(dataclasses.replace(old, expires_at=time.time() + 0.2), 2))
            _, live = sessions.issue("bob", V, {}, None)
            got.append(await sessions.admit(live, 2))
            _, third = sessions.issue("bob", V, {}, None)
            got.append(await sessions.admit(third, 2))  # two open: refused
            await asyncio.sleep(0.3)
            got.append(await sessions.admit(third, 2))  # the first expired: its place is free
            await sessions.forget(live)
            _, fourth = sessions.issue("bob", V, {}, None)
            got.append(await sessions.admit(fourth, 2))  # and so is a forgotten (DELETEd) one's
        finally:
            await bundle.aclose()
        return got

    assert asyncio.run(run()) == [True, True, False, True, True]


def test_a_reading_http_sse_client_gets_a_response_larger_than_the_bound(served: Callable[..., Any]) -> None:
    """The bound is on what *waits*: one message of any size goes out to a client that reads."""
    from sse_stream import sse

    app = _big_app()
    s = served(app, legacy=LegacyServer(app, max_stream_bytes=64 * 1024), legacy_sse=True)
    with sse(s.url) as stream:
        post = stream.post_url()
        assert httpx.post(post, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}).status_code == 202
        stream.message(lambda m: m.get("id") == 0)
        for i in (1, 2):
            assert httpx.post(post, json={"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                          "params": {"name": "big", "arguments": {}}}).status_code == 202
            got = stream.message(lambda m, i=i: m.get("id") == i)
            assert len(got["result"]["content"][0]["text"]) == 256 * 1024
