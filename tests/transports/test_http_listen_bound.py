"""Listen streams are bounded per caller (a principal; an anonymous caller by peer address), well below
the connection cap: the stream past the bound gets 429 with a JSON-RPC error, while another caller and
an ordinary tools/call still succeed, and closing a stream frees its place."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson

from helpers import headers_for, rpc
from mcp_stateless import App, HttpTransport
from mcp_stateless.protocol.principal import ResolverAuthenticator


def transport(limit: int) -> HttpTransport:
    app = App("listen-bound", listen_keepalive_s=30)

    @app.tool()
    def ping() -> str:
        return "pong"

    def who(headers: Mapping[str, str] | None) -> str:
        return (headers or {}).get("x-user", "anonymous")

    return HttpTransport(app, authenticator=ResolverAuthenticator(who), max_listen_streams=limit)


class Exchange:
    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = b""
        self.started = asyncio.Event()
        self.gone = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


@contextlib.asynccontextmanager
async def exchange(asgi: HttpTransport, message: dict[str, Any], *, user: str | None = None,
                   peer: str = "127.0.0.1") -> AsyncIterator[Exchange]:
    """One POST driven in process; leaving the block hangs up (an open listen stream ends then)."""
    hdrs = headers_for(message)
    if user is not None:
        hdrs["x-user"] = user
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000"), *((k.lower().encode(), v.encode()) for k, v in hdrs.items())],
        "server": ("127.0.0.1", 8000), "client": (peer, 50000),
    }
    ex = Exchange()
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": orjson.dumps(message), "more_body": False}
        await ex.gone.wait()
        return {"type": "http.disconnect"}

    async def send(msg: dict[str, Any]) -> None:
        if msg["type"] == "http.response.start":
            ex.status = msg["status"]
            ex.headers = {k.decode(): v.decode() for k, v in msg["headers"]}
        else:
            ex.body += msg.get("body", b"")
            if ex.body:
                ex.started.set()

    ex.task = asyncio.create_task(asgi(scope, receive, send))
    try:
        await asyncio.wait_for(ex.started.wait(), 5)
        yield ex
    finally:
        ex.gone.set()
        await asyncio.wait_for(ex.task, 5)


def listen(id_: int) -> dict[str, Any]:
    return rpc("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=id_)


async def test_the_stream_past_the_bound_is_refused_others_go_on_and_closing_frees_a_place() -> None:
    asgi = transport(2)
    async with contextlib.AsyncExitStack() as stack:
        held = [await stack.enter_async_context(exchange(asgi, listen(i), user="alice")) for i in (1, 2)]
        assert [h.status for h in held] == [200, 200]
        async with exchange(asgi, listen(3), user="alice") as third:
            assert third.status == 429
            assert third.headers["retry-after"] == "30"
            body = orjson.loads(third.body)
            assert body["id"] == 3
            assert body["error"]["code"] == -32600
            assert body["error"]["data"] == {"limit": 2, "scope": "principal"}
        async with exchange(asgi, listen(4), user="bob") as other:  # another principal
            assert other.status == 200
        async with exchange(asgi, rpc("tools/call", {"name": "ping"}, id=5), user="alice") as call:
            assert call.status == 200
            assert orjson.loads(call.body)["result"]["content"] == [{"type": "text", "text": "pong"}]
        # alice closes one stream: her next listen is accepted
        held[0].gone.set()
        assert held[0].task is not None
        await asyncio.wait_for(held[0].task, 5)
        async with exchange(asgi, listen(6), user="alice") as again:
            assert again.status == 200


async def test_anonymous_callers_are_bounded_by_peer_address() -> None:
    asgi = transport(1)
    async with exchange(asgi, listen(1), peer="10.0.0.1") as first:
        assert first.status == 200
        async with exchange(asgi, listen(2), peer="10.0.0.1") as refused:
            assert refused.status == 429
            assert orjson.loads(refused.body)["error"]["data"] == {"limit": 1, "scope": "peer"}
        async with exchange(asgi, listen(3), peer="10.0.0.2") as elsewhere:
            assert elsewhere.status == 200
