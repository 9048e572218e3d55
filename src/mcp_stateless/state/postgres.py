"""The Postgres engine (psycopg 3, async, with psycopg_pool; the postgres extra):
`postgresql://USER[:PASSWORD]@HOST:PORT/DB[?schema=mcp_stateless&pool_min=1&pool_max=10&timeout=5]`.

Records live in one table of the engine's own schema. Every mutation is one statement, atomic at the
server: `create` is an INSERT that only replaces an expired row, `swap` an UPDATE guarded by the version
it names (compare-and-set), `delete` a DELETE. Times are the caller's clock, as on every engine. The due
scan reads `FOR UPDATE SKIP LOCKED`, so a sweeper does not list rows another instance is updating (claiming)
at that moment; the claim itself is still the versioned swap.

The schema is the project's: created on first use and migrated forward, one numbered step at a time, under
an advisory lock (so instances starting together do not race) and recorded in `schema_version`; running it
again changes nothing.

Bus. Every payload travels as a `NOTIFY` on the schema's channel, delivered in commit order to every
listening process (one dedicated `LISTEN` connection each). A payload too large for a notification (the
server's limit is 8000 bytes) is stored in the `bus` table and the notification carries only its id: the
notification is a wake-up, the row is the truth. At most once, like the other buses: what is published
while a listener is reconnecting is missed.

Connections come from a pool sized by `pool_min`/`pool_max`; a connection the server dropped (a restart, a
failover) is discarded by the pool and the operation is tried once more on a fresh one, so a store that
comes back is used again by the next request. Every operation is bounded by `timeout` seconds.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .base import StateBundle, StateUnavailable, Versioned, redact
from .events import ChangeEventBus, Fanout, SharedSubscription
from .handles import HandleStore

log = logging.getLogger("mcp_stateless.state")

T = TypeVar("T")
_DOWN = (psycopg.OperationalError, PoolTimeout, OSError, asyncio.TimeoutError)

# Numbered, forward-only steps: step n runs once, when the recorded version is below n.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS {schema}.records (
        ns TEXT NOT NULL, key TEXT NOT NULL, version BIGINT NOT NULL, data BYTEA NOT NULL,
        expires_at DOUBLE PRECISION, due DOUBLE PRECISION, PRIMARY KEY (ns, key));
    CREATE INDEX IF NOT EXISTS records_due ON {schema}.records (ns, due) WHERE due IS NOT NULL;
    CREATE INDEX IF NOT EXISTS records_expiry ON {schema}.records (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE IF NOT EXISTS {schema}.bus (
        id BIGSERIAL PRIMARY KEY, payload BYTEA NOT NULL, at DOUBLE PRECISION NOT NULL);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
_LOCK_ID = 0x6D637073  # "mcps": the advisory lock migrations take

# NOTIFY payloads are text and at most 8000 bytes: larger ones go through the bus table.
NOTIFY_MAX = 7000
BUS_RETENTION_S = 60.0
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,40}")
_LIVE = "(expires_at IS NULL OR expires_at > %(now)s)"


class PostgresConnection:
    """A connection pool per event loop, opened on first use; the schema is migrated once per pool."""

    def __init__(self, url: str, *, schema: str = "mcp_stateless", pool_min: int = 1, pool_max: int = 10,
                 timeout_s: float = 5.0) -> None:
        self.url = url
        self.where = f"postgres {redact(url)}"
        self.schema = schema
        self.pool_min, self.pool_max = pool_min, pool_max
        self.timeout_s = timeout_s
        self.channel = f"mcp_stateless_{schema}"
        self._pool: AsyncConnectionPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._migrated: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self._pool is not None

    def q(self, text: str) -> sql.Composed:
        """A statement with `{schema}` filled in as a quoted identifier."""
        return sql.SQL(text).format(schema=sql.Identifier(self.schema))

    def conninfo(self) -> str:
        return self.url

    async def connect(self) -> psycopg.AsyncConnection[Any]:
        """A connection of its own (the bus's LISTEN), outside the pool."""
        return await psycopg.AsyncConnection.connect(self.url, autocommit=True,
                                                     connect_timeout=max(1, int(self.timeout_s)))

    async def _pool_ready(self) -> AsyncConnectionPool:
        loop = asyncio.get_running_loop()
        if self._pool is None or self._loop is not loop:
            self._pool = AsyncConnectionPool(
                self.url, min_size=self.pool_min, max_size=self.pool_max, timeout=self.timeout_s, open=False,
                kwargs={"autocommit": True, "connect_timeout": max(1, int(self.timeout_s))},
                reconnect_timeout=max(self.timeout_s * 6, 30.0), name="mcp-stateless")
            self._loop = loop
            self._migrated = None
            await self._pool.open(wait=False)
        failed = self._migrated is not None and self._migrated.done() and (
            self._migrated.cancelled() or self._migrated.exception() is not None)
        if self._migrated is None or failed:  # not yet, or the last try failed (store down): try again
            self._migrated = loop.create_task(self._migrate(self._pool))
        await asyncio.shield(self._migrated)
        return self._pool

    async def _migrate(self, pool: AsyncConnectionPool) -> None:
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
            await conn.execute(self.q("CREATE SCHEMA IF NOT EXISTS {schema}"))
            await conn.execute(self.q("CREATE TABLE IF NOT EXISTS {schema}.schema_version (version INTEGER NOT NULL)"))
            row = await (await conn.execute(self.q("SELECT max(version) FROM {schema}.schema_version"))).fetchone()
            current = int(row[0]) if row and row[0] is not None else 0
            if current > SCHEMA_VERSION:
                raise psycopg.errors.FeatureNotSupported(
                    f"schema {self.schema} is at version {current}, newer than this release's {SCHEMA_VERSION}")
            for n, step in enumerate(MIGRATIONS[current:], start=current + 1):
                await conn.execute(self.q(step))
                await conn.execute(self.q("INSERT INTO {schema}.schema_version VALUES (%s)"), (n,))

    async def call(self, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        async def run() -> T:
            pool = await self._pool_ready()
            for attempt in (1, 2):
                try:
                    async with pool.connection() as conn:
                        return await fn(conn)
                except psycopg.OperationalError:
                    # A connection the server dropped is discarded by the pool; once more on a new one.
                    if attempt == 2:
                        raise
            raise AssertionError("unreachable")

        try:
            return await asyncio.wait_for(run(), self.timeout_s * 3)
        except _DOWN as e:
            raise StateUnavailable.observed(self.where, str(e).strip() or type(e).__name__) from None
        except psycopg.errors.FeatureNotSupported as e:
            raise StateUnavailable.observed(self.where, str(e)) from None

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None and self._loop is asyncio.get_running_loop():
            with contextlib.suppress(Exception):
                await pool.close(timeout=self.timeout_s)


class PostgresRecords:
    def __init__(self, conn: PostgresConnection) -> None:
        self.conn = conn
        self._ops = 0
        q = conn.q
        self._create = q(
            "INSERT INTO {schema}.records VALUES (%(ns)s, %(key)s, 1, %(data)s, %(exp)s, %(due)s) "
            "ON CONFLICT (ns, key) DO UPDATE SET version = 1, data = excluded.data, "
            "expires_at = excluded.expires_at, due = excluded.due "
            "WHERE records.expires_at IS NOT NULL AND records.expires_at <= %(now)s")
        self._get = q(f"SELECT data, version FROM {{schema}}.records WHERE ns = %(ns)s AND key = %(key)s AND {_LIVE}")
        self._swap = q(
            "UPDATE {schema}.records SET data = %(data)s, version = version + 1, expires_at = %(exp)s, "
            f"due = %(due)s WHERE ns = %(ns)s AND key = %(key)s AND version = %(v)s AND {_LIVE}")
        self._delete = q("DELETE FROM {schema}.records WHERE ns = %(ns)s AND key = %(key)s")
        self._due = q(
            f"SELECT key FROM {{schema}}.records WHERE ns = %(ns)s AND due IS NOT NULL AND due < %(before)s "
            f"AND {_LIVE} ORDER BY due LIMIT %(limit)s FOR UPDATE SKIP LOCKED")
        self._purge = q("DELETE FROM {schema}.records WHERE expires_at <= %(now)s")

    async def _rowcount(self, stmt: sql.Composed, params: dict[str, Any]) -> int:
        async def op(c: psycopg.AsyncConnection[Any]) -> int:
            return (await c.execute(stmt, params)).rowcount

        return await self.conn.call(op)

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        self._ops += 1
        if self._ops % 256 == 1:  # expired rows are only hidden by reads: remove them now and then
            await self.purge(time.time())
        params = {"ns": ns, "key": key, "data": data, "exp": expires_at, "due": due, "now": time.time()}
        return await self._rowcount(self._create, params) == 1

    async def get(self, ns: str, key: str) -> Versioned | None:
        async def op(c: psycopg.AsyncConnection[Any]) -> Versioned | None:
            row = await (await c.execute(self._get, {"ns": ns, "key": key, "now": time.time()})).fetchone()
            return None if row is None else Versioned(bytes(row[0]), int(row[1]))

        return await self.conn.call(op)

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        params = {"ns": ns, "key": key, "data": data, "exp": expires_at, "due": due, "v": expected_version,
                  "now": time.time()}
        return await self._rowcount(self._swap, params) == 1

    async def delete(self, ns: str, key: str) -> bool:
        return await self._rowcount(self._delete, {"ns": ns, "key": key}) == 1

    async def due_by(self, ns: str, before: float, limit: int = 100) -> list[str]:
        async def op(c: psycopg.AsyncConnection[Any]) -> list[str]:
            params = {"ns": ns, "before": before, "now": time.time(), "limit": limit}
            return [str(r[0]) for r in await (await c.execute(self._due, params)).fetchall()]

        return await self.conn.call(op)

    async def purge(self, now: float) -> int:
        return await self._rowcount(self._purge, {"now": now})

    async def aclose(self) -> None:
        await self.conn.aclose()


_ORIGIN_LEN = 16


class PostgresBus:
    """LISTEN/NOTIFY on the schema's channel: one listening connection per process, started by the first
    reader and kept until `aclose`; a notification names its origin, so a process skips its own."""

    def __init__(self, conn: PostgresConnection) -> None:
        self.conn = conn
        self._fanout = Fanout()
        self._origin = secrets.token_hex(_ORIGIN_LEN // 2)
        self._reader: asyncio.Task[None] | None = None
        self._live: asyncio.Event | None = None
        self._published = 0
        self._insert = conn.q("INSERT INTO {schema}.bus (payload, at) VALUES (%s, %s) RETURNING id")
        self._prune = conn.q("DELETE FROM {schema}.bus WHERE at < %s")
        self._read = conn.q("SELECT payload FROM {schema}.bus WHERE id = %s")

    async def publish(self, topic: str, payload: bytes) -> None:
        self._fanout.deliver(topic, payload)
        inline = base64.b64encode(payload).decode()
        note = orjson.dumps([self._origin, topic, inline]).decode()
        self._published += 1
        prune = self._published % 64 == 1

        async def op(c: psycopg.AsyncConnection[Any]) -> None:
            message = note
            if len(note) > NOTIFY_MAX:
                now = time.time()
                row = await (await c.execute(self._insert, (payload, now))).fetchone()
                assert row is not None
                message = orjson.dumps([self._origin, topic, None, int(row[0])]).decode()
                if prune:
                    await c.execute(self._prune, (now - BUS_RETENTION_S,))
            await c.execute("SELECT pg_notify(%s, %s)", (self.conn.channel, message))

        try:
            await self.conn.call(op)
        except StateUnavailable as e:
            log.warning("a %s message was not sent to other instances: %s", topic, e.message)

    def subscribe(self, topic: str) -> SharedSubscription:
        sub = SharedSubscription(self._fanout.subscribe(topic), self.live)
        if self._reader is None or self._reader.done():
            self._live = asyncio.Event()
            self._reader = asyncio.get_running_loop().create_task(self._listen(self._live))
        return sub

    async def live(self) -> None:
        live = self._live
        if live is None:
            return
        try:
            await asyncio.wait_for(live.wait(), self.conn.timeout_s * 2)
        except TimeoutError:
            raise StateUnavailable.observed(self.conn.where, "cannot listen on the bus") from None

    async def _deliver(self, raw: str) -> None:
        try:
            origin, topic, inline, *ref = orjson.loads(raw)
            if origin == self._origin or not isinstance(topic, str):
                return
            if inline is not None:
                self._fanout.deliver(topic, base64.b64decode(inline))
            elif self._fanout.has(topic) and ref and isinstance(ref[0], int):
                stored = ref[0]

                async def op(c: psycopg.AsyncConnection[Any]) -> bytes | None:
                    row = await (await c.execute(self._read, (stored,))).fetchone()
                    return None if row is None else bytes(row[0])

                payload = await self.conn.call(op)
                if payload is not None:
                    self._fanout.deliver(topic, payload)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            log.warning("ignored a malformed bus notification on %s", self.conn.channel)
        except StateUnavailable as e:
            log.warning("a large bus message could not be read: %s", e.message)

    async def _listen(self, live: asyncio.Event) -> None:
        backoff = 0.1
        while True:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                await self.conn._pool_ready()  # the schema (and its bus table) exists
                conn = await asyncio.wait_for(self.conn.connect(), self.conn.timeout_s)
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.conn.channel)))
                live.set()
                backoff = 0.1
                while True:
                    async for note in conn.notifies(timeout=1.0):
                        await self._deliver(note.payload)
                    # a quiet second: check that the connection is still there
                    await asyncio.wait_for(conn.execute("SELECT 1"), self.conn.timeout_s)
            except (*_DOWN, StateUnavailable) as e:
                live.clear()
                log.warning("bus messages from other instances paused (%s: %s); reconnecting",
                            self.conn.where, str(e).strip() or type(e).__name__)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None


def open_bundle(url: str, query: dict[str, str]) -> StateBundle:
    schema = query.get("schema", "mcp_stateless")
    if not _SCHEMA_NAME.fullmatch(schema):
        raise ValueError(f"invalid schema={schema!r} in state URL: lower-case letters, digits and _")
    sizes: dict[str, int] = {}
    for name, default in (("pool_min", 1), ("pool_max", 10)):
        raw = query.get(name, str(default))
        if not raw.isdigit() or int(raw) < (1 if name == "pool_max" else 0):
            raise ValueError(f"invalid {name}={raw!r} in state URL: a number of connections")
        sizes[name] = int(raw)
    if sizes["pool_min"] > sizes["pool_max"]:
        raise ValueError("invalid state URL: pool_min is larger than pool_max")
    conn = PostgresConnection(url, schema=schema, pool_min=sizes["pool_min"], pool_max=sizes["pool_max"],
                              timeout_s=float(query.get("timeout", 5.0)))
    records, bus = PostgresRecords(conn), PostgresBus(conn)
    return StateBundle(url, records, bus, HandleStore(records), ChangeEventBus(bus), shared=True,
                       multiprocess=True)
