"""Resumable POST streams: every message a legacy call sends on its SSE stream is also appended to an
event log in the shared record store (with a TTL), under ids ``<stream>:<n>``.

The call runs to its end even when the client's connection drops (a 2025 client cancels with
`notifications/cancelled`, not by disconnecting), and a client that reconnects with a GET carrying
`Last-Event-ID` - on any instance - gets what it missed from the log and then the rest as it is
appended (the bus topic of the stream says when), the call's response last.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import AsyncGenerator
from typing import Any

import orjson

from ...protocol.endpoint import KEEPALIVE, LegacyItem, SseEvent
from ...state import Bus, RecordStore
from .sessions import Session

EVENTS_NS = "legacy-events"


def stream_topic(stream: str) -> str:
    return f"legacy-stream:{stream}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    stream, sep, seq = value.strip().rpartition(":")
    if not sep or not stream or not seq.isdigit():
        return None
    return stream, int(seq)


class StreamLog:
    def __init__(self, records: RecordStore, bus: Bus, ttl_s: float, keepalive_s: float) -> None:
        self.records = records
        self.bus = bus
        self.ttl_s = ttl_s
        self.keepalive_s = keepalive_s

    async def open(self, session: Session) -> str:
        stream = base64.urlsafe_b64encode(os.urandom(12)).decode("ascii")
        await self.records.create(EVENTS_NS, stream, session.key.encode(), expires_at=time.time() + self.ttl_s)
        return stream

    async def append(self, stream: str, seq: int, message: dict[str, Any], final: bool) -> None:
        data = orjson.dumps({"m": message, "f": final})
        expires = time.time() + self.ttl_s
        await self.records.create(EVENTS_NS, f"{stream}:{seq}", data, expires_at=expires)
        if final:  # lets a resumption from the last event end at once instead of waiting
            await self.records.create(EVENTS_NS, f"{stream}:end", b"%d" % seq, expires_at=expires)
        await self.bus.publish(stream_topic(stream), b"%d" % seq)

    async def end(self, stream: str, last: int) -> None:
        """Mark the stream finished after event `last` without a response (the call was cancelled)."""
        await self.records.create(EVENTS_NS, f"{stream}:end", b"%d" % last, expires_at=time.time() + self.ttl_s)
        await self.bus.publish(stream_topic(stream), b"end")

    async def owner(self, stream: str) -> bytes | None:
        got = await self.records.get(EVENTS_NS, stream)
        return None if got is None else got.data

    async def replay(self, stream: str, after: int) -> AsyncGenerator[LegacyItem, None]:
        """The stream's events after `after`, as they are (or were) logged, until its final one."""
        sub = self.bus.subscribe(stream_topic(stream))
        try:
            await sub.ready()
            yield KEEPALIVE  # subscribed before reading the log: nothing appended from now on is missed
            seq = after + 1
            while True:
                got = await self.records.get(EVENTS_NS, f"{stream}:{seq}")
                if got is not None:
                    entry = orjson.loads(got.data)
                    yield SseEvent(entry["m"], id=f"{stream}:{seq}")
                    if entry.get("f"):
                        return
                    seq += 1
                    continue
                if await self.records.get(EVENTS_NS, stream) is None:
                    return  # the stream's log expired
                end = await self.records.get(EVENTS_NS, f"{stream}:end")
                if end is not None and int(end.data) < seq:
                    return  # resumed after the final event: nothing more will come
                if await sub.get(self.keepalive_s) is None:
                    yield KEEPALIVE
        finally:
            sub.close()
