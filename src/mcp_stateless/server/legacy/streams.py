"""Resumable POST streams: every message a legacy call sends on its SSE stream is also appended to an
event log in the shared record store (with a TTL), under ids ``<stream>:<n>``.

The call runs to its end even when the client's connection drops (a 2025 client cancels with
`notifications/cancelled`, not by disconnecting), and a client that reconnects with a GET carrying
`Last-Event-ID` - on any instance - gets what it missed from the log and then the rest as it is
appended (the bus topic of the stream says when), the call's response last.

If the instance running the call dies (killed, crashed), the call is gone with it: its heartbeat record
stops being renewed, and the first resumption that finds the log silent and the heartbeat lapsed ends
the stream with an error response for the request, appended like any other event (so every later
resumption, on any instance, sees the same end). What was logged before the death is replayed first.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import AsyncGenerator
from typing import Any

from ...protocol import errors
from ...protocol.encoding import decode_exact, encode_message, encode_record
from ...protocol.endpoint import KEEPALIVE, LegacyItem, SseEvent
from ...protocol.errors import McpError, error_response
from ...state import Bus, RecordStore
from .sessions import SealedSession

EVENTS_NS = "legacy-events"


def stream_topic(stream: str) -> str:
    return f"legacy-stream:{stream}"


MAX_SEQ_DIGITS = 18  # no stream ever numbers this many events; int() of 5,000 digits raises (and costs)


def parse_event_id(value: str) -> tuple[str, int] | None:
    """``<stream>:<n>`` as this server sent it, or None. `n` is ASCII digits only: `str.isdigit` also
    accepts ``\xb2`` and other Unicode digits, which `int()` then refuses."""
    stream, sep, seq = value.strip().rpartition(":")
    if not sep or not stream or not (0 < len(seq) <= MAX_SEQ_DIGITS and seq.isascii() and seq.isdigit()):
        return None
    return stream, int(seq)


LOST_MESSAGE = ("the server instance running this request stopped before it finished, so its result is lost; "
                "repeat the request if that is safe")


def entry(message: Any, final: bool | None = None) -> bytes:
    """A message logged or published as `{"m": message, "f": final}` (no `f` when None), written by the one
    encoder: exact for integers past 64 bits, an error response for what is not JSON."""
    tail = b"}" if final is None else (b',"f":true}' if final else b',"f":false}')
    return b'{"m":' + encode_message(message) + tail


class StreamLog:
    """`heartbeat_s`: how often the instance running a call renews its heartbeat; a call whose heartbeat
    is `MISSED_BEATS` beats old is taken for dead."""

    MISSED_BEATS = 5

    def __init__(self, records: RecordStore, bus: Bus, ttl_s: float, keepalive_s: float,
                 heartbeat_s: float = 2.0) -> None:
        self.records = records
        self.bus = bus
        self.ttl_s = ttl_s
        self.keepalive_s = keepalive_s
        self.heartbeat_s = heartbeat_s

    @property
    def dead_after_s(self) -> float:
        return self.heartbeat_s * self.MISSED_BEATS

    async def open(self, session: SealedSession, request_id: Any = None) -> str:
        stream = base64.urlsafe_b64encode(os.urandom(12)).decode("ascii")
        owner = encode_record({"s": session.key, "r": request_id, "t": time.time()})
        await self.records.create(EVENTS_NS, stream, owner, expires_at=time.time() + self.ttl_s)
        return stream

    async def beat(self, stream: str) -> None:
        """Say the call of `stream` is still running (the instance running it calls this every heartbeat)."""
        key = f"{stream}:alive"
        expires = time.time() + self.dead_after_s
        got = await self.records.get(EVENTS_NS, key)
        if got is None:
            await self.records.create(EVENTS_NS, key, b"1", expires_at=expires)
        else:
            await self.records.swap(EVENTS_NS, key, got.version, b"1", expires_at=expires)

    async def append(self, stream: str, seq: int, message: dict[str, Any], final: bool) -> None:
        data = entry(message, final)
        expires = time.time() + self.ttl_s
        await self.records.create(EVENTS_NS, f"{stream}:{seq}", data, expires_at=expires)
        if final:  # lets a resumption from the last event end at once instead of waiting
            await self.records.create(EVENTS_NS, f"{stream}:end", b"%d" % seq, expires_at=expires)
        await self.bus.publish(stream_topic(stream), b"%d" % seq)

    async def end(self, stream: str, last: int) -> None:
        """Mark the stream finished after event `last` without a response (the call was cancelled)."""
        await self.records.create(EVENTS_NS, f"{stream}:end", b"%d" % last, expires_at=time.time() + self.ttl_s)
        await self.bus.publish(stream_topic(stream), b"end")

    async def owner(self, stream: str) -> dict[str, Any] | None:
        """The stream's session key (``s``), request id (``r``) and opening time (``t``)."""
        got = await self.records.get(EVENTS_NS, stream)
        if got is None:
            return None
        try:
            owner = decode_exact(got.data)
        except ValueError:
            return None
        return owner if isinstance(owner, dict) else None

    async def _end_if_orphaned(self, stream: str, seq: int) -> bool:
        """If the call of `stream` died, append its error response as event `seq`; True when the stream
        has an event `seq` now (this one or a concurrent resumer's)."""
        owner = await self.owner(stream)
        if owner is None:
            return False
        opened = owner.get("t")
        if not isinstance(opened, int | float) or time.time() - opened < self.dead_after_s:
            return False  # too young to have missed its beats
        if await self.records.get(EVENTS_NS, f"{stream}:alive") is not None:
            return False
        lost = error_response(owner.get("r"), McpError(errors.INTERNAL_ERROR, LOST_MESSAGE, {"lost": True}))
        expires = time.time() + self.ttl_s
        await self.records.create(EVENTS_NS, f"{stream}:{seq}", entry(lost, True),
                                  expires_at=expires)
        return True

    async def replay(self, stream: str, after: int) -> AsyncGenerator[LegacyItem, None]:
        """The stream's events after `after`, as they are (or were) logged, until its final one."""
        sub = self.bus.subscribe(stream_topic(stream))
        try:
            await sub.ready()
            yield KEEPALIVE  # subscribed before reading the log: nothing appended from now on is missed
            seq = after + 1
            quiet_since = time.monotonic()
            while True:
                got = await self.records.get(EVENTS_NS, f"{stream}:{seq}")
                if got is not None:
                    logged = decode_exact(got.data)
                    yield SseEvent(logged["m"], id=f"{stream}:{seq}")
                    quiet_since = time.monotonic()
                    if logged.get("f"):
                        return
                    seq += 1
                    continue
                if await self.records.get(EVENTS_NS, stream) is None:
                    return  # the stream's log expired
                end = await self.records.get(EVENTS_NS, f"{stream}:end")
                if end is not None and int(end.data) < seq:
                    return  # resumed after the final event: nothing more will come
                if await sub.get(min(self.keepalive_s, self.heartbeat_s)) is None:
                    if await self._end_if_orphaned(stream, seq):
                        continue  # read the final event (ours, or the one a concurrent resumer wrote)
                    if time.monotonic() - quiet_since >= self.keepalive_s:
                        quiet_since = time.monotonic()
                        yield KEEPALIVE
        finally:
            sub.close()
