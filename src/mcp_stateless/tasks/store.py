"""Where tasks live: a typed store on the state layer's `RecordStore` (memory, SQLite or Redis).

Every change goes through `update(task_id, mutate)`: read, apply `mutate` to a copy, and write back only
if nobody wrote in between (compare-and-swap on the record's version), retrying otherwise. Two instances
touching the same task (a `tasks/update` here, a lease renewal there) therefore never lose each other's
writes. Because a mutator may run several times, it must only change the record it is given; what the
caller does next is decided from the returned `TaskUpdate` (what the committed attempt read and wrote).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import random
from collections.abc import Callable
from pathlib import Path

import orjson

from ..state.base import RecordStore
from ..state.memory import MemoryRecords
from ..state.sqlite import SqliteDatabase, SqliteRecords
from .model import TaskRecord

NAMESPACE = "task"

Mutator = Callable[[TaskRecord], bool]  # change the record in place; return False to leave it unchanged


class ConflictError(Exception):
    """Too many concurrent writers on one task."""


@dataclasses.dataclass(frozen=True, slots=True)
class TaskUpdate:
    """The outcome of one `update`: the record as the deciding attempt read it, as stored after it, and
    whether that attempt wrote (False: the mutator left it unchanged)."""

    before: TaskRecord
    after: TaskRecord
    written: bool


def _encode(rec: TaskRecord) -> bytes:
    return orjson.dumps(rec.to_dict())


def _due(rec: TaskRecord) -> float | None:
    # A working task is due when its lease ends: that is when its instance may have died.
    return rec.lease_until if rec.status == "working" else None


class TaskStore:
    def __init__(self, records: RecordStore, *, attempts: int = 50) -> None:
        self.records = records
        self.attempts = attempts
        # Status changes this process committed, by the status entered (read by the metrics exporter).
        self.transitions: collections.Counter[str] = collections.Counter()

    async def create(self, rec: TaskRecord) -> None:
        if not await self.records.create(NAMESPACE, rec.task_id, _encode(rec), expires_at=rec.expires_at(),
                                         due=_due(rec)):
            raise ConflictError(f"task {rec.task_id} already exists")
        self.transitions[rec.status] += 1

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or None when unknown or past its TTL."""
        got = await self.records.get(NAMESPACE, task_id)
        return None if got is None else TaskRecord.from_dict(orjson.loads(got.data))

    async def update(self, task_id: str, mutate: Mutator) -> TaskUpdate | None:
        """Atomically apply `mutate`; None when the task is gone."""
        for i in range(self.attempts):
            got = await self.records.get(NAMESPACE, task_id)
            if got is None:
                return None
            before = TaskRecord.from_dict(orjson.loads(got.data))
            rec = TaskRecord.from_dict(orjson.loads(got.data))
            if not mutate(rec):
                return TaskUpdate(before, before, False)
            rec.version = before.version + 1
            if await self.records.swap(NAMESPACE, task_id, got.version, _encode(rec), expires_at=rec.expires_at(),
                                       due=_due(rec)):
                if rec.status != before.status:
                    self.transitions[rec.status] += 1
                return TaskUpdate(before, rec, True)
            await asyncio.sleep(random.uniform(0, 0.002 * min(i + 1, 10)))  # back off under contention
        raise ConflictError("task is being updated concurrently; retry")

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        """Ids of working tasks whose lease ended before `now` (their instance may have died)."""
        return await self.records.due_by(NAMESPACE, now, limit)

    async def aclose(self) -> None:
        """Release the record store's connection (shared with the bundle it came from, if any)."""
        await self.records.aclose()


class MemoryTaskStore(TaskStore):
    """Tasks in this process's memory: for tests and a single process (a runtime without state)."""

    def __init__(self) -> None:
        super().__init__(MemoryRecords())


class SqliteTaskStore(TaskStore):
    """Tasks in their own SQLite file (an App with `--state` keeps them in the bundle's file instead)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(SqliteRecords(SqliteDatabase(str(Path(path).expanduser().absolute()))))


class RedisTaskStore(TaskStore):
    """Tasks in Redis on their own connection (an App with `--state` shares the bundle's instead)."""

    def __init__(self, url: str, *, timeout_s: float = 2.0, prefix: str = "mcp-stateless:") -> None:
        from ..state.redisdb import RedisConnection, RedisRecords  # the redis extra is optional

        super().__init__(RedisRecords(RedisConnection(url, timeout_s=timeout_s, prefix=prefix)))
