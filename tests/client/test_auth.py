"""The auth seam: one hook signs every HTTP request the client makes (modern, the probe, legacy Streamable
HTTP with its GET stream and DELETE, the 2024-11-05 HTTP+SSE transport) and may answer a 401 by retrying;
a 401/403 during the era probe is an `AuthenticationError`, never a reason to fall back to legacy."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import orjson
import pytest

from mcp_stateless import App, Client, Context
from mcp_stateless.client import AuthenticationError, BearerToken, HttpRequest
from mcp_stateless.client.http11 import Response
from mcp_stateless.protocol.principal import Challenge, Credentials, Principal

from .conftest import ok

CHALLENGE = 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource", error="invalid_token"'


def refused(status: int) -> tuple[int, str, list[bytes]]:
    body = orjson.dumps({"jsonrpc": "2.0", "error": {"code": -32001, "message": "Unauthorized"}})
    return status, f"application/json\r\nWWW-Authenticate: {CHALLENGE}", [body]


@pytest.mark.parametrize("status", [401, 403])
async def test_the_probe_raises_authentication_errors_instead_of_falling_back(scripted: Any, status: int) -> None:
    s = await scripted(lambda msg, h: refused(status))
    c = Client(s.url)
    with pytest.raises(AuthenticationError) as e:
        await c.connect()
    await c.aclose()
    assert e.value.status == status and e.value.www_authenticate == CHALLENGE
    assert [m.get("method") for m, _ in s.requests] == ["server/discover"]  # no initialize after it
    assert c.session is None


async def test_a_refused_request_after_the_probe_is_an_authentication_error(scripted: Any) -> None:
    s = await scripted(lambda msg, h: refused(401) if msg["method"] == "tools/call" else ok(msg["id"], {"tools": []}))
    async with Client(s.url, version="2026-07-28") as c:
        with pytest.raises(AuthenticationError) as e:
            await c.call_tool("t", {})
    assert e.value.status == 401 and e.value.www_authenticate == CHALLENGE


class Refreshing:
    """Starts with a stale token; on a 401 takes a fresh one and sends the request again."""

    def __init__(self) -> None:
        self.token = "stale"
        self.refreshes = 0

    async def auth_flow(self, request: HttpRequest) -> AsyncGenerator[HttpRequest, Response]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status == 401 and "invalid_token" in response.headers.get("www-authenticate", ""):
            self.token = "fresh"
            self.refreshes += 1
            request.headers["Authorization"] = "Bearer fresh"
            yield request


async def test_the_hook_signs_every_modern_request_and_retries_after_a_401(scripted: Any) -> None:
    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        if h.get("authorization") != "Bearer fresh":
            return refused(401)
        if msg["method"] == "server/discover":
            return ok(msg["id"], {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {}})
        if msg["method"] == "tools/list":
            return ok(msg["id"], {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]})
        return ok(msg["id"], {"content": [{"type": "text", "text": "done"}]})

    auth = Refreshing()
    s = await scripted(handler)
    async with Client(s.url, auth=auth) as c:
        assert c.era == "modern"
        assert (await c.call_tool("t", {}))["content"][0]["text"] == "done"
    assert auth.refreshes == 1
    seen = [(m["method"], h["authorization"]) for m, h in s.requests]
    assert seen == [("server/discover", "Bearer stale"), ("server/discover", "Bearer fresh"),
                    ("tools/list", "Bearer fresh"), ("tools/call", "Bearer fresh")]


async def test_the_hook_signs_legacy_streamable_http_post_get_and_delete(scripted: Any) -> None:
    async def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        if h.get("authorization") != "Bearer tok":
            return refused(401)
        line = msg.get("_http", "")
        if line.startswith("GET"):
            return 405, "text/plain", [b"no stream"]
        if line.startswith("DELETE"):
            return 200, "text/plain", [b"bye"]
        method = msg.get("method")
        if method == "server/discover":
            return 400, "text/plain", [b"unknown session"]
        if method == "initialize":
            body = orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "old"}}})
            return 200, "application/json\r\nMcp-Session-Id: s1", [body]
        if method == "notifications/initialized":
            return 202, "application/json", [b""]
        return ok(msg["id"], {"content": [{"type": "text", "text": "legacy"}]})

    s = await scripted(handler)
    async with Client(s.url, auth=BearerToken("tok"), elicitation=lambda p: None) as c:
        assert c.era == "legacy"
        assert (await c.call_tool("t", {}))["content"][0]["text"] == "legacy"
    kinds = [m.get("method") or m["_http"].split()[0] for m, _ in s.requests]
    assert kinds == ["server/discover", "initialize", "notifications/initialized", "GET", "tools/call", "DELETE"]
    assert all(h.get("authorization") == "Bearer tok" for _, h in s.requests)


class SseServer:
    """A 2024-11-05 HTTP+SSE server: GET /sse streams, POST /messages answers there; every request must carry
    `Authorization: Bearer tok` (else 401). POST to /sse (Streamable HTTP) is 405, as on such servers."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any] | None]] = []
        self.stream: asyncio.StreamWriter | None = None
        self.url = ""
        self.open_posts = False
        self.endpoint = b"/messages?session=1"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in head[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                msg = orjson.loads(body) if body else None
                self.requests.append((head[0], headers, msg))
                guarded = not (self.open_posts and head[0].startswith("POST"))
                if guarded and headers.get("authorization") != "Bearer tok":
                    writer.write(b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 0\r\n\r\n")
                elif head[0].startswith("GET /sse"):
                    self.stream = writer
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
                                 b": hello\n\nevent: endpoint\ndata: " + self.endpoint + b"\n\n")
                    await writer.drain()
                    await asyncio.Event().wait()  # the stream stays open
                elif head[0].startswith("POST /messages"):
                    writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
                    if isinstance(msg, dict) and "id" in msg and "method" in msg:
                        self.answer(msg)
                else:
                    writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()

    def answer(self, msg: dict[str, Any]) -> None:
        if msg["method"] == "initialize":
            result: dict[str, Any] = {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                                      "serverInfo": {"name": "sse"}}
        else:
            result = {"content": [{"type": "text", "text": f"over sse: {msg['params']['name']}"}]}
        assert self.stream is not None
        data = orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        self.stream.write(b"event: message\ndata: " + data + b"\n\n")


@pytest.fixture
async def sse_server() -> AsyncIterator[SseServer]:
    s = SseServer()
    srv = await asyncio.start_server(s.serve, "127.0.0.1", 0)
    s.url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/sse"
    yield s
    srv.close()


async def test_the_hook_signs_the_http_sse_transport(sse_server: SseServer) -> None:
    async with Client(sse_server.url, auth=BearerToken("tok")) as c:
        assert c.era == "legacy" and c.version == "2024-11-05" and c.server_info == {"name": "sse"}
        assert (await c.call_tool("echo", {}))["content"][0]["text"] == "over sse: echo"
    lines = [(line.split(" ")[0] + " " + line.split(" ")[1].split("?")[0], (m or {}).get("method"))
             for line, _, m in sse_server.requests]
    assert lines == [("POST /sse", "server/discover"), ("POST /sse", "initialize"), ("GET /sse", None),
                     ("POST /messages", "initialize"), ("POST /messages", "notifications/initialized"),
                     ("POST /messages", "tools/call")]
    assert all(h.get("authorization") == "Bearer tok" for _, h, _ in sse_server.requests)


async def test_an_endpoint_event_naming_another_origin_gets_no_request(sse_server: SseServer) -> None:
    """The HTTP+SSE stream names where to POST; credentials are never sent to another origin it names (as
    for a redirect): the connection is refused instead."""
    from mcp_stateless.client.errors import ChannelError

    thief = SseServer()
    srv = await asyncio.start_server(thief.serve, "127.0.0.1", 0)
    try:
        port = srv.sockets[0].getsockname()[1]
        sse_server.endpoint = f"http://127.0.0.1:{port}/messages?session=1".encode()
        with pytest.raises(ChannelError, match=rf"^the HTTP\+SSE endpoint event names another origin "
                                               rf"\(http://127.0.0.1:{port}\)$"):
            async with Client(sse_server.url, auth=BearerToken("tok"), version="2024-11-05"):
                pass
        assert thief.requests == []
    finally:
        srv.close()


@pytest.mark.parametrize("version", ["auto", "2024-11-05"])
async def test_without_credentials_the_refusal_is_reported_whichever_era(sse_server: SseServer, version: str) -> None:
    with pytest.raises(AuthenticationError) as e:
        async with Client(sse_server.url, version=version):
            pass
    assert e.value.status == 401 and e.value.www_authenticate == "Bearer"
    assert [line.split(" ")[0] for line, _, _ in sse_server.requests] == ["POST"]  # nothing after the refusal


async def test_a_refused_event_stream_is_an_authentication_error(sse_server: SseServer) -> None:
    sse_server.open_posts = True  # only the GET stream is guarded
    with pytest.raises(AuthenticationError) as e:
        async with Client(sse_server.url, version="2024-11-05"):
            pass
    assert e.value.status == 401 and e.value.www_authenticate == "Bearer"
    assert [line.split(" ")[0] for line, _, _ in sse_server.requests] == ["POST", "GET"]


class Tokens:
    async def authenticate(self, credentials: Credentials) -> Principal | Challenge:
        token = credentials.headers.get("authorization")
        if token == "Bearer alice":
            return Principal("alice")
        if token is None:
            return Challenge(401, CHALLENGE, "Missing bearer token")
        return Challenge(403, 'Bearer error="insufficient_scope"', "Insufficient scope")


async def test_against_our_own_http_transport(served: Any) -> None:
    app = App("guarded", authenticator=Tokens())

    @app.tool()
    def whoami(ctx: Context) -> str:
        return ctx.principal.id

    s = served(app)
    for auth, status, challenge in ((None, 401, CHALLENGE), (BearerToken("eve"), 403,
                                                              'Bearer error="insufficient_scope"')):
        c = Client(s.url, auth=auth)
        with pytest.raises(AuthenticationError) as e:
            await c.connect()
        await c.aclose()
        assert (e.value.status, e.value.www_authenticate) == (status, challenge)
        assert c.session is None
    async with Client(s.url, auth=BearerToken("alice")) as c:
        assert c.era == "modern"
        assert (await c.call_tool("whoami", {}))["content"] == [{"type": "text", "text": "alice"}]
