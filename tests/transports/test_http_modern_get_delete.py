"""A GET or DELETE that names a modern revision in `MCP-Protocol-Version` is a modern request, whatever else
it carries: the 2026-07-28 transport is POST only, so it gets 405 with `Allow: POST` and a JSON-RPC error,
not the 2025 branch's 404 for an unknown session, nor (with HTTP+SSE served) a 2024-11-05 stream. Without
that header the same requests still reach the 2025 branch."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
import pytest

from mcp_stateless import App, HttpTransport
from mcp_stateless.server.legacy import LegacyServer

MODERN = "2026-07-28"


def transport(*, legacy_sse: bool) -> HttpTransport:
    app = App("modern-get")
    return HttpTransport(app, legacy=LegacyServer(app), legacy_sse=legacy_sse)


async def answer(asgi: HttpTransport, method: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one request; a response still streaming after its start is cut off
    there (the client goes away), so a wrongly opened stream fails the test instead of hanging it."""
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000"), *((k.encode(), v.encode()) for k, v in headers.items())],
        "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 50000),
    }
    sent: list[dict[str, Any]] = []
    started = asyncio.Event()
    done = asyncio.Event()
    gone = asyncio.Event()
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.start":
            started.set()
        elif not message.get("more_body", False):
            done.set()

    task = asyncio.create_task(asgi(scope, receive, send))
    await asyncio.wait_for(started.wait(), 10)
    with contextlib.suppress(TimeoutError):  # a stream: what it sent so far is enough
        await asyncio.wait_for(done.wait(), 2)
    gone.set()
    await asyncio.wait_for(task, 10)
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("legacy_sse", [False, True])
async def test_a_modern_get_or_delete_with_a_session_id_is_405_post_only(method: str, legacy_sse: bool) -> None:
    asgi = transport(legacy_sse=legacy_sse)
    status, headers, body = await answer(asgi, method, {
        "mcp-protocol-version": MODERN, "mcp-session-id": "a-2025-session", "accept": "text/event-stream"})
    assert status == 405
    assert headers["allow"] == "POST"
    assert headers["content-type"] == "application/json"
    refusal = orjson.loads(body)
    assert refusal["error"]["code"] == -32600
    assert refusal["error"]["message"] == f"{method} is not allowed: POST only"


async def test_a_modern_get_is_not_a_2024_sse_stream() -> None:
    status, headers, body = await answer(transport(legacy_sse=True), "GET", {
        "mcp-protocol-version": MODERN, "accept": "text/event-stream"})
    assert (status, headers["allow"]) == (405, "POST")
    assert orjson.loads(body)["error"]["code"] == -32600


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_without_a_modern_version_a_session_request_still_reaches_the_2025_branch(method: str) -> None:
    status, _, body = await answer(transport(legacy_sse=False), method, {
        "mcp-protocol-version": "2025-11-25", "mcp-session-id": "no-such-session", "accept": "text/event-stream"})
    assert status == 404
    assert orjson.loads(body)["error"]["code"] == -32001


async def test_without_a_version_a_get_still_opens_the_2024_sse_stream() -> None:
    status, headers, body = await answer(transport(legacy_sse=True), "GET", {"accept": "text/event-stream"})
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert body.startswith(b"event: endpoint\ndata: /mcp?session=")
