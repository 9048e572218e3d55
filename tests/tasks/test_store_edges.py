"""Task store edges the contract does not reach: an update re-schedules the lease check, the lapsed scan's
limit, and what a creator or an updater that keeps losing races is told (and how long that takes)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mcp_stateless.state.memory import MemoryRecords
from mcp_stateless.tasks.model import TaskRecord, new_task_id
from mcp_stateless.tasks.store import ConflictError, MemoryTaskStore, SqliteTaskStore, TaskStore
from services import RedisServer

EXT = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def task(status: str = "working", lease_in: float = 60.0) -> TaskRecord:
    now = time.time()
    rec = TaskRecord(new_task_id(), "alice", "slow", {}, {"version": "2026-07-28", "capabilities": EXT},
                     now, now, 60_000, 50, lease_owner="i1", lease_until=now + lease_in, attempts=1)
    rec.status = status  # type: ignore[assignment]
    return rec


async def test_an_update_that_makes_a_task_working_with_a_lapsed_lease_makes_it_due() -> None:
    store = MemoryTaskStore()
    rec = task(status="input_required")
    await store.create(rec)
    assert await store.lapsed(time.time() + 3600) == []  # not working: never due

    def resume_on_a_dead_instance(r: TaskRecord) -> bool:
        r.status, r.lease_until = "working", time.time() - 1
        return True

    assert await store.update(rec.task_id, resume_on_a_dead_instance) is not None
    assert await store.lapsed(time.time()) == [rec.task_id]


async def test_lapsed_lists_at_most_one_hundred() -> None:
    store = MemoryTaskStore()
    for _ in range(101):
        await store.create(task(lease_in=-5))
    assert len(await store.lapsed(time.time())) == 100


async def test_creating_an_existing_task_says_so() -> None:
    store = MemoryTaskStore()
    rec = task()
    await store.create(rec)
    with pytest.raises(ConflictError) as e:
        await store.create(rec)
    assert str(e.value) == f"task {rec.task_id} already exists"


class _AlwaysRacedRecords(MemoryRecords):
    """Another writer bumps the record between every read and every swap of ours."""

    swaps = 0

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        self.swaps += 1
        cur = await self.get(ns, key)
        assert cur is not None
        await super().swap(ns, key, cur.version, cur.data, expires_at=expires_at, due=due)
        return await super().swap(ns, key, expected_version, data, expires_at=expires_at, due=due)


async def test_an_update_that_never_wins_gives_up_after_fifty_quick_tries() -> None:
    records = _AlwaysRacedRecords()
    store = TaskStore(records)
    rec = task()
    await store.create(rec)
    t0 = time.monotonic()
    with pytest.raises(ConflictError) as e:
        await store.update(rec.task_id, lambda r: True)
    assert time.monotonic() - t0 < 2.0  # the back-off is milliseconds, not seconds
    assert str(e.value) == "task is being updated concurrently; retry"
    assert records.swaps == 50


async def test_a_sqlite_task_store_lives_in_the_given_file(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    try:
        rec = task()
        await store.create(rec)
        assert path.exists()
        got = await store.get(rec.task_id)
        assert got is not None and got.task_id == rec.task_id
    finally:
        await store.aclose()


@pytest.mark.slow
async def test_a_redis_task_store_on_its_own_connection_uses_the_documented_defaults(redis_server: RedisServer) -> None:
    """`RedisTaskStore(url)` keys tasks under `mcp-stateless:` (what `--state redis://...` uses too, so
    both see the same tasks) with a 2 s socket timeout; the timeout's effect itself is tested on the
    Redis engine (tests/state)."""
    import redis.asyncio as aioredis

    from mcp_stateless.state.redisdb import RedisRecords
    from mcp_stateless.tasks.store import RedisTaskStore

    store = RedisTaskStore(redis_server.url)
    raw = aioredis.Redis.from_url(redis_server.url)
    rec = task()
    key = f"mcp-stateless:task:{rec.task_id}".encode()
    try:
        await store.create(rec)
        assert await raw.exists(key) == 1  # the record is under the default prefix, nowhere else
        assert [k for k in await raw.keys("*") if rec.task_id.encode() in k] == [key]
        got = await store.get(rec.task_id)
        assert got is not None and got.task_id == rec.task_id
        assert isinstance(store.records, RedisRecords)
        assert store.records.conn.timeout_s == 2.0
        assert store.records.conn.prefix == "mcp-stateless:"
    finally:
        await raw.delete(key, b"mcp-stateless:task:~due")
        await raw.aclose()
        await store.aclose()
