"""The standalone GET stream's event log, so that a client reconnecting with `Last-Event-ID` - on any
instance, after the first one died - gets what it missed and nothing twice.

The events a GET stream carries (list changes, resource updates) are appended once, by the instance
that published them, to one log in the shared record store: entry `<n>` for the n-th event (ids on the
wire: ``get:<n>``), each with a TTL, at most `max_events` kept. Creating entry `<n>` is what allocates
number n (a record is created at most once), so two instances publishing at once get consecutive numbers
and no entry is ever half-written; a `head` record remembers the last number, for readers starting fresh
and for publishers to start probing from. Every GET stream reads the log from its position on, woken by
the change bus: the bus says *that* something happened, the log says *what* and *in which order*.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ...protocol import errors
from ...protocol.errors import McpError
from ...state import RecordStore
from ...state.events import ChangeEvent, ChangeSubscription, EventBus, decode_change, encode_change

CHANGELOG_NS = "legacy-changes"
GET_STREAM = "get"  # the stream name in a GET stream's event ids (POST streams' names are 16 random chars)
_HEAD = "head"
LOGGED_KINDS = frozenset({"tools", "prompts", "resources", "resource_updated"})
_MAX_PROBES = 256  # entries a publisher steps over when the head lags (publishers racing, one that died)

log_ = logging.getLogger("mcp_stateless.legacy")


class ChangeLog:
    def __init__(self, records: RecordStore, ttl_s: float, max_events: int) -> None:
        self.records = records
        self.ttl_s = ttl_s
        self.max_events = max_events

    async def head(self) -> int:
        """The number of the last event appended (0: none yet)."""
        got = await self.records.get(CHANGELOG_NS, _HEAD)
        return int(got.data) if got is not None and got.data.isdigit() else 0

    async def append(self, event: ChangeEvent) -> int:
        data = encode_change(event)
        n = await self.head()
        expires = time.time() + self.ttl_s
        for _ in range(_MAX_PROBES):
            n += 1
            if await self.records.create(CHANGELOG_NS, str(n), data, expires_at=expires):
                break
        else:
            raise McpError(errors.INTERNAL_ERROR, "the GET streams' event log is too contended")
        await self._advance_head(n)
        if n > self.max_events:  # bounded by count as well as by time
            await self.records.delete(CHANGELOG_NS, str(n - self.max_events))
        return n

    async def _advance_head(self, n: int) -> None:
        for _ in range(16):
            got = await self.records.get(CHANGELOG_NS, _HEAD)
            if got is None:
                if await self.records.create(CHANGELOG_NS, _HEAD, b"%d" % n):
                    return
            elif got.data.isdigit() and int(got.data) >= n:
                return  # a later publisher moved it further already
            elif await self.records.swap(CHANGELOG_NS, _HEAD, got.version, b"%d" % n):
                return
        # A lagging head only costs the next publisher a few probes.

    async def get(self, n: int) -> ChangeEvent | None:
        got = await self.records.get(CHANGELOG_NS, str(n))
        return None if got is None else decode_change(got.data)

    async def next_after(self, position: int) -> tuple[int, ChangeEvent] | None:
        """The first event after `position` that is still kept, with its number; None when there is none
        yet. Entries that expired or were trimmed are stepped over (what they said is lost)."""
        n = position + 1
        event = await self.get(n)
        if event is not None:
            return n, event
        head = await self.head()
        if head <= n:
            return None  # nothing newer (or entry n is being appended right now: its wake-up follows)
        n = max(n + 1, head - self.max_events + 1)
        while n <= head:
            event = await self.get(n)
            if event is not None:
                return n, event
            n += 1
        return None


class LoggedEvents:
    """An `EventBus` that appends the GET streams' kinds of event to the log before publishing them, so
    that the wake-up a reader gets always finds its entry."""

    def __init__(self, inner: EventBus, log: Callable[[], ChangeLog]) -> None:
        self.inner = inner
        self.log = log

    async def publish(self, event: ChangeEvent) -> None:
        if event.kind in LOGGED_KINDS:
            try:
                await self.log().append(event)
            except McpError as e:  # the store is unreachable: live modern listeners still get the event
                log_.warning("a change event was not logged for legacy GET streams: %s", e.message,
                             extra={"era": "legacy"})
        await self.inner.publish(event)

    def subscribe(self) -> ChangeSubscription:
        return self.inner.subscribe()
