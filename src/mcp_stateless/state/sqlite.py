"""SQLite stores: the embedded default for one machine. Survives restarts; several processes on the same
machine (``--workers N``, or several instances) share one file (WAL mode, atomic UPDATE … WHERE version).

Change events cross processes through an `events` table that each listening process polls (every
`poll_s`, 0.1 s by default); a process's own events reach its own listeners at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import orjson

from ..server.events import ChangeEvent, MemoryEventBus, Subscription
from .base import BusSubscription, HandleRecord, StateBundle, StateUnavailable

log = logging.getLogger("mcp_stateless.state")

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS handles (
    key TEXT PRIMARY KEY, principal TEXT NOT NULL, kind TEXT NOT NULL, data BLOB NOT NULL,
    version INTEGER NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL, purge_at REAL NOT NULL,
    ended INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS handles_purge ON handles(purge_at);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, origin TEXT NOT NULL, kind TEXT NOT NULL, uri TEXT, at REAL NOT NULL
);
"""

EVENT_RETENTION_S = 60.0


class SqliteDatabase:
    """One connection per process, used from worker threads under a lock. Opened on first use, so a
    server that never needs state never creates the file."""

    def __init__(self, path: str, *, busy_timeout_s: float = 5.0) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._pid = 0

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None,
                               check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        with contextlib.suppress(sqlite3.OperationalError):
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.executescript(_SCHEMA)
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return fn(self._connect())
            except sqlite3.OperationalError as e:
                raise StateUnavailable(f"sqlite {self.path}", str(e)) from None

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._call, fn)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _row(row: tuple[Any, ...] | None) -> HandleRecord | None:
    if row is None:
        return None
    key, principal, kind, data, version, created, expires, purge, ended = row
    return HandleRecord(key, principal, kind, orjson.loads(data), version, created, expires, purge, bool(ended))


class SqliteHandleStore:
    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db
        self._ops = 0

    async def create(self, record: HandleRecord) -> bool:
        blob = orjson.dumps(record.data)
        self._ops += 1
        purge = self._ops % 256 == 1

        def op(c: sqlite3.Connection) -> bool:
            if purge:
                c.execute("DELETE FROM handles WHERE purge_at <= ?", (time.time(),))
            try:
                c.execute(
                    "INSERT INTO handles VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (record.key, record.principal, record.kind, blob, record.version, record.created_at,
                     record.expires_at, record.purge_at, int(record.ended)),
                )
            except sqlite3.IntegrityError:
                return False
            return True

        return await self.db.run(op)

    async def get(self, key: str) -> HandleRecord | None:
        def op(c: sqlite3.Connection) -> HandleRecord | None:
            row = c.execute(
                "SELECT key, principal, kind, data, version, created_at, expires_at, purge_at, ended "
                "FROM handles WHERE key = ? AND purge_at > ?", (key, time.time())).fetchone()
            return _row(row)

        return await self.db.run(op)

    async def swap(self, key: str, expected_version: int, data: dict[str, Any], expires_at: float,
                   purge_at: float, ended: bool) -> bool:
        blob = orjson.dumps(data)

        def op(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "UPDATE handles SET data = ?, version = version + 1, expires_at = ?, purge_at = ?, ended = ? "
                "WHERE key = ? AND version = ?", (blob, expires_at, purge_at, int(ended), key, expected_version))
            return cur.rowcount == 1

        return await self.db.run(op)

    async def touch(self, key: str, expires_at: float, purge_at: float) -> None:
        def op(c: sqlite3.Connection) -> None:
            c.execute(
                "UPDATE handles SET expires_at = ?, purge_at = MAX(purge_at, ?) "
                "WHERE key = ? AND ended = 0 AND expires_at < ? AND expires_at > ?",
                (expires_at, purge_at, key, expires_at, time.time()))

        await self.db.run(op)

    async def delete(self, key: str) -> bool:
        return await self.db.run(lambda c: c.execute("DELETE FROM handles WHERE key = ?", (key,)).rowcount == 1)

    async def purge(self, now: float) -> int:
        return await self.db.run(lambda c: c.execute("DELETE FROM handles WHERE purge_at <= ?", (now,)).rowcount)

    async def aclose(self) -> None:
        self.db.close()




def _events_since(last: int, c: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return c.execute("SELECT id, origin, kind, uri FROM events WHERE id > ? ORDER BY id LIMIT 1000",
                     (last,)).fetchall()


class SqliteEventBus:
    """Change events through the shared SQLite file (`shared=True`) or this process only."""

    def __init__(self, db: SqliteDatabase, *, shared: bool = True, poll_s: float = 0.1) -> None:
        self.db = db
        self.shared = shared
        self.poll_s = poll_s
        self._local = MemoryEventBus()
        self._origin = secrets.token_hex(8)
        self._poller: asyncio.Task[None] | None = None
        self._started: asyncio.Event | None = None
        self._published = 0

    async def publish(self, event: ChangeEvent) -> None:
        self._local.publish_nowait(event)
        if not self.shared:
            return
        self._published += 1
        prune = self._published % 64 == 1
        now = time.time()

        def op(c: sqlite3.Connection) -> None:
            c.execute("INSERT INTO events (origin, kind, uri, at) VALUES (?, ?, ?, ?)",
                      (self._origin, event.kind, event.uri, now))
            if prune:
                c.execute("DELETE FROM events WHERE at < ?", (now - EVENT_RETENTION_S,))

        try:
            await self.db.run(op)
        except StateUnavailable as e:
            log.warning("change event %s not shared with other processes: %s", event.kind, e.message)

    def subscribe(self) -> Subscription:
        sub = BusSubscription(self._ready, self._local.subscribe())
        if self.shared and (self._poller is None or self._poller.done()):
            self._started = asyncio.Event()
            self._poller = asyncio.get_running_loop().create_task(self._poll(self._started))
        return sub

    async def _ready(self) -> None:
        if self._started is not None:
            await asyncio.wait_for(self._started.wait(), self.db.busy_timeout_s + 1)

    async def _poll(self, started: asyncio.Event) -> None:
        last: int | None = None
        while True:
            try:
                if last is None:
                    last = await self.db.run(
                        lambda c: int(c.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]))
                    started.set()
                if self._local.subscriber_count == 0:
                    return  # nobody listening: stop polling; the next subscribe starts again
                for id_, origin, kind, uri in await self.db.run(functools.partial(_events_since, last)):
                    last = id_
                    if origin != self._origin:
                        self._local.publish_nowait(ChangeEvent(kind, uri))
            except StateUnavailable as e:
                log.warning("event poll failed: %s", e.message)
            await asyncio.sleep(self.poll_s)

    async def aclose(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None


def sqlite_path(url: str) -> str:
    """``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (SQLAlchemy's convention)."""
    rest = url[len("sqlite://"):].split("?", 1)[0]
    if not rest.startswith("/") or len(rest) < 2:
        raise ValueError(f"invalid SQLite state URL {url!r}: write sqlite:///relative.db or sqlite:////abs/path.db")
    path = rest[1:]
    return path if path == ":memory:" else os.path.abspath(os.path.expanduser(path))


def open_bundle(url: str, query: dict[str, str]) -> StateBundle:
    db = SqliteDatabase(sqlite_path(url), busy_timeout_s=float(query.get("timeout", 5.0)))
    events = query.get("events", "shared")
    if events not in ("shared", "local"):
        raise ValueError(f"invalid events={events!r} in {url!r}: shared or local")
    bus = SqliteEventBus(db, shared=events == "shared", poll_s=float(query.get("poll", 0.1)))
    return StateBundle(url, SqliteHandleStore(db), bus, multiprocess=True, resources=(db,))
