"""The modern (2026-07-28) request over HTTP, once the guards passed and the envelope made it a `Request`:
answered as JSON, or streamed as SSE when the handler emits notifications first (a bounded outbox); a
`subscriptions/listen` stream pumped as SSE. A client disconnect cancels the handler and nothing more is
written for that request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from ...protocol import errors, sse
from ...protocol.asgi import Receive, Send
from ...protocol.encoding import encode_message
from ...protocol.endpoint import Call, Endpoint, KeepAlive, ListenEnd, ListenItem, Reply
from ...protocol.envelope import Request
from ...protocol.errors import McpError
from ...protocol.outbox import BoundedOutbox
from ...protocol.principal import Principal
from . import respond


class _Wakeup:
    """Wakes the response writer: the handler finished, emitted a notification, or the client went.

    perf: one future per wait, instead of an Event + a waker task + asyncio.wait() per request."""

    __slots__ = ("_future", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._future: asyncio.Future[None] | None = None

    def set(self) -> None:
        f = self._future
        if f is not None and not f.done():
            f.set_result(None)

    async def wait(self) -> None:
        self._future = self._loop.create_future()
        try:
            await self._future
        finally:
            self._future = None


class _DisconnectWatch:
    """Calls `then()` (and sets `disconnected`) when the client goes away while `task` runs.

    perf: the watcher (a task blocked in receive()) is scheduled with call_soon right after `task`
    starts, so it only exists once `task` first suspends: a handler that answers without suspending
    (the common async tool) never pays for it."""

    __slots__ = ("_closed", "_loop", "_receive", "_task", "_then", "_watcher", "disconnected")

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], receive: Receive,
                 then: Callable[[], object]) -> None:
        self._loop = loop
        self._task = task
        self._receive = receive
        self._then = then
        self._watcher: asyncio.Task[None] | None = None
        self._closed = False
        self.disconnected = False
        loop.call_soon(self._start)

    def _start(self) -> None:
        if not self._closed and not self._task.done():
            self._watcher = self._loop.create_task(self._watch())

    async def _watch(self) -> None:
        await respond.wait_disconnect(self._receive)
        if not self._closed:
            self.disconnected = True
            self._then()

    def close(self) -> None:
        self._closed = True
        if self._watcher is not None:
            self._watcher.cancel()


class Modern:
    """Answers modern requests from `endpoint`; `scope_challenge` names the scopes a 403 steps up to."""

    __slots__ = ("endpoint", "scope_challenge")

    def __init__(self, endpoint: Endpoint, scope_challenge: Callable[[frozenset[str]], str]) -> None:
        self.endpoint = endpoint
        self.scope_challenge = scope_challenge

    async def request(self, req: Request, principal: Principal, headers: dict[str, str], can_json: bool,
                       can_sse: bool, receive: Receive, send: Send) -> None:
        outbox = BoundedOutbox(enabled=can_sse)  # the one bound and drop policy (protocol/outbox.py)
        call = Call(principal, "http", outbox, headers)
        if req.progress_token is None and req.log_level is None:
            await self._inline(req, call, outbox, can_json, receive, send)
            return
        loop = asyncio.get_running_loop()
        task = loop.create_task(self.endpoint.handle(req, call))
        wake = _Wakeup(loop)
        outbox.on_emit = wake.set
        task.add_done_callback(lambda _t: wake.set())
        watch = _DisconnectWatch(loop, task, receive, wake.set)
        streaming = not can_json
        started = False
        try:
            while True:
                if not outbox.pending and not task.done() and not watch.disconnected:
                    await wake.wait()
                if watch.disconnected:
                    task.cancel()
                    return
                if outbox.pending:
                    if not started:
                        streaming = True
                        started = True
                        await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
                    frames = b"".join(sse.event(encode_message(m)) for m in outbox.take())
                    await send({"type": "http.response.body", "body": frames, "more_body": True})
                if task.done() and not outbox.pending:  # what arrived during the last send goes first
                    break
            reply = task.result()
            outbox.enabled = False
            data = encode_message(reply.message)
            if streaming:
                if not started:
                    await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
                await send({"type": "http.response.body", "body": sse.event(data)})
            else:
                await self._json(send, reply, data)
        finally:
            if not task.done():
                task.cancel()
            watch.close()

    async def _inline(
        self, req: Request, call: Call, outbox: BoundedOutbox, can_json: bool, receive: Receive, send: Send
    ) -> None:
        """perf: a request without a progressToken or logLevel gets no notification while it runs, so
        its handler is awaited right in this task (no handler task, fewer loop turns). A disconnect
        still cancels it: `_DisconnectWatch` cancels this task, and the cancellation it caused is
        taken back here (uncancel) so the ASGI call ends quietly, writing nothing more."""
        me = asyncio.current_task()
        assert me is not None
        guard = _DisconnectWatch(asyncio.get_running_loop(), me, receive, me.cancel)
        try:
            reply = await self.endpoint.handle(req, call)
        except asyncio.CancelledError:
            if not guard.disconnected:
                raise
            me.uncancel()
            return
        finally:
            guard.close()
        if guard.disconnected:  # the handler swallowed the cancellation: still write nothing
            me.uncancel()
            return
        outbox.enabled = False
        data = encode_message(reply.message)
        if outbox.pending or not can_json:  # something emitted anyway, or the client takes SSE only
            frames = b"".join(sse.event(encode_message(m)) for m in outbox.take())
            await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
            await send({"type": "http.response.body", "body": frames + sse.event(data)})
            return
        if reply.scopes is None:
            # perf: the usual answer written right here, as `_json` would: two coroutines (`_json`,
            # `respond.send_bytes`) fewer on every request
            status = 200 if reply.error_code is None else errors.http_status_for(reply.error_code)
            await send({"type": "http.response.start", "status": status, "headers": respond.json_headers(len(data))})
            await send({"type": "http.response.body", "body": data})
            return
        await self._json(send, reply, data)

    async def _json(self, send: Send, reply: Reply, data: bytes) -> None:
        """The reply as a JSON response: its status from the error code (`errors.http_status_for`), or a
        403 with a step-up challenge when it refuses for want of scopes (the body keeps the request id)."""
        if reply.scopes is not None:
            header = self.scope_challenge(reply.scopes)
            await respond.send_bytes(send, 403, data, [(b"www-authenticate", header.encode("latin-1"))])
            return
        status = 200 if reply.error_code is None else errors.http_status_for(reply.error_code)
        await respond.send_bytes(send, status, data)

    async def listen(self, req: Request, call: Call, receive: Receive, send: Send) -> None:
        try:
            stream = self.endpoint.listen(req, call)
            first = await anext(stream)
        except McpError as e:
            await respond.error(send, errors.http_status_for(e.code), req.id, e)
            return
        loop = asyncio.get_running_loop()
        await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
        await send({"type": "http.response.body", "body": _frame(first), "more_body": True})
        # perf: one pump task per stream, waited for once and cancelled by the disconnect watcher,
        # instead of a task and an asyncio.wait() per message: an event reaches 10k idle streams sooner.
        pump = loop.create_task(_pump(stream, send))
        watch = _DisconnectWatch(loop, pump, receive, pump.cancel)
        expiry = respond.expiry(loop, call.principal.expires_at, pump)
        try:
            await asyncio.wait((pump,))
        finally:
            watch.close()
            if expiry is not None:
                expiry.cancel()
            if not pump.done():
                pump.cancel()
                await asyncio.wait((pump,))  # let it unwind before aclose() below
            await stream.aclose()
        if pump.cancelled() and not watch.disconnected:
            await respond.end_stream(send)  # the token expired: end the response; the client reconnects with a new one
            return
        if not pump.cancelled():
            failure = pump.exception()
            if failure is not None:
                raise failure


def _frame(item: ListenItem) -> bytes:
    if isinstance(item, KeepAlive):
        return sse.KEEPALIVE
    return sse.event(encode_message(item.message))


async def _pump(stream: AsyncIterator[ListenItem], send: Send) -> None:
    """Write a listen stream's items until its final result, its end, or a broken connection."""
    try:
        async for item in stream:
            if isinstance(item, ListenEnd):
                await send({"type": "http.response.body", "body": _frame(item)})
                return
            await send({"type": "http.response.body", "body": _frame(item), "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    except OSError:
        return
