"""The SQLite engine: the embedded default for one machine. Survives restarts; several processes on the
same machine (``--workers N``, or several instances) share one file (WAL mode, atomic UPDATE … WHERE
version = ?).

Bus payloads cross processes through a `bus` table that each listening process polls (every `poll_s`,
0.1 s by default); a process's own payloads reach its own readers at once.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from .base import StateBundle, StateUnavailable, Versioned
from .events import ChangeEventBus, Fanout, SharedSubscription
from .handles import HandleStore

log = logging.getLogger("mcp_stateless.state")

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    ns TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, data BLOB NOT NULL,
    expires_at REAL, due REAL, PRIMARY KEY (ns, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_due ON records(ns, due) WHERE due IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_expiry ON records(expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS bus (
    id INTEGER PRIMARY KEY AUTOINCREMENT, origin TEXT NOT NULL, topic TEXT NOT NULL, payload BLOB NOT NULL,
    at REAL NOT NULL
);
"""

_LIVE = "(expires_at IS NULL OR expires_at > ?)"
BUS_RETENTION_S = 60.0


class SqliteDatabase:
    """One connection per process, used from its own thread. Opened on first use, so a server that never
    needs state never creates the file.

    The thread is this store's, not the loop's default executor: sync tools run there, and a store call
    queued behind blocked tools would wait for them (one thread suffices: the connection is used under
    a lock anyway)."""

    def __init__(self, path: str, *, busy_timeout_s: float = 5.0) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._pid = 0
        self._executor: ThreadPoolExecutor | None = None
        self._executor_pid = 0

    @property
    def connected(self) -> bool:
        return self._conn is not None

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
                raise StateUnavailable.observed(f"sqlite {self.path}", str(e)) from None

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        executor = self._executor
        if executor is None or self._executor_pid != os.getpid():  # first use, or in a forked child
            executor = self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-sqlite")
            self._executor_pid = os.getpid()
        return await asyncio.get_running_loop().run_in_executor(executor, self._call, fn)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None


class SqliteRecords:
    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db
        self._ops = 0

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        self._ops += 1
        purge = self._ops % 256 == 1

        def op(c: sqlite3.Connection) -> bool:
            now = time.time()
            if purge:
                c.execute("DELETE FROM records WHERE expires_at <= ?", (now,))
            # An expired record is gone: its key may be created again.
            cur = c.execute(
                "INSERT INTO records VALUES (?, ?, 1, ?, ?, ?) ON CONFLICT (ns, key) DO UPDATE SET "
                "version = 1, data = excluded.data, expires_at = excluded.expires_at, due = excluded.due "
                "WHERE records.expires_at IS NOT NULL AND records.expires_at <= ?",
                (ns, key, data, expires_at, due, now))
            return cur.rowcount == 1

        return await self.db.run(op)

    async def get(self, ns: str, key: str) -> Versioned | None:
        def op(c: sqlite3.Connection) -> Versioned | None:
            row = c.execute(f"SELECT data, version FROM records WHERE ns = ? AND key = ? AND {_LIVE}",
                            (ns, key, time.time())).fetchone()
            return None if row is None else Versioned(row[0], row[1])

        return await self.db.run(op)

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        def op(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "UPDATE records SET data = ?, version = version + 1, expires_at = ?, due = ? "
                f"WHERE ns = ? AND key = ? AND version = ? AND {_LIVE}",
                (data, expires_at, due, ns, key, expected_version, time.time()))
            return cur.rowcount == 1

        return await self.db.run(op)

    async def delete(self, ns: str, key: str) -> bool:
        return await self.db.run(
            lambda c: c.execute("DELETE FROM records WHERE ns = ? AND key = ?", (ns, key)).rowcount == 1)

    async def due_by(self, ns: str, before: float, limit: int = 100) -> list[str]:
        def op(c: sqlite3.Connection) -> list[str]:
            rows = c.execute(
                f"SELECT key FROM records WHERE ns = ? AND due IS NOT NULL AND due < ? AND {_LIVE} "
                "ORDER BY due LIMIT ?", (ns, before, time.time(), limit)).fetchall()
            return [r[0] for r in rows]

        return await self.db.run(op)

    async def purge(self, now: float) -> int:
        return await self.db.run(lambda c: c.execute("DELETE FROM records WHERE expires_at <= ?", (now,)).rowcount)

    async def aclose(self) -> None:
        self.db.close()


def _published_since(last: int, c: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return c.execute("SELECT id, origin, topic, payload FROM bus WHERE id > ? ORDER BY id LIMIT 1000",
                     (last,)).fetchall()


class SqliteBus:
    """Topics through the shared SQLite file (`shared=True`) or this process only."""

    def __init__(self, db: SqliteDatabase, *, shared: bool = True, poll_s: float = 0.1) -> None:
        self.db = db
        self.shared = shared
        self.poll_s = poll_s
        self._fanout = Fanout()
        self._origin = secrets.token_hex(8)
        self._poller: asyncio.Task[None] | None = None
        self._started: asyncio.Event | None = None
        self._published = 0

    async def publish(self, topic: str, payload: bytes) -> None:
        self._fanout.deliver(topic, payload)
        if not self.shared:
            return
        self._published += 1
        prune = self._published % 64 == 1
        now = time.time()

        def op(c: sqlite3.Connection) -> None:
            c.execute("INSERT INTO bus (origin, topic, payload, at) VALUES (?, ?, ?, ?)",
                      (self._origin, topic, payload, now))
            if prune:
                c.execute("DELETE FROM bus WHERE at < ?", (now - BUS_RETENTION_S,))

        try:
            await self.db.run(op)
        except StateUnavailable as e:
            log.warning("a %s message was not shared with other processes: %s", topic, e.message)

    def subscribe(self, topic: str) -> SharedSubscription:
        sub = SharedSubscription(self._fanout.subscribe(topic), self.started)
        if self.shared and (self._poller is None or self._poller.done()):
            self._started = asyncio.Event()
            self._poller = asyncio.get_running_loop().create_task(self._poll(self._started))
        return sub

    async def started(self) -> None:
        if self._started is not None:
            await asyncio.wait_for(self._started.wait(), self.db.busy_timeout_s + 1)

    async def _poll(self, started: asyncio.Event) -> None:
        last: int | None = None
        while True:
            try:
                if last is None:
                    last = await self.db.run(
                        lambda c: int(c.execute("SELECT COALESCE(MAX(id), 0) FROM bus").fetchone()[0]))
                    started.set()
                if not self._fanout.listening:
                    return  # nobody listening: stop polling; the next subscribe starts again
                for id_, origin, topic, payload in await self.db.run(functools.partial(_published_since, last)):
                    last = id_
                    if origin != self._origin:
                        self._fanout.deliver(topic, payload)
            except StateUnavailable as e:
                log.warning("bus poll failed: %s", e.message)
            await asyncio.sleep(self.poll_s)

    async def aclose(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None


def sqlite_path(url: str) -> str:
    """The file a ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` URL names
    (SQLAlchemy's convention). A relative path is resolved against the working directory once, when the
    state is opened, so every store of the bundle (and a later ``chdir``) agrees on one file."""
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
    records = SqliteRecords(db)
    bus = SqliteBus(db, shared=events == "shared", poll_s=float(query.get("poll", 0.1)))
    return StateBundle(url, records, bus, HandleStore(records), ChangeEventBus(bus), multiprocess=True)
