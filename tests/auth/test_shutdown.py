"""The authenticator's connections to its authorization server are released when the app shuts down
(the transport's lifespan shutdown calls `App.aclose`, which closes the authenticator's HTTP client)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
from as_harness import AuthServer

from mcp_stateless import App
from mcp_stateless.auth import BearerAuthenticator

RESOURCE = "http://127.0.0.1:9/mcp"  # the audience only: tokens are minted for it, nothing listens there
PV = "2026-07-28"


def established_to(port: int) -> int:
    """TCP connections of this machine in ESTABLISHED state whose remote end is 127.0.0.1:`port`."""
    count = 0
    with open("/proc/net/tcp") as table:
        next(table)
        for row in table:
            fields = row.split()
            remote, state = fields[2], fields[3]
            if state == "01" and remote == f"0100007F:{port:04X}":
                count += 1
    return count


def test_shutdown_closes_the_authenticators_http_client(served: Callable[..., Any], auth_server: AuthServer) -> None:
    auth = BearerAuthenticator(RESOURCE, [auth_server.issuer])
    app = App("closing", authenticator=auth)

    @app.tool()
    def ping() -> str:
        return "pong"

    before = established_to(auth_server.port)
    s = served(app)
    token = auth_server.token("full", RESOURCE, "tools:read")
    r = httpx.post(s.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "ping", "arguments": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": PV,
                                                   "io.modelcontextprotocol/clientCapabilities": {}}}},
                   headers={"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream",
                            "mcp-protocol-version": PV, "mcp-method": "tools/call", "mcp-name": "ping"})
    assert r.status_code == 200, r.text
    client = auth._http
    assert client is not None and not client.is_closed
    # the key fetch left a kept-alive connection to the authorization server
    assert established_to(auth_server.port) == before + 1

    s.stop()
    assert client.is_closed and auth._http is None
    # closed at once, not when the authorization server's keep-alive timer (5 s) ends it
    deadline = time.monotonic() + 1.0
    while established_to(auth_server.port) != before:
        assert time.monotonic() < deadline, "the connection to the authorization server is still open"
        time.sleep(0.05)
