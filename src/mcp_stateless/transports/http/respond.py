"""Writing HTTP responses: every JSON body through the one encoder (`protocol.encoding.encode_message`),
every SSE response with the same headers, and the small ASGI helpers both eras share."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from ...protocol import errors, sse
from ...protocol.asgi import Message, Receive, Send
from ...protocol.encoding import encode_message
from ...protocol.errors import McpError
from ...protocol.principal import Challenge


def json_headers(length: int) -> list[tuple[bytes, bytes]]:
    # perf: a Content-Length lets uvicorn skip chunked framing for the (usual) JSON answer
    return [(b"content-type", b"application/json"), (b"content-length", b"%d" % length)]


async def send_bytes(send: Send, status: int, data: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """An already encoded JSON body, with its length."""
    headers = json_headers(len(data))
    if extra:
        headers += extra
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def send_json(send: Send, status: int, body: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """`body` as JSON (None: an empty response)."""
    if body is None:
        await empty(send, status, extra or [])
        return
    await send_bytes(send, status, encode_message(body), extra)  # an error may echo an id of any size


async def empty(send: Send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def error(send: Send, status: int, id_: Any, err: McpError) -> None:
    await send_json(send, status, errors.error_response(id_, err))


async def challenge(send: Send, refusal: Challenge) -> None:
    """An authentication refusal: its status, its `WWW-Authenticate`, a JSON-RPC error body."""
    extra = [(b"www-authenticate", refusal.www_authenticate.encode("latin-1"))] if refusal.www_authenticate else None
    await send_json(send, refusal.status, errors.error_response(None, McpError(refusal.code, refusal.message)), extra)


async def not_allowed(send: Send, method: str) -> None:
    """405 for anything but POST on the endpoint."""
    await send_json(send, 405, errors.error_response(
        None, McpError(errors.INVALID_REQUEST, f"{method} is not allowed: POST only")), [(b"allow", b"POST")])


async def plain(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


async def sse_start(send: Send, status: int = 200, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*sse.HEADERS, *extra] if extra else sse.HEADERS})


def with_header(send: Send, header: tuple[bytes, bytes]) -> Send:
    """`send` that adds `header` to the response start."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), header]}
        await send(message)

    return wrapped


async def wait_disconnect(receive: Receive) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return


def expiry(loop: asyncio.AbstractEventLoop, expires_at: float | None,
           task: asyncio.Task[None]) -> asyncio.TimerHandle | None:
    """Cancel `task` (a stream's pump) when the principal's credentials expire (epoch seconds)."""
    if expires_at is None:
        return None
    return loop.call_later(max(0.0, expires_at - time.time()), task.cancel)


async def end_stream(send: Send) -> None:
    """End a streamed response (its credentials expired): the client reconnects with new ones."""
    with contextlib.suppress(OSError):
        await send({"type": "http.response.body", "body": b""})
