"""The 2024-11-05 HTTP+SSE transport, served by any instance except for the one stream itself.

A client opens an SSE stream with GET; its first event (`endpoint`) names the URL to POST to, carrying a
*channel* reference sealed with the app's key ring and bound to the principal (so it cannot be forged or
used by anyone else). Every POST is accepted at once (202 on HTTP); what it produces - the response, its
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
from typing import Any, Protocol

import orjson

from ...protocol import errors
from ...protocol.encoding import decode_exact, encode_message
from ...protocol.endpoint import KEEPALIVE, LegacyItem, LegacyOutcome, LegacyReply, Outbox, SseEvent
from ...protocol.envelope import Rejection
from ...protocol.errors import McpError, error_response
from ...protocol.legacy import SESSION_HEADER, SSE_VERSIONS, LegacyRequest, classify, session_not_found
from ...protocol.mrtr import StateContext, seal, unseal
from ...protocol.principal import Principal
from . import replies
from .calls import CallRegistry
from .getstream import GetStreams
from .lifecycle import Lifecycle
from .outbox import PendingMessages
from .parts import Parts
from .sessions import SealedSession
from .streams import entry

log = logging.getLogger("mcp_stateless.legacy")

CHANNEL_NS = "legacy-sse"
_SEAL_METHOD = "mcp-sse-channel"
_SEAL_DIGEST = "legacy"


def channel_topic(key: str) -> str:
    return f"legacy-sse:{key}"


class Exchange(Protocol):
    """`LegacyServer.exchange`: how a channel's message is answered as Streamable HTTP would answer it."""

    async def __call__(self, http_method: str, message: Any, headers: Mapping[str, str], principal: Principal,
                       can_sse: bool, outbox: Outbox | None = None) -> LegacyReply: ...


class SseChannels:
    """Opens 2024-11-05 streams and takes the POSTs meant for them (on any instance). `exchange` answers
    a channel's messages once it carries a session; `max_stream_bytes` as `LegacyServer` documents it."""

    def __init__(self, parts: Parts, lifecycle: Lifecycle, calls: CallRegistry, get_streams: GetStreams,
                 exchange: Exchange, *, max_stream_bytes: int) -> None:
        self.parts = parts
        self.lifecycle = lifecycle
        self.calls = calls
        self.get_streams = get_streams
        self.exchange = exchange
        self.max_stream_bytes = max_stream_bytes

    def _context(self, principal: Principal) -> StateContext:
        return StateContext(principal.id, _SEAL_METHOD, _SEAL_DIGEST)

    # ------------------------------------------------------------------ GET: the stream
    async def open(self, principal: Principal) -> tuple[str, AsyncGenerator[LegacyItem, None]]:
        """A new channel: its sealed reference (for the `endpoint` event) and its stream, already
        subscribed, so nothing POSTed after the client reads the reference is missed."""
        parts = self.parts
        state = parts.state()
        key = base64.urlsafe_b64encode(os.urandom(15)).decode("ascii")
        token = seal(parts.host.ensure_key_ring(), self._context(principal), {"k": key}, parts.session_ttl_s)
        await state.records.create(CHANNEL_NS, key, b"", expires_at=time.time() + parts.session_ttl_s)
        sub = state.bus.subscribe(channel_topic(key))
        try:
            await sub.ready()
        except BaseException:
            sub.close()
            raise
        return token, self._stream(key, sub, principal)

    async def _stream(self, key: str, sub: Any, principal: Principal) -> AsyncGenerator[LegacyItem, None]:
        keepalive = self.parts.keepalive()
        out = _ByteBoundedQueue(self.max_stream_bytes)
        session: SealedSession | None = None
        events: asyncio.Task[None] | None = None

        async def session_events(s: SealedSession) -> None:
            # What the standalone GET stream carries on Streamable HTTP: list changes, resource updates.
            stream = self.get_streams.events(s)
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
            # find no session at once, and nothing more is queued for it.
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
                    session = self.parts.sessions().open(got["s"], principal.id)
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
            self.calls.keep(asyncio.ensure_future(self._ended(key, session)))

    async def _ended(self, key: str, session: SealedSession | None) -> None:
        """The stream is gone: so is its channel, and the session it carried."""
        with contextlib.suppress(Exception):
            await self.parts.state().records.delete(CHANNEL_NS, key)
            if session is not None:
                await self.lifecycle.end(session)

    # ------------------------------------------------------------------ POST: any instance
    async def post(self, token: str, message: Any, headers: Mapping[str, str], principal: Principal) -> LegacyReply:
        parts = self.parts
        state = parts.state()
        try:
            payload = unseal(parts.host.ensure_key_ring(), self._context(principal), token)
        except McpError:
            payload = None
        key = payload.get("k") if isinstance(payload, dict) else None
        decision = classify(message)
        rid = decision.id if isinstance(decision, LegacyRequest) else None
        if not isinstance(key, str):
            return replies.refused(LegacyOutcome.UNKNOWN_SESSION, rid, session_not_found())
        got = await state.records.get(CHANNEL_NS, key)
        if got is None:
            return replies.refused(LegacyOutcome.UNKNOWN_SESSION, rid,
                                   session_not_found("Session not found: its SSE stream was closed"))
        if isinstance(decision, Rejection):
            return replies.malformed(decision)
        topic = channel_topic(key)
        if isinstance(decision, LegacyRequest) and decision.method == "initialize":
            if got.data:
                return replies.bad_request(rid, "this SSE session is initialized already")
            reply, session = self.lifecycle.initialize(decision, principal, SSE_VERSIONS)
            refused = None if session is None else await self.lifecycle.start(session)
            if refused is not None:
                await state.bus.publish(topic, entry(error_response(decision.id, refused)))
                return replies.ACCEPTED
            if session is not None:
                sid = reply.session_id
                assert sid is not None  # an initialize that opened a session names it
                if not await state.records.swap(CHANNEL_NS, key, got.version, sid.encode(),
                                                expires_at=time.time() + parts.session_ttl_s):
                    return replies.bad_request(rid, "this SSE session is initialized already")
                await state.bus.publish(topic, orjson.dumps({"s": sid}))
            await state.bus.publish(topic, entry(reply.message))
            return replies.ACCEPTED
        if not got.data:
            if isinstance(decision, LegacyRequest):
                # As the 2024-11-05 transport answers every request: accepted here, the answer on the stream.
                # Auto-negotiating clients probe with `server/discover` first; a JSON-RPC error (not a
                # refused POST, which their SSE transports only log) is what makes them fall back to initialize.
                await state.bus.publish(topic, entry(error_response(decision.id, _before_initialize(decision))))
                return replies.ACCEPTED
            return replies.bad_request(rid, "send initialize first")
        sid = got.data.decode()
        scoped = {**headers, SESSION_HEADER: sid}
        if not isinstance(decision, LegacyRequest):
            # Notifications and the client's answers to our requests take no time: answered inline.
            return await self.exchange("POST", message, scoped, principal, False)
        session = parts.sessions().open(sid, principal.id)
        if session is None:
            return replies.refused(LegacyOutcome.UNKNOWN_SESSION, rid, session_not_found())
        outbox = PendingMessages()
        call = asyncio.ensure_future(self._run(topic, outbox, message, scoped, principal))
        self.calls.keep(call)
        await self.calls.track(session, decision.id, call)
        return replies.ACCEPTED

    async def _run(self, topic: str, outbox: PendingMessages, message: Any, headers: Mapping[str, str],
                   principal: Principal) -> None:
        """One request of a channel: its messages, then its response, published in order."""
        bus = self.parts.state().bus
        work = asyncio.ensure_future(self.exchange("POST", message, headers, principal, False, outbox))
        work.add_done_callback(lambda _t: outbox.wake())
        try:
            while True:
                for pending in outbox.take():
                    await bus.publish(topic, entry(pending))
                if work.done():
                    break
                if not outbox.pending and not outbox.dropped:
                    await outbox.wait()
            reply = work.result()
            body = reply.message if reply.message is not None else error_response(
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
