"""Step-up on the 2025 era: a legacy session's call that lacks a scope gets the same 403 challenge as a
modern request (the 2025-11-25 authorization spec asks for it), and a retry with a token carrying the
scope succeeds on the same session. Real authorization server (oidc-provider), real `mcp-stateless serve`
subprocess, real HTTP."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from as_harness import ROOT, AuthServer
from test_resource_server import APP, CLI, prm_url, protected

LEGACY = "2025-11-25"


@pytest.fixture(scope="module")
def server(auth_server: AuthServer) -> Iterator[str]:
    with protected([auth_server.issuer], "--auth-required-scopes", "tools:read") as url:
        yield url


def post(url: str, message: dict[str, Any], token: str, session: str | None = None) -> httpx.Response:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "authorization": f"Bearer {token}"}
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": LEGACY}
    return httpx.post(url, content=orjson.dumps(message), headers=headers, timeout=15)


def open_session(url: str, token: str) -> str:
    r = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}, token)
    assert r.status_code == 200, r.text
    assert r.json()["result"]["protocolVersion"] == LEGACY
    sid = r.headers["mcp-session-id"]
    assert post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, sid).status_code == 202
    return sid


def request(url: str, method: str, params: dict[str, Any], token: str, session: str, rid: int = 11) -> httpx.Response:
    return post(url, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, token, session)


def test_a_legacy_call_without_its_scope_is_403_with_the_step_up_challenge(server: str,
                                                                         auth_server: AuthServer) -> None:
    token = auth_server.token("reader", server, "tools:read")
    sid = open_session(server, token)
    step_up = (f'Bearer error="insufficient_scope", scope="tools:read tools:admin", '
               f'resource_metadata="{prm_url(server)}"')
    for method, params, what in [
        ("tools/call", {"name": "reset", "arguments": {}}, "tool reset"),
        ("prompts/get", {"name": "audit"}, "prompt audit"),
        ("resources/read", {"uri": "memo://secret"}, "resource memo://secret"),
    ]:
        r = request(server, method, params, token, sid)
        assert r.status_code == 403, r.text
        assert r.headers["www-authenticate"] == step_up
        assert r.headers["content-type"] == "application/json"
        assert r.json() == {"jsonrpc": "2.0", "id": 11, "error": {
            "code": -32600, "message": f"Insufficient scope: {what} needs tools:admin",
            "data": {"requiredScopes": ["tools:admin"]}}}
    # the refusals left the session as it was: what the token allows still works on it
    r = request(server, "tools/call", {"name": "whoami", "arguments": {}}, token, sid, rid=12)
    assert r.status_code == 200, r.text
    assert r.json()["result"]["structuredContent"]["id"] == f"{auth_server.issuer}#reader"
    r = request(server, "resources/read", {"uri": "memo://public"}, token, sid, rid=13)
    assert r.status_code == 200 and r.json()["result"]["contents"][0]["text"] == "hello"


def test_a_step_up_token_of_the_same_principal_succeeds_on_the_same_session(server: str,
                                                                          auth_server: AuthServer) -> None:
    narrow = auth_server.token("full", server, "tools:read")
    sid = open_session(server, narrow)
    r = request(server, "tools/call", {"name": "reset", "arguments": {}}, narrow, sid)
    assert r.status_code == 403
    assert 'error="insufficient_scope", scope="tools:read tools:admin"' in r.headers["www-authenticate"]
    wide = auth_server.token("full", server, "tools:read tools:admin")  # the same iss#sub, more scope
    r = request(server, "tools/call", {"name": "reset", "arguments": {}}, wide, sid, rid=12)
    assert r.status_code == 200, r.text
    assert r.json() == {"jsonrpc": "2.0", "id": 12, "result": {"content": [{"type": "text", "text": "reset"}]}}
    r = request(server, "prompts/get", {"name": "audit"}, wide, sid, rid=13)
    assert r.status_code == 200 and r.json()["result"]["messages"][0]["content"]["text"] == "audit everything"
    # scopes are read from each request's token, never remembered by the session: the narrow token is
    # refused again on the very session the wide one just used
    r = request(server, "tools/call", {"name": "reset", "arguments": {}}, narrow, sid, rid=14)
    assert r.status_code == 403 and r.json()["id"] == 14
    # a token of another principal does not inherit the session (it is bound to iss#sub): 404, as for
    # a session id that never existed, so that client initializes a session of its own
    other = auth_server.token("reader", server, "tools:read")
    r = request(server, "tools/call", {"name": "whoami", "arguments": {}}, other, sid, rid=15)
    assert r.status_code == 404, r.text
    assert r.json() == {"jsonrpc": "2.0", "id": 15, "error": {"code": -32001, "message": "Session not found"}}


def test_on_stdio_a_legacy_refusal_names_the_scope_in_data(auth_server: AuthServer) -> None:
    """stdio has no status or header: the JSON-RPC error's `data.requiredScopes` is what a client steps up to."""
    resource = "http://127.0.0.1:9/mcp"
    argv = [CLI, "serve", APP, "--stdio", "--state", "memory://", "--auth-issuer", auth_server.issuer,
            "--resource-url", resource]
    token = auth_server.token("reader", resource, "tools:read")
    messages = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "reset", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}},
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_STATELESS_")}
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=30,
                       input=b"".join(orjson.dumps(m) + b"\n" for m in messages),
                       env=env | {"MCP_STATELESS_AUTHORIZATION": f"Bearer {token}"})
    assert r.returncode == 0, r.stderr
    answers = {m["id"]: m for m in map(orjson.loads, r.stdout.splitlines())}
    assert answers[0]["result"]["protocolVersion"] == LEGACY
    assert answers[1] == {"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32600, "message": "Insufficient scope: tool reset needs tools:admin",
        "data": {"requiredScopes": ["tools:admin"]}}}
    assert answers[2]["result"]["structuredContent"]["id"] == f"{auth_server.issuer}#reader"
