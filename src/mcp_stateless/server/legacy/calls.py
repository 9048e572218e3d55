"""This instance's running calls of 2025 sessions (`tools/call`, `prompts/get`, ...): `CallRegistry`.

A call is admitted within two bounds (per session, per principal): a 2025 call runs to its end after
its client left (a disconnect is not a cancel), so without them one client could hold every tool
thread. A call that may notify or ask its client answers on its own SSE stream, logged so that the
client may resume it on any instance; `notifications/cancelled` reaches whichever instance runs the
call over the state bus.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

from ...protocol import errors
from ...protocol.encoding import decode_exact, encode_record
from ...protocol.endpoint import LegacyItem, LegacyOutcome, LegacyReply, Outbox, Reply, SseEvent
from ...protocol.errors import McpError
from ...protocol.jsonrpc import as_request_id
from ...protocol.legacy import LegacyRequest
from ...protocol.mrtr import MRTR_METHODS
from ...protocol.principal import Principal
from ..context import Context
from . import bridge, replies
from .host import LegacyHost
from .outbox import PendingMessages
from .parts import Parts
from .sessions import SealedSession, SessionState
from .streams import StreamLog

log_ = logging.getLogger("mcp_stateless.legacy")
RETRY_MS = 1000  # how long a client waits before reconnecting a dropped stream (SSE `retry`)
CANCEL_TOPIC = "legacy-cancel"  # `notifications/cancelled` of any instance, read by the one running the call


class CallRegistry:
    """`json_within_s`, `max_inflight_per_session` and `max_inflight_per_principal` as `LegacyServer`
    documents them."""

    def __init__(self, host: LegacyHost, parts: Parts, *, json_within_s: float, max_inflight_per_session: int,
                 max_inflight_per_principal: int) -> None:
        self.host = host
        self.parts = parts
        self.json_within_s = json_within_s
        self.max_inflight_per_session = max_inflight_per_session
        self.max_inflight_per_principal = max_inflight_per_principal
        # calls running on this instance, by session key and by principal id (entries at zero are removed)
        self._by_session: collections.Counter[str] = collections.Counter()
        self._by_principal: collections.Counter[str] = collections.Counter()
        self._running: set[asyncio.Future[Any]] = set()  # background work, referenced until it is done
        self._calls: dict[tuple[str, Any], asyncio.Future[Any]] = {}  # cancellable by (session key, request id)
        self._cancel_reader: asyncio.Future[None] | None = None

    async def call(self, req: LegacyRequest, session: SealedSession, state: SessionState, principal: Principal,
                   headers: Mapping[str, str] | None, can_sse: bool, outbox: Outbox | None) -> LegacyReply:
        """A bridged request, answered by the host. `outbox`: where its notifications and server->client
        requests go when the transport has a channel of its own; None: on HTTP, the call's SSE stream."""
        refused = self._admit(session)
        if refused is not None:
            return replies.refused(LegacyOutcome.TOO_MANY, req.id, McpError(errors.INVALID_REQUEST, *refused),
                                   retry_after_s=1)
        released = False

        def release(_: object = None) -> None:
            nonlocal released
            if not released:
                released = True
                self._release(session)

        peer = self.parts.peer()
        if outbox is None and can_sse and req.method in MRTR_METHODS:
            # A call that may notify or ask the client answers on its own SSE stream. It may outlive this
            # exchange (it runs on after the client left), so its place is freed when its task ends.
            def start(outbox: _StreamOutbox) -> Awaitable[Reply]:
                return bridge.run(self.host, peer, session, state, req, principal, outbox, headers)

            try:
                reply = await self._streamed(start, session, req.id, release)
            except BaseException:  # e.g. the store failed before the call could start
                release()
                raise
            if reply.stream is None:
                release()  # answered as JSON: done (the task's own callback then finds it released)
            return reply
        try:
            return replies.answer(await bridge.run(self.host, peer, session, state, req, principal, outbox, headers))
        finally:
            release()

    def in_flight(self) -> tuple[dict[str, int], dict[str, int]]:
        """The places calls hold on this instance, by session key and by principal id (copies)."""
        return dict(self._by_session), dict(self._by_principal)

    def _admit(self, session: SealedSession) -> tuple[str, dict[str, Any]] | None:
        """Take a place for one more call of `session` on this instance; or why not (message, data)."""
        if self._by_session[session.key] >= self.max_inflight_per_session:
            limit = self.max_inflight_per_session
            return (f"Too many requests: this session has {limit} calls running already; retry when one ends",
                    {"limit": limit, "scope": "session"})
        if self._by_principal[session.principal] >= self.max_inflight_per_principal:
            limit = self.max_inflight_per_principal
            return (f"Too many requests: {limit} calls of this principal are running already; retry when one ends",
                    {"limit": limit, "scope": "principal"})
        self._by_session[session.key] += 1
        self._by_principal[session.principal] += 1
        return None

    def _release(self, session: SealedSession) -> None:
        for counter, key in ((self._by_session, session.key), (self._by_principal, session.principal)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]

    async def _streamed(self, start: Callable[[_StreamOutbox], Awaitable[Reply]],
                        session: SealedSession, request_id: Any, ended: Callable[[object], None]) -> LegacyReply:
        """Run a call that may notify or ask its client. One that finishes within `json_within_s` without
        sending anything is answered as plain JSON (nothing logged: most calls cost no store write); any
        other answers on a resumable SSE stream, logged from its first message on."""
        outbox = _StreamOutbox()
        await self._watch()
        task = asyncio.ensure_future(start(outbox))
        task.add_done_callback(lambda _t: outbox.wake())
        task.add_done_callback(ended)  # the call's place is free once it ends, however it ends
        self._register(session, request_id, task)  # cancelling the handler ends the stream without a response
        if not outbox.busy() and not task.done():
            await outbox.wait(self.json_within_s)
        if task.done() and not task.cancelled() and not outbox.busy():
            return replies.answer(task.result())
        streams = self.parts.streams()
        stream = await streams.open(session, request_id)
        self.keep(asyncio.ensure_future(_produce(task, outbox, streams, stream)))
        return LegacyReply(LegacyOutcome.OK, stream=_live(streams, stream, outbox.closed))

    # ------------------------------------------------------------------ for the 2024-11-05 transport too
    def keep(self, work: asyncio.Future[Any]) -> None:
        """Hold a reference to background `work` until it is done (the loop keeps only weak ones)."""
        self._running.add(work)
        work.add_done_callback(self._running.discard)

    async def track(self, session: SealedSession, request_id: Any, task: asyncio.Future[Any]) -> None:
        """Cancel `task` when the client cancels `request_id` (from whichever instance it tells)."""
        await self._watch()
        self._register(session, request_id, task)

    def _register(self, session: SealedSession, request_id: Any, task: asyncio.Future[Any]) -> None:
        key = (session.key, request_id)
        self._calls[key] = task
        task.add_done_callback(lambda t: self._calls.pop(key, None) if self._calls.get(key) is t else None)

    async def cancel(self, session: SealedSession, request_id: Any) -> None:
        """`notifications/cancelled` may reach any instance: it is published to all of them."""
        rid = as_request_id(request_id)  # the one id rule: `true` or 1.0 cancel nothing
        if rid is None:
            return
        await self.parts.state().bus.publish(CANCEL_TOPIC, encode_record([session.key, rid]))

    async def _watch(self) -> None:
        """Start (once per process) the reader that cancels this instance's calls named on the bus."""
        if self._cancel_reader is not None and not self._cancel_reader.done():
            return
        sub = self.parts.state().bus.subscribe(CANCEL_TOPIC)
        await sub.ready()

        async def read() -> None:
            try:
                while True:
                    payload = await sub.get(None)
                    if payload is None:
                        continue
                    try:
                        key, rid = decode_exact(payload)  # a 2**64 id stays exact
                    except (TypeError, ValueError):
                        continue
                    call = self._calls.pop((key, rid), None)
                    if call is not None:
                        call.cancel()  # the call stops; nothing more is sent for it
            finally:
                sub.close()

        self._cancel_reader = asyncio.ensure_future(read())


def close_stream(ctx: Context) -> bool:
    """From a handler (on the event loop): close the legacy client's SSE connection of this call, which
    then resumes with `Last-Event-ID` (SEP-1699). False where there is no such stream (the modern path,
    stdio, a JSON response)."""
    outbox = ctx.outbox
    if not isinstance(outbox, _StreamOutbox):
        return False
    outbox.close_stream()
    return True


class _StreamOutbox(PendingMessages):
    """A call's messages for its SSE stream: bounded, never blocks the handler."""

    __slots__ = ("closed",)

    def __init__(self) -> None:
        super().__init__()
        self.closed = asyncio.Event()

    def close_stream(self) -> None:
        """End the client's connection now (SEP-1699 polling); the call goes on, and the client resumes
        with `Last-Event-ID`."""
        self.closed.set()
        self.wake()

    def busy(self) -> bool:
        """Whether the call has said anything yet (a message, or closing its stream)."""
        return bool(self.pending) or self.closed.is_set()


async def _live(streams: StreamLog, stream: str, closed: asyncio.Event) -> AsyncGenerator[LegacyItem, None]:
    """The call's stream as it is logged, until its response or until the handler closes it
    (`close_stream`): the client then resumes with `Last-Event-ID`."""
    replay = streams.replay(stream, 0)
    try:
        await anext(replay)  # subscribed
        yield SseEvent(None, id=f"{stream}:0", retry=RETRY_MS)  # priming: resumable from here on
        closing = asyncio.ensure_future(closed.wait())
        try:
            while True:
                step = asyncio.ensure_future(anext(replay))
                await asyncio.wait((step, closing), return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    step.cancel()
                    await asyncio.wait((step,))  # let the replay unwind before it is closed below
                    return
                try:
                    item = step.result()
                except StopAsyncIteration:
                    return
                yield item
        finally:
            closing.cancel()
    finally:
        await replay.aclose()


async def _produce(task: asyncio.Future[Reply], outbox: _StreamOutbox, log: StreamLog, stream: str) -> None:
    """Append each message the running call `task` sends, and then its response, to the stream's log.
    Runs as a task of its own, so a dropped connection neither loses its messages nor cancels the call."""
    heart = asyncio.ensure_future(_heartbeat(log, stream))
    seq = 0
    try:
        while True:
            for message in outbox.take():
                seq += 1
                await log.append(stream, seq, message, False)
            if task.done():
                break
            if not outbox.pending and not outbox.dropped:
                await outbox.wait()
        for message in outbox.take():
            seq += 1
            await log.append(stream, seq, message, False)
        await log.append(stream, seq + 1, task.result().message, True)
    except asyncio.CancelledError:
        await log.end(stream, seq)  # cancelled: a client resuming this stream gets nothing more
        raise
    except Exception:
        log_.exception("a legacy call's stream failed")
    finally:
        heart.cancel()
        if not task.done():
            task.cancel()


async def _heartbeat(log: StreamLog, stream: str) -> None:
    """Renew the call's heartbeat while it runs (the first after one interval: a quick call writes none)."""
    while True:
        await asyncio.sleep(log.heartbeat_s)
        try:
            await log.beat(stream)
        except McpError as e:  # the store is briefly unreachable: the next beat tries again
            log_.warning("a legacy call's heartbeat failed: %s", e.message, extra={"era": "legacy"})
