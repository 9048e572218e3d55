"""Writing the legacy branch's answers: a JSON body, an empty status, or an SSE stream.

Kept apart from `http` so that the modern request path stays as it was; `HttpTransport` comes here only
for exchanges `protocol.legacy.era_of` calls legacy.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, MutableMapping
from typing import Any

from ...protocol import sse
from ...protocol.encoding import encode_message
from ...protocol.endpoint import KeepAlive, LegacyAnswer, LegacyItem

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def _frame(item: LegacyItem) -> bytes:
    if isinstance(item, KeepAlive):
        return sse.KEEPALIVE
    head = b"" if item.id is None else b"id: " + item.id.encode("ascii", "replace") + b"\n"
    if item.retry is not None:
        head += b"retry: %d\n" % item.retry
    if item.message is None:  # a priming event: an id to resume from, no message
        return head + b"data: \n\n"
    return head + sse.event(encode_message(item.message))


def _extra(answer: LegacyAnswer) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers]


async def write(answer: LegacyAnswer, receive: Receive, send: Send, expires_at: float | None = None) -> None:
    """Write `answer`; a stream is ended (its response completed) at `expires_at` (epoch seconds)."""
    stream = answer.stream
    if stream is None:
        if answer.body is None:
            await send({"type": "http.response.start", "status": answer.status, "headers": _extra(answer)})
            await send({"type": "http.response.body", "body": b""})
            return
        data = encode_message(answer.body)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data)), *_extra(answer)]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": data})
        return
    await _stream(answer, stream, receive, send, expires_at)


async def _stream(answer: LegacyAnswer, stream: AsyncGenerator[LegacyItem, None], receive: Receive,
                  send: Send, expires_at: float | None) -> None:
    # The stream's first item comes before the headers: a GET stream is subscribed by then, so nothing
    # published after the client sees 200 is missed.
    try:
        first = await anext(stream)
    except StopAsyncIteration:
        first = None
    await send({"type": "http.response.start", "status": answer.status, "headers": [*sse.HEADERS, *_extra(answer)]})
    if first is None:
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.body", "body": _frame(first), "more_body": True})
    await _follow(stream, receive, send, expires_at)


async def write_channel(endpoint_url: str, headers: tuple[tuple[str, str], ...],
                        stream: AsyncGenerator[LegacyItem, None], receive: Receive, send: Send,
                        expires_at: float | None = None) -> None:
    """A 2024-11-05 HTTP+SSE stream: the `endpoint` event naming where to POST, then the channel's
    messages until the client goes away (or `expires_at`, when the token that opened it expires)."""
    extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await send({"type": "http.response.start", "status": 200, "headers": [*sse.HEADERS, *extra]})
    frame = b"event: endpoint\ndata: " + endpoint_url.encode("ascii") + b"\n\n"
    try:
        await send({"type": "http.response.body", "body": frame, "more_body": True})
    except OSError:
        await stream.aclose()
        return
    await _follow(stream, receive, send, expires_at)


async def _follow(stream: AsyncGenerator[LegacyItem, None], receive: Receive, send: Send,
                  expires_at: float | None) -> None:
    """Write the rest of `stream` until it ends, the client disconnects or `expires_at` (epoch seconds)
    passes; close it in every case."""
    loop = asyncio.get_running_loop()
    pump = loop.create_task(_pump(stream, send))
    gone = loop.create_task(_wait_disconnect(receive))
    expiry = None if expires_at is None else loop.call_later(max(0.0, expires_at - time.time()), pump.cancel)
    try:
        await asyncio.wait((pump, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if expiry is not None:
            expiry.cancel()
        client_left = gone.done() and not gone.cancelled()
        for t in (pump, gone):
            if not t.done():
                t.cancel()
        await asyncio.wait((pump, gone))
        await stream.aclose()
    if pump.cancelled() and not client_left:  # the token expired: end the response (the client reconnects)
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b""})
        return
    if not pump.cancelled() and pump.exception() is not None:
        raise pump.exception()  # type: ignore[misc]


async def _pump(stream: AsyncGenerator[LegacyItem, None], send: Send) -> None:
    try:
        async for item in stream:
            await send({"type": "http.response.body", "body": _frame(item), "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    except OSError:
        return


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return
