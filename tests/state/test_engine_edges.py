"""Edges of the memory engine and the handle store that the contract tests do not reach: the periodic purge,
the due-scan limit and boundary, the expiry a swap carries, and a swap that keeps losing to other writers."""

from __future__ import annotations

import asyncio
import time

from mcp_stateless.state import HandleRecord
from mcp_stateless.state.handles import NAMESPACE, HandleStore
from mcp_stateless.state.memory import MemoryHandleStore, MemoryRecords, open_bundle


async def test_every_256th_create_purges_what_has_expired() -> None:
    records = MemoryRecords()
    await records.create("ns", "old", b"x", expires_at=time.time() - 1)
    for i in range(254):  # creates 2..255: nothing purged yet
        await records.create("ns", f"k{i}", b"x")
    assert ("ns", "old") in records._entries  # expired but not yet purged: memory is reclaimed in batches
    await records.create("ns", "k-256", b"x")
    assert ("ns", "old") not in records._entries
    assert len(records._entries) == 255


async def test_due_by_returns_at_most_the_limit_and_only_strictly_earlier() -> None:
    records = MemoryRecords()
    for i in range(101):
        await records.create("ns", f"k{i:03}", b"x", due=1000.0 + i)
    due = await records.due_by("ns", before=2000.0)
    assert due == [f"k{i:03}" for i in range(100)]  # default limit 100, earliest first
    assert await records.due_by("ns", before=1000.0) == []  # due exactly at `before` is not yet due
    assert await records.due_by("ns", before=1000.5) == ["k000"]


def test_the_memory_bundle_names_its_url() -> None:
    assert open_bundle().url == "memory://"
    assert open_bundle("memory://x").url == "memory://x"
    assert isinstance(MemoryHandleStore().records, MemoryRecords)


def record(purge_in: float) -> HandleRecord:
    now = time.time()
    return HandleRecord("k1", "alice", "imp", {"n": 0}, 1, now, now + 60, now + purge_in)


async def test_a_swap_moves_the_purge_time_of_the_stored_record() -> None:
    handles = HandleStore(MemoryRecords())
    rec = record(purge_in=600)
    await handles.create(rec)
    soon = time.time() + 0.1
    assert await handles.swap("k1", 1, {"n": 1}, rec.expires_at, soon, False)
    got = await handles.get("k1")
    assert got is not None and got.purge_at == soon and got.data == {"n": 1}
    assert (got.created_at, got.expires_at, got.principal, got.kind) == (rec.created_at, rec.expires_at, "alice", "imp")
    await asyncio.sleep(0.2)
    assert await handles.records.get(NAMESPACE, "k1") is None  # the engine dropped it at the new purge time


class _AlwaysRacedRecords(MemoryRecords):
    """Another writer bumps the record between every read and every swap of ours."""

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        cur = await self.get(ns, key)
        assert cur is not None
        await super().swap(ns, key, cur.version, cur.data, expires_at=expires_at, due=due)  # the other writer
        return await super().swap(ns, key, expected_version, data, expires_at=expires_at, due=due)


async def test_a_swap_that_never_wins_reports_failure() -> None:
    handles = HandleStore(_AlwaysRacedRecords())
    rec = record(purge_in=600)
    await handles.create(rec)
    assert await handles.swap("k1", 1, {"n": 1}, rec.expires_at, rec.purge_at, False) is False
    got = await handles.get("k1")
    assert got is not None and got.data == {"n": 0}


async def test_a_touch_extends_the_purge_time_in_the_record_and_in_the_engine() -> None:
    handles = HandleStore(MemoryRecords())
    now = time.time()
    rec = HandleRecord("k1", "alice", "imp", {"n": 0}, 1, now, now + 0.1, now + 0.15)
    await handles.create(rec)
    await handles.touch("k1", now + 0.2, now + 0.4)
    await handles.touch("k1", now + 0.3, now + 0.35)  # a later expiry never pulls the purge time earlier
    got = await handles.get("k1")
    assert got is not None and (got.expires_at, got.purge_at, got.version) == (now + 0.3, now + 0.4, 1)
    await asyncio.sleep(max(0.0, now + 0.25 - time.time()))
    assert await handles.records.get(NAMESPACE, "k1") is not None  # past the first purge time: extended
    await asyncio.sleep(max(0.0, now + 0.5 - time.time()))
    assert await handles.records.get(NAMESPACE, "k1") is None  # the engine drops it at the new purge time
