"""Redis stores (redis-py asyncio): state shared by every instance on every machine.

Mutations are Lua scripts (atomic at the server); records expire natively (PEXPIREAT at their purge
time). Change events travel over pub/sub: at-most-once, never lost while publisher, Redis and listener
are all up (a listen stream is acknowledged only once its instance is subscribed). Every call has a
socket timeout, so a Redis outage fails requests with `StateUnavailable` instead of hanging; the next
request reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..server.events import ChangeEvent, MemoryEventBus, Subscription
from .base import BusSubscription, HandleRecord, StateBundle, StateUnavailable, redact

log = logging.getLogger("mcp_stateless.state")

T = TypeVar("T")
_DOWN = (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError)

_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'p', ARGV[1], 'k', ARGV[2], 'd', ARGV[3], 'v', ARGV[4], 'c', ARGV[5],
           'e', ARGV[6], 'g', ARGV[7], 'x', ARGV[8])
redis.call('PEXPIREAT', KEYS[1], ARGV[9])
return 1
"""

_SWAP = """
local v = redis.call('HGET', KEYS[1], 'v')
if (not v) or v ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'd', ARGV[2], 'v', ARGV[7], 'e', ARGV[3], 'g', ARGV[4], 'x', ARGV[5])
redis.call('PEXPIREAT', KEYS[1], ARGV[6])
return 1
"""

_TOUCH = """
local r = redis.call('HMGET', KEYS[1], 'e', 'x', 'g')
if (not r[1]) or r[2] == '1' then return 0 end
local e = tonumber(r[1])
if e >= tonumber(ARGV[1]) or e <= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'e', ARGV[1])
if tonumber(r[3]) < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'g', ARGV[2])
  redis.call('PEXPIREAT', KEYS[1], ARGV[4])
end
return 1
"""


def _ms(t: float) -> int:
    return int(t * 1000) + 1


class RedisConnection:
    """A client per event loop, created on first use, with bounded timeouts and one immediate retry
    (so a connection left stale by a Redis restart is replaced, while a dead Redis fails fast)."""

    def __init__(self, url: str, *, timeout_s: float = 2.0, prefix: str = "mcp-stateless:") -> None:
        self.url = url
        self.where = f"redis {redact(url)}"
        self.timeout_s = timeout_s
        self.prefix = prefix
        self._client: aioredis.Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> aioredis.Redis:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = aioredis.Redis.from_url(
                self.url,
                socket_timeout=self.timeout_s,
                socket_connect_timeout=self.timeout_s,
                retry=Retry(NoBackoff(), 1),
                health_check_interval=30,
            )
            self._loop = loop
        return self._client

    async def call(self, fn: Callable[[aioredis.Redis], Awaitable[T]]) -> T:
        try:
            return await asyncio.wait_for(fn(self.client()), self.timeout_s * 3)
        except _DOWN as e:
            raise StateUnavailable(self.where, str(e) or type(e).__name__) from None

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            with contextlib.suppress(Exception):
                await client.aclose()


def _f(value: float) -> str:
    return repr(float(value))


class RedisHandleStore:
    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn

    def _key(self, key: str) -> str:
        return f"{self.conn.prefix}h:{key}"

    async def create(self, record: HandleRecord) -> bool:
        args: list[str | bytes] = [record.principal, record.kind, orjson.dumps(record.data), str(record.version),
                _f(record.created_at), _f(record.expires_at), _f(record.purge_at), "1" if record.ended else "0",
                str(_ms(record.purge_at))]
        k = self._key(record.key)
        done = await self.conn.call(lambda r: r.eval(_CREATE, 1, k, *args))
        return int(done) == 1

    async def get(self, key: str) -> HandleRecord | None:
        k = self._key(key)
        raw: dict[bytes, bytes] = await self.conn.call(lambda r: r.hgetall(k))  # type: ignore[arg-type,return-value]
        if not raw:
            return None
        purge_at = float(raw[b"g"])
        if purge_at <= time.time():
            return None
        return HandleRecord(key, raw[b"p"].decode(), raw[b"k"].decode(), orjson.loads(raw[b"d"]), int(raw[b"v"]),
                            float(raw[b"c"]), float(raw[b"e"]), purge_at, raw[b"x"] == b"1")

    async def swap(self, key: str, expected_version: int, data: dict[str, Any], expires_at: float,
                   purge_at: float, ended: bool) -> bool:
        args: list[str | bytes] = [str(expected_version), orjson.dumps(data), _f(expires_at), _f(purge_at),
                                   "1" if ended else "0", str(_ms(purge_at)), str(expected_version + 1)]
        k = self._key(key)
        done = await self.conn.call(lambda r: r.eval(_SWAP, 1, k, *args))
        return int(done) == 1

    async def touch(self, key: str, expires_at: float, purge_at: float) -> None:
        args: list[str | bytes] = [_f(expires_at), _f(purge_at), _f(time.time()), str(_ms(purge_at))]
        k = self._key(key)
        await self.conn.call(lambda r: r.eval(_TOUCH, 1, k, *args))

    async def delete(self, key: str) -> bool:
        k = self._key(key)
        n = await self.conn.call(lambda r: r.delete(k))
        return int(n) == 1

    async def purge(self, now: float) -> int:
        return 0  # Redis expires records itself (PEXPIREAT at purge time)

    async def aclose(self) -> None:
        await self.conn.aclose()




class RedisEventBus:
    """Pub/sub fan-out: one subscriber connection per process, started by the first listener."""

    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self.channel = f"{conn.prefix}events"
        self._local = MemoryEventBus()
        self._origin = secrets.token_hex(8)
        self._reader: asyncio.Task[None] | None = None
        self._live: asyncio.Event | None = None

    async def publish(self, event: ChangeEvent) -> None:
        self._local.publish_nowait(event)
        msg = orjson.dumps({"o": self._origin, "k": event.kind, "u": event.uri})
        try:
            await self.conn.call(lambda r: r.publish(self.channel, msg))
        except StateUnavailable as e:
            log.warning("change event %s not sent to other instances: %s", event.kind, e.message)

    def subscribe(self) -> Subscription:
        sub = BusSubscription(self._ready, self._local.subscribe())
        if self._reader is None or self._reader.done():
            self._live = asyncio.Event()
            self._reader = asyncio.get_running_loop().create_task(self._read(self._live))
        return sub

    async def _ready(self) -> None:
        live = self._live
        if live is None:
            return
        try:
            await asyncio.wait_for(live.wait(), self.conn.timeout_s * 2)
        except TimeoutError:
            raise StateUnavailable(self.conn.where, "cannot subscribe to change events") from None

    async def _read(self, live: asyncio.Event) -> None:
        backoff = 0.1
        while True:
            pubsub = None
            try:
                pubsub = self.conn.client().pubsub(ignore_subscribe_messages=True)
                await asyncio.wait_for(pubsub.subscribe(self.channel), self.conn.timeout_s)
                live.set()
                backoff = 0.1
                while self._local.subscriber_count:
                    msg = await pubsub.get_message(timeout=1.0)
                    if msg is None or msg.get("type") != "message":
                        continue
                    try:
                        body = orjson.loads(msg["data"])
                        if body.get("o") != self._origin:
                            self._local.publish_nowait(ChangeEvent(body["k"], body.get("u")))
                    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
                        log.warning("ignored a malformed change event on %s", self.channel)
                return  # nobody listening any more; the next subscribe starts a new reader
            except _DOWN as e:
                live.clear()
                log.warning("change events from other instances paused (%s: %s); reconnecting",
                            self.conn.where, str(e) or type(e).__name__)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None


def open_bundle(url: str, query: dict[str, str]) -> StateBundle:
    conn = RedisConnection(url, timeout_s=float(query.get("timeout", 2.0)),
                           prefix=query.get("prefix", "mcp-stateless:"))
    return StateBundle(url, RedisHandleStore(conn), RedisEventBus(conn), shared=True, multiprocess=True,
                       resources=(conn,))
