"""Where tasks live: one small async interface, three engines (memory, SQLite, Redis).

Every change goes through `update(task_id, mutate)`: read, apply `mutate` to a copy, and write back only
if nobody wrote in between (a version check), retrying otherwise. Two instances touching the same task
(a `tasks/update` here, a lease renewal there) therefore never lose each other's writes.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from ..state.base import StateUnavailable
from .model import TaskRecord

Mutator = Callable[[TaskRecord], bool]  # change the record in place; return False to leave it unchanged


# The backing store cannot be reached (e.g. Redis is down): -32603 with a clear, retryable message.
StoreUnavailable = StateUnavailable


class ConflictError(Exception):
    """Too many concurrent writers on one task."""


class TaskStore(Protocol):
    async def create(self, rec: TaskRecord) -> None: ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or None when unknown or past its TTL."""
        ...

    async def update(self, task_id: str, mutate: Mutator) -> TaskRecord | None:
        """Atomically apply `mutate`; the stored record after it, or None when the task is gone."""
        ...

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        """Ids of non-terminal tasks whose lease ended before `now` (their instance may have died)."""
        ...

    async def close(self) -> None: ...

    async def aclose(self) -> None: ...


class _AcloseMixin:
    """`aclose()` as well as `close()`, so a task store sits in a `StateBundle` like the other stores."""

    async def close(self) -> None:
        return None

    async def aclose(self) -> None:
        await self.close()


def _encode(rec: TaskRecord) -> bytes:
    return orjson.dumps(rec.to_dict())


def _decode(raw: bytes | str) -> TaskRecord:
    return TaskRecord.from_dict(orjson.loads(raw))


async def _cas_loop(
    load: Callable[[], Any], store: Callable[[TaskRecord, int], Any], mutate: Mutator, attempts: int = 50
) -> TaskRecord | None:
    for i in range(attempts):
        rec: TaskRecord | None = await load()
        if rec is None:
            return None
        before = rec.version
        if not mutate(rec):
            return rec
        rec.version = before + 1
        if await store(rec, before):
            return rec
        await asyncio.sleep(random.uniform(0, 0.002 * min(i + 1, 10)))  # back off under contention
    raise ConflictError("task is being updated concurrently; retry")


class MemoryTaskStore(_AcloseMixin):
    """For tests and a single process only: tasks vanish with the process."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    async def create(self, rec: TaskRecord) -> None:
        self._data[rec.task_id] = _encode(rec)

    async def get(self, task_id: str) -> TaskRecord | None:
        raw = self._data.get(task_id)
        if raw is None:
            return None
        rec = _decode(raw)
        if rec.expired():
            self._data.pop(task_id, None)
            return None
        return rec

    async def update(self, task_id: str, mutate: Mutator) -> TaskRecord | None:
        rec = await self.get(task_id)  # no await between read and write below: atomic on one loop
        if rec is None:
            return None
        if mutate(rec):
            rec.version += 1
            self._data[task_id] = _encode(rec)
        return rec

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        out = []
        for tid, raw in list(self._data.items()):
            rec = _decode(raw)
            if rec.status == "working" and rec.lease_until < now:
                out.append(tid)
            if len(out) >= limit:
                break
        return out

    async def close(self) -> None:
        return None


class SqliteTaskStore(_AcloseMixin):
    """One machine, survives restarts. Writes are serialised through one connection in a worker thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = asyncio.Lock()
        self._db: sqlite3.Connection | None = None  # opened on first use, like the other state stores

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS mcp_tasks (id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
                "status TEXT NOT NULL, lease_until REAL NOT NULL, expires_at REAL, data BLOB NOT NULL)"
            )
            conn.execute("CREATE INDEX IF NOT EXISTS mcp_tasks_lease ON mcp_tasks(status, lease_until)")
            self._db = conn
        return self._db

    async def _run(self, fn: Callable[[], Any]) -> Any:
        async with self._lock:
            return await asyncio.to_thread(fn)

    async def create(self, rec: TaskRecord) -> None:
        def op() -> None:
            self._conn.execute(
                "INSERT INTO mcp_tasks VALUES (?,?,?,?,?,?)",
                (rec.task_id, rec.version, rec.status, rec.lease_until, rec.expires_at(), _encode(rec)),
            )

        await self._run(op)

    async def get(self, task_id: str) -> TaskRecord | None:
        def op() -> Any:
            return self._conn.execute("SELECT data FROM mcp_tasks WHERE id=?", (task_id,)).fetchone()

        row = await self._run(op)
        if row is None:
            return None
        rec = _decode(row[0])
        if rec.expired():
            await self._run(lambda: self._conn.execute("DELETE FROM mcp_tasks WHERE id=?", (task_id,)))
            return None
        return rec

    async def update(self, task_id: str, mutate: Mutator) -> TaskRecord | None:
        # One IMMEDIATE transaction: atomic against this process's other coroutines (the lock) and against
        # other processes on the same file (SQLite's write lock), so no retry loop is needed.
        def op() -> TaskRecord | None:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT data FROM mcp_tasks WHERE id=?", (task_id,)).fetchone()
                rec = _decode(row[0]) if row is not None else None
                if rec is None or rec.expired():
                    conn.execute("COMMIT")
                    return None
                if mutate(rec):
                    rec.version += 1
                    conn.execute(
                        "UPDATE mcp_tasks SET version=?, status=?, lease_until=?, expires_at=?, data=? WHERE id=?",
                        (rec.version, rec.status, rec.lease_until, rec.expires_at(), _encode(rec), task_id),
                    )
                conn.execute("COMMIT")
                return rec
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        result: TaskRecord | None = await self._run(op)
        return result

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        def op() -> list[str]:
            self._conn.execute("DELETE FROM mcp_tasks WHERE expires_at IS NOT NULL AND expires_at < ?", (now,))
            rows = self._conn.execute(
                "SELECT id FROM mcp_tasks WHERE status='working' AND lease_until < ? LIMIT ?", (now, limit)
            ).fetchall()
            return [r[0] for r in rows]

        result: list[str] = await self._run(op)
        return result

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await self._run(db.close)


_CAS_LUA = """
local cur = redis.call('HGET', KEYS[1], 'v')
if not cur or tonumber(cur) ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'd', ARGV[3])
if tonumber(ARGV[4]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
if ARGV[5] == 'working' then redis.call('ZADD', KEYS[2], ARGV[6], ARGV[7])
else redis.call('ZREM', KEYS[2], ARGV[7]) end
return 1
"""


class RedisTaskStore(_AcloseMixin):
    """Shared by every instance. Records are hashes {v: version, d: JSON} with a TTL; a sorted set of lease
    deadlines lets any instance find tasks whose runner died."""

    def __init__(self, url: str, *, prefix: str = "mcp:task:", timeout_s: float = 2.0) -> None:
        import redis.asyncio as aioredis

        self._r = aioredis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        self._prefix = prefix
        self._leases = prefix + "leases"
        self._cas = self._r.register_script(_CAS_LUA)

    def _key(self, task_id: str) -> str:
        return self._prefix + task_id

    async def _call(self, coro: Any) -> Any:
        import redis.exceptions

        try:
            return await coro
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as e:
            raise StateUnavailable("task store", str(e) or type(e).__name__) from None

    @staticmethod
    def _ttl_ms(rec: TaskRecord) -> int:
        exp = rec.expires_at()
        return 0 if exp is None else max(1, int((exp - time.time()) * 1000))

    async def create(self, rec: TaskRecord) -> None:
        key = self._key(rec.task_id)
        pipe = self._r.pipeline(transaction=True)
        pipe.hset(key, mapping={"v": rec.version, "d": _encode(rec)})
        ttl = self._ttl_ms(rec)
        if ttl:
            pipe.pexpire(key, ttl)
        if rec.status == "working":
            pipe.zadd(self._leases, {rec.task_id: rec.lease_until})
        await self._call(pipe.execute())

    async def get(self, task_id: str) -> TaskRecord | None:
        raw = await self._call(self._r.hget(self._key(task_id), "d"))
        if raw is None:
            return None
        rec = _decode(raw)
        return None if rec.expired() else rec

    async def update(self, task_id: str, mutate: Mutator) -> TaskRecord | None:
        async def store(rec: TaskRecord, before: int) -> bool:
            args: list[bytes | str | int | float] = [
                before, rec.version, _encode(rec), self._ttl_ms(rec), rec.status, rec.lease_until, task_id]
            return bool(await self._call(self._cas(keys=[self._key(task_id), self._leases], args=args)))

        return await _cas_loop(lambda: self.get(task_id), store, mutate)

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        ids = await self._call(self._r.zrangebyscore(self._leases, "-inf", now, start=0, num=limit))
        return [i.decode() if isinstance(i, bytes) else str(i) for i in ids]

    async def close(self) -> None:
        await self._r.aclose()


def open_task_store(url: str | None) -> TaskStore:
    """The task store a state URL names: `memory://`, `sqlite:///path/state.db` (`sqlite:////abs/path`),
    `redis://host:port/db` (`?prefix=…&timeout=…` as for `open_state`)."""
    if not url or url.startswith("memory:"):
        return MemoryTaskStore()
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    if parts.scheme == "sqlite":
        path = url[len("sqlite:///"):].split("?", 1)[0]  # sqlite:////abs/path keeps its leading slash
        return SqliteTaskStore(path)
    if parts.scheme in ("redis", "rediss", "unix"):
        rest = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k not in ("prefix", "timeout")])
        clean = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, ""))
        prefix = query.get("prefix", "mcp-stateless:") + "task:"
        return RedisTaskStore(clean, prefix=prefix, timeout_s=float(query.get("timeout", 2.0)))
    raise ValueError(f"unknown task store URL {url!r}")
