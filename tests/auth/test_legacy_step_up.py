"""Step-up on the 2025 era: a legacy session's call that lacks a scope gets the same 403 challenge as a
modern request (the 2025-11-25 authorization spec asks for it), and a retry with a token carrying the
scope succeeds on the same session; on stdio and the 2024-11-05 HTTP+SSE transport, what the refusal looks
like there. Real authorization server (oidc-provider), real `mcp-stateless serve`
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

from sse_stream import sse

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

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


def test_on_http_sse_a_tool_scope_refusal_arrives_on_the_stream_and_a_required_one_is_403(
    auth_server: AuthServer,
) -> None:
    """2024-11-05 HTTP+SSE: a POST is answered 202 before the call runs, so a tool's missing scope can only
    be told on the stream, as the JSON-RPC error with `data.requiredScopes` (no status, no header). A scope
    every request needs is checked when the POST is authenticated, before the channel: that POST gets the
    403 step-up challenge itself, as does a GET opening a stream."""
    with protected([auth_server.issuer], "--legacy-sse", "--auth-required-scopes", "tools:read") as url:
        token = auth_server.token("reader", url, "tools:read")
        auth = {"authorization": f"Bearer {token}"}
        with sse(url, auth) as stream:
            post = stream.post_url()
            r = httpx.post(post, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}},
                headers=auth)
            assert r.status_code == 202 and r.content == b""
            assert stream.message(lambda m: m.get("id") == 0)["result"]["protocolVersion"] == "2024-11-05"
            assert httpx.post(post, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                              headers=auth).status_code == 202
            r = httpx.post(post, json={"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                       "params": {"name": "reset", "arguments": {}}}, headers=auth)
            assert r.status_code == 202 and r.content == b"" and "www-authenticate" not in r.headers
            assert stream.message(lambda m: m.get("id") == 7) == {"jsonrpc": "2.0", "id": 7, "error": {
                "code": -32600, "message": "Insufficient scope: tool reset needs tools:admin",
                "data": {"requiredScopes": ["tools:admin"]}}}
            # a token without the server-wide scope: refused before its body is read, so without an id
            bare = {"authorization": f"Bearer {auth_server.token('reader', url)}"}
            r = httpx.post(post, json={"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                                       "params": {"name": "whoami", "arguments": {}}}, headers=bare)
            assert r.status_code == 403
            assert r.headers["www-authenticate"] == (f'Bearer error="insufficient_scope", scope="tools:read", '
                                                     f'resource_metadata="{prm_url(url)}"')
            assert r.json() == {"jsonrpc": "2.0", "error": {
                "code": -32600, "message": "Insufficient scope: needs tools:read"}}
            opening = httpx.get(url, headers={"accept": "text/event-stream", **bare})
            assert opening.status_code == 403
            assert (opening.headers["www-authenticate"], opening.content) == (r.headers["www-authenticate"],
                                                                              r.content)
