"""One contract the task store passes on every state engine (memory, SQLite, Redis)."""

from __future__ import annotations

import asyncio
import time

from mcp_stateless.tasks.model import TaskRecord, new_task_id
from mcp_stateless.tasks.store import TaskStore


def record(ttl_ms: int | None = 60_000, lease_until: float | None = None) -> TaskRecord:
    now = time.time()
    return TaskRecord(new_task_id(), "alice", "slow", {"seconds": 1}, {"version": "2026-07-28"}, now, now,
                      ttl_ms, 250, lease_owner="i1", lease_until=now + 5 if lease_until is None else lease_until)


async def test_create_then_get_round_trips(store: TaskStore) -> None:
    rec = record()
    await store.create(rec)
    got = await store.get(rec.task_id)
    assert got is not None
    assert got.to_dict() == rec.to_dict()


async def test_unknown_id_is_none(store: TaskStore) -> None:
    assert await store.get("tsk_nope") is None
    assert await store.update("tsk_nope", lambda r: True) is None


async def test_concurrent_updates_never_lose_a_write(store: TaskStore) -> None:
    rec = record()
    await store.create(rec)

    def bump(r: TaskRecord) -> bool:
        r.attempts += 1
        return True

    await asyncio.gather(*(store.update(rec.task_id, bump) for _ in range(25)))
    got = await store.get(rec.task_id)
    assert got is not None and got.attempts == rec.attempts + 25
    assert got.version == 25


async def test_mutator_returning_false_writes_nothing(store: TaskStore) -> None:
    rec = record()
    await store.create(rec)
    same = await store.update(rec.task_id, lambda r: False)
    assert same is not None and same.written is False and same.after.version == 0
    assert same.before.to_dict() == same.after.to_dict() == rec.to_dict()


async def test_record_expires_after_its_ttl(store: TaskStore) -> None:
    rec = record(ttl_ms=150)
    await store.create(rec)
    assert await store.get(rec.task_id) is not None
    await asyncio.sleep(0.3)
    assert await store.get(rec.task_id) is None


async def test_unlimited_ttl_is_kept(store: TaskStore) -> None:
    rec = record(ttl_ms=None)
    await store.create(rec)
    got = await store.get(rec.task_id)
    assert got is not None and got.ttl_ms is None


async def test_lapsed_lists_working_tasks_whose_lease_ended(store: TaskStore) -> None:
    dead = record(lease_until=time.time() - 1)
    alive = record()
    done = record(lease_until=time.time() - 1)
    for r in (dead, alive, done):
        await store.create(r)

    def finish(r: TaskRecord) -> bool:
        r.touch("completed")
        return True

    await store.update(done.task_id, finish)
    lapsed = await store.lapsed(time.time())
    assert dead.task_id in lapsed
    assert alive.task_id not in lapsed
    assert done.task_id not in lapsed
