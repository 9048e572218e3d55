"""A legacy session over stdio: the process's first message was `initialize`, so it speaks 2025.

One process is one session (no id on the wire). Requests run concurrently and are answered as each
finishes; their notifications and server->client requests go straight to stdout, and the client's
responses come back on stdin to the same `Peer` the HTTP branch uses. After `initialized`, list changes
and subscribed resource updates are written as they happen (what the GET stream carries on HTTP).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any

from ...protocol import errors
from ...protocol.endpoint import SseEvent
from ...protocol.envelope import Rejection
from ...protocol.errors import McpError, error_response
from ...protocol.inbound import Cancel, Inbound
from ...protocol.jsonrpc import RequestId
from ...protocol.legacy import LegacyNotification, LegacyRequest, LegacyResponse
from ...protocol.outbox import LineOutbox
from ...protocol.principal import Principal
from .getstream import GetStreams
from .lifecycle import Lifecycle
from .methods import Methods
from .parts import Parts
from .sessions import SealedSession, SessionState

_Entry = tuple[asyncio.Task[None], LineOutbox]


class LegacyStdioSession:
    def __init__(self, parts: Parts, lifecycle: Lifecycle, methods: Methods, get_streams: GetStreams,
                 principal: Principal, write: Callable[[dict[str, Any]], None]) -> None:
        self.parts = parts
        self.lifecycle = lifecycle
        self.methods = methods
        self.get_streams = get_streams
        self.principal = principal
        self.write = write
        self.session: SealedSession | None = None
        # the one in-flight table and request-id rule of every transport (protocol/inbound.py)
        self._inbound: Inbound[_Entry] = Inbound(legacy=True)
        self._events: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[bool]] = set()
        self._created: asyncio.Task[None] | None = None

    def receive(self, message: Any) -> None:
        decision = self._inbound.receive(message)
        if isinstance(decision, Rejection):
            body = decision.body()
            if body is not None:
                self.write(body)
            return
        if isinstance(decision, Cancel):
            if decision.entry is not None:
                task, outbox = decision.entry
                outbox.close()
                task.cancel()  # nothing more is written for it
            return
        if isinstance(decision, LegacyNotification):
            if decision.method == "notifications/initialized" and self.session is not None and self._events is None:
                self._events = asyncio.get_running_loop().create_task(self._pump_events(self.session))
            return
        loop = asyncio.get_running_loop()
        if isinstance(decision, LegacyResponse):
            if self.session is not None:
                answering = loop.create_task(self.parts.peer().answer(self.session, decision))
                self._background.add(answering)  # keep a reference until it is done
                answering.add_done_callback(self._background.discard)
            return
        if not isinstance(decision, LegacyRequest):  # pragma: no cover - a legacy Inbound gives no modern kinds
            return
        if decision.method == "initialize":
            reply, session = self.lifecycle.initialize(decision, self.principal)
            if session is not None:
                self.session = session
                # made before any later request of the session reads it (each awaits this first)
                self._created = loop.create_task(self.parts.sessions().create(session))
            if reply.message is not None:
                self.write(reply.message)
            return
        if self.session is None:
            self.write(error_response(decision.id, McpError(errors.INVALID_REQUEST, "send initialize first")))
            return
        # the same bound and drop policy as every transport (protocol/outbox.py); server->client
        # requests are never dropped
        outbox = LineOutbox(self.write)
        entry = (loop.create_task(self._request(decision, self.session, outbox)), outbox)
        self._inbound.inflight.start(decision.id, entry)
        entry[0].add_done_callback(functools.partial(self._finished, decision.id, entry))

    def _finished(self, rid: RequestId, entry: _Entry, _task: asyncio.Task[None]) -> None:
        self._inbound.inflight.finish(rid, entry)

    async def _request(self, req: LegacyRequest, session: SealedSession, outbox: LineOutbox) -> None:
        if self._created is not None:
            await self._created
        # One process is one session (no DELETE on stdio): a record the store lost ends nothing here.
        state = await self.parts.sessions().state(session) or SessionState()
        # stdio says every outcome the same way: the reply's message, if it has one
        reply = await self.methods.request(req, session, state, self.principal, outbox=outbox)
        if reply.message is not None and req.id in self._inbound.inflight:
            outbox.flush(force=True)  # what the handler emitted goes before its response
            outbox.close()
            self.write(reply.message)

    async def _pump_events(self, session: SealedSession) -> None:
        if self._created is not None:
            await self._created
        stream = self.get_streams.events(session)
        try:
            async for item in stream:
                if isinstance(item, SseEvent) and item.message is not None:
                    self.write(item.message)
        finally:
            await stream.aclose()

    async def aclose(self) -> None:
        tasks = [*(task for task, _ in self._inbound.inflight), *([self._events] if self._events is not None else [])]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
