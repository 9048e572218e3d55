"""The resumable POST streams' log (server/legacy/streams.py) on the memory engine, in process: the heartbeat
of the instance running a call, the owner record of a stream, and the error response a resumption appends
when the call's instance died (its heartbeat lapsed). The slow tests see the same through killed servers;
these pin each rule exactly (which record, which expiry, which id, which code)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from mcp_stateless.protocol.endpoint import KEEPALIVE, SseEvent
from mcp_stateless.server.legacy.sessions import SealedSession
from mcp_stateless.server.legacy.streams import EVENTS_NS, LOST_MESSAGE, StreamLog
from mcp_stateless.state.memory import MemoryBus, MemoryRecords


class Written(MemoryRecords):
    """The memory engine, with every create and swap kept (key, data, expiry) so a test can read the
    expiry a record was written with."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, str, bytes, float | None]] = []

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        self.writes.append(("create", key, data, expires_at))
        return await super().create(ns, key, data, expires_at=expires_at, due=due)

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        self.writes.append(("swap", key, data, expires_at))
        return await super().swap(ns, key, expected_version, data, expires_at=expires_at, due=due)


def session() -> SealedSession:
    return SealedSession(key="sess-1", version="2025-11-25", capabilities={}, client_info=None,
                         principal="alice", expires_at=time.time() + 60)


def log_of(records: MemoryRecords, heartbeat_s: float = 2.0, ttl_s: float = 60.0) -> StreamLog:
    return StreamLog(records, MemoryBus(), ttl_s, 15.0, heartbeat_s)


async def test_a_stream_names_its_owner_and_an_unreadable_owner_is_none() -> None:
    records = MemoryRecords()
    log = log_of(records)
    before = time.time()
    stream = await log.open(session(), 7)
    owner = await log.owner(stream)
    assert owner is not None and set(owner) == {"s", "r", "t"}
    assert owner["s"] == "sess-1" and owner["r"] == 7 and before <= owner["t"] <= time.time()
    assert await log.owner("no-such-stream") is None
    await records.create(EVENTS_NS, "junk", b"{not json", expires_at=time.time() + 60)
    assert await log.owner("junk") is None
    await records.create(EVENTS_NS, "a-list", b"[1, 2]", expires_at=time.time() + 60)
    assert await log.owner("a-list") is None


async def test_a_heartbeat_lives_five_beats_and_each_beat_renews_it() -> None:
    records = Written()
    log = log_of(records, heartbeat_s=2.0)
    assert log.dead_after_s == 10.0
    t0 = time.time()
    await log.beat("st")
    (op, key, data, expires), = records.writes
    assert (op, key, data) == ("create", "st:alive", b"1")
    assert expires is not None and t0 + 10.0 <= expires <= time.time() + 10.0
    first = await records.get(EVENTS_NS, "st:alive")
    assert first is not None and first.version == 1
    await log.beat("st")
    op, key, data, renewed = records.writes[1]
    assert (op, key, data) == ("swap", "st:alive", b"1")
    assert renewed is not None and renewed >= expires
    again = await records.get(EVENTS_NS, "st:alive")
    assert again is not None and again.version == 2 and again.data == b"1"


async def test_a_lapsed_call_gets_its_lost_response_appended_once_its_heartbeat_is_gone() -> None:
    records = Written()
    log = log_of(records, heartbeat_s=0.02, ttl_s=60.0)  # dead after 0.1 s without a beat
    stream = await log.open(session(), "req-9")
    assert not await log._end_if_orphaned(stream, 3)  # too young to have missed its beats
    await asyncio.sleep(0.15)
    await log.beat(stream)
    assert not await log._end_if_orphaned(stream, 3)  # old, but its instance still beats
    assert await records.get(EVENTS_NS, f"{stream}:3") is None
    await asyncio.sleep(0.15)  # the heartbeat lapsed: the call's instance is taken for dead
    records.writes.clear()
    t0 = time.time()
    assert await log._end_if_orphaned(stream, 3)
    (op, key, data, expires), = records.writes
    assert (op, key) == ("create", f"{stream}:3")
    assert expires is not None and t0 + 60.0 <= expires <= time.time() + 60.0
    assert orjson.loads(data) == {"m": {"jsonrpc": "2.0", "id": "req-9", "error": {
        "code": -32603, "message": LOST_MESSAGE, "data": {"lost": True}}}, "f": True}
    assert LOST_MESSAGE.startswith("the server instance running this request stopped before it finished")
    # Another resumer got there first: the event is there either way, and the first one stays.
    assert await log._end_if_orphaned(stream, 3)
    got = await records.get(EVENTS_NS, f"{stream}:3")
    assert got is not None and got.version == 1


async def test_no_lost_response_without_an_owner_or_with_an_owner_of_no_time() -> None:
    records = Written()
    log = log_of(records, heartbeat_s=0.02)
    assert not await log._end_if_orphaned("gone", 1)
    for name, owner in (("no-time", {"s": "k", "r": 1}), ("text-time", {"s": "k", "r": 1, "t": "0"})):
        await records.create(EVENTS_NS, name, orjson.dumps(owner), expires_at=time.time() + 60)
        assert not await log._end_if_orphaned(name, 1)
        assert await records.get(EVENTS_NS, f"{name}:1") is None
    # An owner opened long ago with an integer time (as another release may have written it) does count.
    await records.create(EVENTS_NS, "int-time", orjson.dumps({"s": "k", "r": 5, "t": 1}),
                         expires_at=time.time() + 60)
    assert await log._end_if_orphaned("int-time", 1)
    lost = await records.get(EVENTS_NS, "int-time:1")
    assert lost is not None and orjson.loads(lost.data)["m"]["id"] == 5


async def test_a_resumption_replays_the_log_then_ends_with_the_lost_response() -> None:
    records = MemoryRecords()
    log = StreamLog(records, MemoryBus(), 60.0, 0.05, 0.02)
    stream = await log.open(session(), 4)
    await log.append(stream, 1, {"jsonrpc": "2.0", "method": "notifications/progress",
                                 "params": {"progressToken": 1, "progress": 1}}, False)
    items: list[Any] = []

    async def read() -> None:
        async for item in log.replay(stream, 0):
            items.append(item)

    await asyncio.wait_for(read(), 3)  # the heartbeat never beat: dead once 0.1 s old
    assert items[0] is KEEPALIVE
    events = [i for i in items if isinstance(i, SseEvent)]
    assert [e.id for e in events] == [f"{stream}:1", f"{stream}:2"]
    assert events[0].message["method"] == "notifications/progress"
    assert events[1].message == {"jsonrpc": "2.0", "id": 4, "error": {
        "code": -32603, "message": LOST_MESSAGE, "data": {"lost": True}}}
