"""The 2024-11-05 HTTP+SSE transport, served by any instance except for the one stream itself.

A client opens an SSE stream with GET; its first event (`endpoint`) names the URL to POST to, carrying a
*channel* reference sealed with the app's key ring and bound to the principal (so it cannot be forged or
used by anyone else). Every POST is answered 202 at once; what it produces - the response, its
notifications, server->client requests - goes out on the stream. The stream is held by one instance,
but the POST may land on any: messages for a channel are published on the state bus under the
channel's topic, which the instance holding the stream reads. The channel's record (shared, with a TTL)
says the stream is open and, once `initialize` went through, which legacy session it carries; the
session is an ordinary sealed 2025 session, so calls, elicitation, sampling, subscriptions and
cancellation work exactly as on Streamable HTTP. The session ends when its stream does (the 2024
transport has no resumption and no DELETE).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import logging
import os
import time
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from ...protocol import errors
from ...protocol.encoding import decode_exact, encode_message
from ...protocol.endpoint import KEEPALIVE, LegacyAnswer, LegacyItem, SseEvent
from ...protocol.envelope import Rejection
from ...protocol.errors import McpError, error_response
from ...protocol.legacy import (
    SESSION_HEADER,
    SSE_VERSIONS,
    LegacyRequest,
    classify,
    session_not_found,
)
from ...protocol.mrtr import StateContext, seal, unseal
from ...protocol.principal import Principal
from .outbox import PendingMessages
from .sessions import Session
from .streams import entry

if TYPE_CHECKING:
    from .server import LegacyServer

log = logging.getLogger("mcp_stateless.legacy")

CHANNEL_NS = "legacy-sse"
_SEAL_METHOD = "mcp-sse-channel"
_SEAL_DIGEST = "legacy"


def channel_topic(key: str) -> str:
    return f"legacy-sse:{key}"


class SseChannels:
    """Opens 2024-11-05 streams and takes the POSTs meant for them (on any instance)."""

    def __init__(self, server: LegacyServer) -> None:
        self.server = server

    def _context(self, principal: Principal) -> StateContext:
        return StateContext(principal.id, _SEAL_METHOD, _SEAL_DIGEST)

    # ------------------------------------------------------------------ GET: the stream
    async def open(self, principal: Principal) -> tuple[str, AsyncGenerator[LegacyItem, None]]:
        """A new channel: its sealed reference (for the `endpoint` event) and its stream, already
        subscribed, so nothing POSTed after the client reads the reference is missed."""
        server = self.server
        state = server._state()
        key = base64.urlsafe_b64encode(os.urandom(15)).decode("ascii")
        token = seal(server.app.ensure_key_ring(), self._context(principal), {"k": key}, server.session_ttl_s)
        await state.records.create(CHANNEL_NS, key, b"", expires_at=time.time() + server.session_ttl_s)
        sub = state.bus.subscribe(channel_topic(key))
        try:
            await sub.ready()
        except BaseException:
            sub.close()
            raise
        return token, self._stream(key, sub, principal)

    async def _stream(self, key: str, sub: Any, principal: Principal) -> AsyncGenerator[LegacyItem, None]:
        server = self.server
        keepalive = server.keepalive_s if server.keepalive_s is not None else server.app.listen_keepalive_s
        out = _ByteBoundedQueue(server.max_stream_bytes)
        session: Session | None = None
        events: asyncio.Task[None] | None = None

        async def session_events(s: Session) -> None:
            # What the standalone GET stream carries on Streamable HTTP: list changes, resource updates.
            stream = server.events(s)
            try:
                async for item in stream:
                    if (isinstance(item, SseEvent) and item.message is not None
                            and not out.put(item, len(encode_message(item.message)))):
                        await overflowed()
                        return
            finally:
                await stream.aclose()

        async def overflowed() -> None:
            # The response itself is stuck behind the client's full socket (the generator waits at its
            # `yield` until the client reads), so the channel and its session end now, from here: POSTs
            # get 404 at once, and nothing more is queued for it.
            log.warning("a 2024-11-05 SSE client is not reading its stream (over %d bytes waiting): closed",
                        out.max_bytes, extra={"era": "legacy"})
            await self._ended(key, session)

        async def read_channel() -> None:
            nonlocal session, events
            while True:
                payload = await sub.get(keepalive)
                if payload is None:
                    if out.empty():  # a client with messages waiting needs no keep-alive
                        out.put(KEEPALIVE, 0)
                    continue
                try:
                    got = decode_exact(payload)
                except ValueError:
                    continue
                if not isinstance(got, dict):
                    continue
                if "m" in got:
                    if not out.put(SseEvent(got["m"]), len(payload)):
                        await overflowed()
                        return
                elif isinstance(got.get("s"), str) and session is None:
                    session = server.sessions.open(got["s"], principal.id)
                    if session is not None:
                        events = asyncio.ensure_future(session_events(session))

        reader = asyncio.ensure_future(read_channel())
        reader.add_done_callback(lambda _t: out.close())
        try:
            while True:
                item = await out.get()
                if item is None:
                    return
                yield item
        finally:
            for task in (reader, events):
                if task is not None:
                    task.cancel()
            sub.close()
            ended = asyncio.ensure_future(self._ended(key, session))
            server._running.add(ended)
            ended.add_done_callback(server._running.discard)

    async def _ended(self, key: str, session: Session | None) -> None:
        """The stream is gone: so is its channel, and the session it carried."""
        with contextlib.suppress(Exception):
            await self.server._state().records.delete(CHANNEL_NS, key)
            if session is not None:
                await self.server.end_session(session)

    # ------------------------------------------------------------------ POST: any instance
    async def post(self, token: str, message: Any, headers: Mapping[str, str], principal: Principal) -> LegacyAnswer:
        server = self.server
        state = server._state()
        try:
            payload = unseal(server.app.ensure_key_ring(), self._context(principal), token)
        except McpError:
            payload = None
        key = payload.get("k") if isinstance(payload, dict) else None
        decision = classify(message)
        rid = decision.id if isinstance(decision, LegacyRequest) else None
        if not isinstance(key, str):
            return _rejected(session_not_found(rid))
        got = await state.records.get(CHANNEL_NS, key)
        if got is None:
            return _rejected(session_not_found(rid, "Session not found: its SSE stream was closed"))
        if isinstance(decision, Rejection):
            return _rejected(decision)
        topic = channel_topic(key)
        if isinstance(decision, LegacyRequest) and decision.method == "initialize":
            if got.data:
                return _rejected(Rejection(400, rid, McpError(
                    errors.INVALID_REQUEST, "this SSE session is initialized already")))
            answer, session = server.initialize(decision, principal, SSE_VERSIONS)
            refused = None if session is None else await server.start_session(session)
            if refused is not None:
                await state.bus.publish(topic, entry(error_response(decision.id, refused)))
                return LegacyAnswer(202)
            if session is not None:
                sid = dict(answer.headers)[SESSION_HEADER]
                if not await state.records.swap(CHANNEL_NS, key, got.version, sid.encode(),
                                                expires_at=time.time() + server.session_ttl_s):
                    return _rejected(Rejection(400, rid, McpError(
                        errors.INVALID_REQUEST, "this SSE session is initialized already")))
                await state.bus.publish(topic, orjson.dumps({"s": sid}))
            await state.bus.publish(topic, entry(answer.body))
            server.counters[("initialize", 202)] += 1
            return LegacyAnswer(202)
        if not got.data:
            if isinstance(decision, LegacyRequest):
                # As the 2024-11-05 transport answers every request: 202 here, the answer on the stream.
                # Auto-negotiating clients probe with `server/discover` first; a JSON-RPC error (not an
                # HTTP 400, which their SSE transports only log) is what makes them fall back to initialize.
                await state.bus.publish(topic, entry(error_response(decision.id, _before_initialize(decision))))
                return LegacyAnswer(202)
            return _rejected(Rejection(400, rid, McpError(errors.INVALID_REQUEST, "send initialize first")))
        sid = got.data.decode()
        scoped = {**headers, SESSION_HEADER: sid}
        if not isinstance(decision, LegacyRequest):
            # Notifications and the client's answers to our requests take no time: answered inline.
            return await server.exchange("POST", message, scoped, principal, False)
        session = server.sessions.open(sid, principal.id)
        if session is None:
            return _rejected(session_not_found(rid))
        outbox = PendingMessages()
        call = asyncio.ensure_future(self._run(topic, outbox, message, scoped, principal))
        await server._watch_cancellations()
        server._running.add(call)
        call.add_done_callback(server._running.discard)
        ckey = (session.key, decision.id)
        server._calls[ckey] = call
        call.add_done_callback(lambda t: server._calls.pop(ckey, None) if server._calls.get(ckey) is t else None)
        return LegacyAnswer(202)

    async def _run(self, topic: str, outbox: PendingMessages, message: Any, headers: Mapping[str, str],
                   principal: Principal) -> None:
        """One request of a channel: its messages, then its response, published in order."""
        bus = self.server._state().bus
        work = asyncio.ensure_future(self.server.exchange("POST", message, headers, principal, False, outbox))
        work.add_done_callback(lambda _t: outbox.wake())
        try:
            while True:
                while outbox.pending:
                    await bus.publish(topic, entry(outbox.pending.popleft()))
                if work.done():
                    break
                await outbox.wait()
            answer = work.result()
            body = answer.body if answer.body is not None else error_response(
                message.get("id"), McpError(errors.INTERNAL_ERROR, "the request produced no response"))
            await bus.publish(topic, entry(body))
        except asyncio.CancelledError:
            raise  # cancelled by the client (notifications/cancelled): nothing more is sent for it
        except Exception:
            log.exception("a 2024-11-05 SSE call failed")
        finally:
            if not work.done():
                work.cancel()


def _before_initialize(req: LegacyRequest) -> McpError:
    if req.method == "server/discover":
        return McpError(errors.METHOD_NOT_FOUND, "Method not found: server/discover (this is the 2024-11-05 "
                        "HTTP+SSE transport: send initialize)")
    return McpError(errors.INVALID_REQUEST, f"send initialize first ({req.method} before initialize)")


class _ByteBoundedQueue:
    """A stream's messages waiting for its client, bounded by their bytes (a count bounds nothing when
    each message may be megabytes). Over the bound the stream is closed: a client that does not read its
    stream loses it (and its session), rather than the process growing without end. One message is always
    let in when none waits, so a single large response still reaches a client that reads."""

    __slots__ = ("_closed", "_items", "_ready", "bytes", "max_bytes")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: collections.deque[tuple[LegacyItem, int]] = collections.deque()
        self._ready = asyncio.Event()
        self._closed = False

    def empty(self) -> bool:
        return not self._items

    def put(self, item: LegacyItem, size: int) -> bool:
        """Queue `item`; False (and the queue closed) when it would take the waiting bytes over the bound."""
        if self._closed:
            return False
        if self._items and self.bytes + size > self.max_bytes:
            self.close()
            return False
        self._items.append((item, size))
        self.bytes += size
        self._ready.set()
        return True

    def close(self) -> None:
        self._closed = True
        self._items.clear()
        self.bytes = 0
        self._ready.set()

    async def get(self) -> LegacyItem | None:
        """The next item; None once closed."""
        while not self._items:
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        item, size = self._items.popleft()
        self.bytes -= size
        return item


def _rejected(r: Rejection) -> LegacyAnswer:
    return LegacyAnswer(r.status, r.body())
