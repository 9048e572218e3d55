"""Authentication at the transport edge: an `Authenticator` answers for each HTTP request before its
body is read, and once per stdio process from its environment; a `Challenge` is the refusal."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from helpers import headers_for, rpc, validate_message
from mcp_stateless import App, Context, HttpTransport
from mcp_stateless.protocol.principal import Challenge, Credentials, Principal
from mcp_stateless.transports.stdio import AUTHORIZATION_ENV, StdioServer

METADATA = "https://mcp.example/.well-known/oauth-protected-resource"
NO_TOKEN = Challenge(401, f'Bearer resource_metadata="{METADATA}"', "Missing bearer token")
NO_SCOPE = Challenge(403, 'Bearer error="insufficient_scope", scope="tools:call"', "Insufficient scope")


class Tokens:
    """Bearer tokens -> principals; counts how often it is asked and what it was shown."""

    def __init__(self) -> None:
        self.seen: list[Credentials] = []

    async def authenticate(self, credentials: Credentials) -> Principal | Challenge:
        self.seen.append(credentials)
        token = credentials.headers.get("authorization", "")
        if token == "Bearer alice":
            return Principal("alice", frozenset({"tools:call"}), {"iss": "https://issuer.example"})
        if token == "Bearer bob":
            return Principal("bob")
        return NO_TOKEN if not token else NO_SCOPE


def make_app(tokens: Tokens) -> App:
    app = App("auth", authenticator=tokens)

    @app.tool()
    async def whoami(ctx: Context) -> str:
        p = ctx.principal
        return f"{p.id} scopes={sorted(p.scopes)} iss={p.claims.get('iss')}"

    return app


class Asgi:
    """Drives one ASGI request and records whether the transport ever asked for the body."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.received = 0
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        self.received += 1
        return {"type": "http.request", "body": self.body, "more_body": False}

    async def send(self, message: Mapping[str, Any]) -> None:
        self.sent.append(dict(message))

    async def post(self, transport: HttpTransport, headers: Mapping[str, str]) -> None:
        scope = {"type": "http", "method": "POST", "path": "/mcp", "root_path": "", "server": ("10.0.0.1", 80),
                 "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
        await transport(scope, self.receive, self.send)

    @property
    def status(self) -> int:
        status: int = self.sent[0]["status"]
        return status

    @property
    def headers(self) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.sent[0]["headers"]}

    @property
    def json(self) -> Any:
        return orjson.loads(b"".join(m.get("body", b"") for m in self.sent[1:]))


def whoami_call() -> dict[str, Any]:
    return rpc("tools/call", {"name": "whoami", "arguments": {}})


async def test_a_challenge_is_the_status_the_header_and_a_jsonrpc_error_before_the_body_is_read() -> None:
    tokens = Tokens()
    transport = HttpTransport(make_app(tokens))
    msg = whoami_call()
    for auth, challenge in ((None, NO_TOKEN), ("Bearer mallory", NO_SCOPE)):
        asgi = Asgi(orjson.dumps(msg))
        await asgi.post(transport, headers_for(msg, authorization=auth))
        assert asgi.received == 0  # refused on the headers alone
        assert asgi.status == challenge.status
        assert asgi.headers["www-authenticate"] == challenge.www_authenticate
        assert asgi.headers["content-type"] == "application/json"
        assert asgi.json == {"jsonrpc": "2.0", "error": {"code": -32600, "message": challenge.message}}
        validate_message(asgi.json)
    assert [c.transport for c in tokens.seen] == ["http", "http"]
    assert tokens.seen[1].headers["authorization"] == "Bearer mallory"


async def test_an_accepted_principal_reaches_the_handler_with_its_scopes_and_claims() -> None:
    tokens = Tokens()
    transport = HttpTransport(make_app(tokens))
    msg = whoami_call()
    for token, expected in (("Bearer alice", "alice scopes=['tools:call'] iss=https://issuer.example"),
                            ("Bearer bob", "bob scopes=[] iss=None")):
        asgi = Asgi(orjson.dumps(msg))
        await asgi.post(transport, headers_for(msg, authorization=token))
        assert asgi.status == 200
        assert "www-authenticate" not in asgi.headers
        assert asgi.json["result"]["content"] == [{"type": "text", "text": expected}]
    assert len(tokens.seen) == 2  # once per request


async def test_an_explicit_authenticator_wins_over_the_apps_own() -> None:
    tokens = Tokens()
    app = make_app(Tokens())

    class Everyone:
        async def authenticate(self, credentials: Credentials) -> Principal | Challenge:
            return Principal("carol")

    msg = whoami_call()
    asgi = Asgi(orjson.dumps(msg))
    await asgi.post(HttpTransport(app, authenticator=Everyone()), headers_for(msg))
    assert asgi.json["result"]["content"][0]["text"] == "carol scopes=[] iss=None"
    assert tokens.seen == []


def test_principal_resolver_and_authenticator_are_exclusive() -> None:
    try:
        App("x", principal=lambda _h: "a", authenticator=Tokens())
    except ValueError as e:
        assert str(e) == "give principal= (a resolver) or authenticator=, not both"
    else:
        raise AssertionError("App accepted both principal= and authenticator=")


async def _serve_stdio(server: StdioServer, lines: list[dict[str, Any]]) -> tuple[bool, list[dict[str, Any]]]:
    read_fd, write_fd = os.pipe()
    server._out_fd = write_fd
    reader = asyncio.StreamReader()
    for line in lines:
        reader.feed_data(orjson.dumps(line) + b"\n")
    reader.feed_eof()
    try:
        served = await server.serve(reader)
    finally:
        os.close(write_fd)
    with os.fdopen(read_fd, "rb") as out:
        return served, [orjson.loads(raw) for raw in out.read().splitlines()]


async def test_stdio_authenticates_once_per_process_from_its_environment() -> None:
    tokens = Tokens()
    server = StdioServer(make_app(tokens), environ={AUTHORIZATION_ENV: "Bearer alice", "PATH": "/bin"})
    calls = [rpc("tools/call", {"name": "whoami", "arguments": {}}, id=i) for i in (1, 2, 3)]
    served, out = await _serve_stdio(server, calls)
    assert served
    assert sorted(m["id"] for m in out) == [1, 2, 3]
    assert {m["result"]["content"][0]["text"] for m in out} == {"alice scopes=['tools:call'] iss=https://issuer.example"}
    assert [(c.transport, dict(c.headers)) for c in tokens.seen] == [("stdio", {"authorization": "Bearer alice"})]


async def test_stdio_without_the_variable_presents_no_credentials_and_a_refusal_serves_nothing() -> None:
    tokens = Tokens()
    app = make_app(tokens)
    served, out = await _serve_stdio(StdioServer(app, environ={}), [whoami_call()])
    assert (served, out) == (False, [])
    assert [(c.transport, dict(c.headers)) for c in tokens.seen] == [("stdio", {})]


async def test_stdio_reads_this_processs_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AUTHORIZATION_ENV, "Bearer bob")
    tokens = Tokens()
    served, out = await _serve_stdio(StdioServer(make_app(tokens)), [whoami_call()])
    assert served
    assert [m["result"]["content"][0]["text"] for m in out] == ["bob scopes=[] iss=None"]
    assert [dict(c.headers) for c in tokens.seen] == [{"authorization": "Bearer bob"}]


async def test_both_eras_get_one_step_up_header_from_an_authenticator_without_a_builder() -> None:
    """An `Authenticator` with no `scope_challenge` (not OAuth's): the transport's own challenge, the same
    for a modern request and for a call of a 2025 session."""
    from mcp_stateless.server.legacy import LegacyServer

    tokens = Tokens()
    app = App("auth", authenticator=tokens)

    @app.tool(scopes=["admin"])
    async def reset() -> str:
        return "reset"

    legacy = LegacyServer(app)
    transport = HttpTransport(app, legacy=legacy)
    challenge = 'Bearer error="insufficient_scope", scope="admin"'
    error = {"code": -32600, "message": "Insufficient scope: tool reset needs admin",
             "data": {"requiredScopes": ["admin"]}}
    modern = rpc("tools/call", {"name": "reset", "arguments": {}}, id=5)
    asgi = Asgi(orjson.dumps(modern))
    await asgi.post(transport, headers_for(modern, authorization="Bearer alice"))
    assert (asgi.status, asgi.headers["www-authenticate"]) == (403, challenge)
    assert asgi.json == {"jsonrpc": "2.0", "id": 5, "error": error}

    plain = {"content-type": "application/json", "accept": "application/json, text/event-stream",
             "authorization": "Bearer alice"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}
    asgi = Asgi(orjson.dumps(init))
    await asgi.post(transport, plain)
    assert asgi.status == 200 and asgi.json["result"]["protocolVersion"] == "2025-11-25"
    session = {**plain, "mcp-session-id": asgi.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    call = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "reset", "arguments": {}}}
    asgi = Asgi(orjson.dumps(call))
    await asgi.post(transport, session)
    assert (asgi.status, asgi.headers["www-authenticate"]) == (403, challenge)
    assert asgi.headers["content-type"] == "application/json"
    assert asgi.json == {"jsonrpc": "2.0", "id": 6, "error": error}
    counts = {(kind, status): n for kind, status, n in legacy.counter_snapshot().exchanges}
    assert counts[("request", 403)] == 1
