"""The standalone GET stream of a 2025 session, and the resumption of any of its streams.

The GET stream carries list changes and the session's subscribed resource updates, read from the shared
change log (event ids ``get:<n>``), so a change made on any instance arrives. A GET with `Last-Event-ID`
resumes that stream, or a call's stream (`calls.py`), on whichever instance it lands.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from ...protocol import errors, methods
from ...protocol.endpoint import KEEPALIVE, LegacyItem, LegacyOutcome, LegacyReply, SseEvent
from ...protocol.errors import McpError
from ...state.events import ChangeEvent, ChangeSubscription
from . import replies
from .calls import RETRY_MS
from .changelog import GET_STREAM
from .host import LegacyHost
from .parts import Parts
from .sessions import SealedSession, SessionState
from .streams import parse_event_id

_LIST_CHANGED = methods.LIST_CHANGED  # change kind -> its notification (protocol/methods.py)


class GetStreams:
    def __init__(self, host: LegacyHost, parts: Parts) -> None:
        self.host = host
        self.parts = parts

    async def open(self, session: SealedSession, headers: Mapping[str, str], can_sse: bool) -> LegacyReply:
        """A GET of a live session: its GET stream from now on, or (`Last-Event-ID`) the rest of a stream."""
        if not can_sse:
            return replies.refused(LegacyOutcome.NOT_ACCEPTABLE, None, McpError(
                errors.INVALID_REQUEST, "Not Acceptable: the GET stream needs Accept: text/event-stream"))
        last = headers.get("last-event-id")
        if last is not None:
            return await self._resume(session, last)
        return LegacyReply(LegacyOutcome.OK, stream=await self._ready(session))

    async def _ready(self, session: SealedSession, after: int | None = None) -> AsyncGenerator[LegacyItem, None]:
        """The stream, subscribed before it is answered: a store that cannot take the subscription is the
        exchange's clear error (server.exchange maps it), not a failure after the 200 began."""
        sub = self.host.events.subscribe()
        try:
            await sub.ready()
        except BaseException:
            sub.close()
            raise
        return self.events(session, after, sub=sub)

    async def _resume(self, session: SealedSession, last_event_id: str) -> LegacyReply:
        parsed = parse_event_id(last_event_id)
        if parsed is None:
            return replies.bad_request(None, "Bad Request: Last-Event-ID must be an event id this server sent "
                                       "(<stream>:<number>)")
        if parsed[0] == GET_STREAM:
            return LegacyReply(LegacyOutcome.OK, stream=await self._ready(session, after=parsed[1]))
        streams = self.parts.streams()
        owner = await streams.owner(parsed[0])
        if owner is None or owner.get("s") != session.key:
            return replies.bad_request(None, "Last-Event-ID names no stream of this session (it may have expired)")
        return LegacyReply(LegacyOutcome.OK, stream=streams.replay(*parsed))

    async def events(self, session: SealedSession, after: int | None = None,
                     sub: ChangeSubscription | None = None) -> AsyncGenerator[LegacyItem, None]:
        """The GET stream's items from `after` on, or from now on when None (also what a 2024-11-05
        stream and a stdio session carry besides their calls); `sub`: a subscription already ready."""
        if sub is None:
            sub = self.host.events.subscribe()  # its wake-ups come after the log entry was written
            ready = True
        else:
            ready = False
        keepalive = self.parts.keepalive()
        log = self.parts.change_log()
        sessions = self.parts.sessions()
        try:
            if ready:
                await sub.ready()
            head = await log.head()
            position = head if after is None else min(after, head)  # an id beyond the head: the log was reset
            # priming: a client that sees no event before it reconnects still resumes from here
            yield SseEvent(None, id=f"{GET_STREAM}:{position}", retry=RETRY_MS)
            while True:
                while (entry := await log.next_after(position)) is not None:
                    position, change = entry
                    # Every event is checked against the session (one read): a stream opened before a
                    # DELETE - on whichever instance - delivers nothing after it.
                    state = await sessions.state(session)
                    if state is None:
                        return
                    message = notification(state, change)
                    if message is not None:
                        yield SseEvent(message, id=f"{GET_STREAM}:{position}")
                woke = await sub.get(keepalive)
                if woke is None:
                    if await sessions.state(session) is None:
                        return  # ended while quiet: the stream ends within one keep-alive interval
                    yield KEEPALIVE
                elif woke.kind == "end":
                    return
        finally:
            sub.close()


def notification(state: SessionState, event: ChangeEvent) -> dict[str, Any] | None:
    """What `event` means to a live session: a notification, or None (not its concern)."""
    notify = _LIST_CHANGED.get(event.kind)
    if notify is not None:
        return {"jsonrpc": "2.0", "method": notify}
    if event.kind == "resource_updated" and event.uri is not None and event.uri in state.subscriptions:
        return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": event.uri}}
    return None
