"""The Redis engine (redis-py asyncio): state shared by every instance on every machine.

A record is a hash {v: version, d: data} that expires natively (PEXPIREAT); a namespace's due times are
a sorted set. Mutations are Lua scripts, atomic at the server. Bus topics travel over pub/sub: at most
once, never lost while publisher, Redis and reader are all up (a subscription is `ready()` only once its
process is subscribed). Every call has a socket timeout, so a Redis outage fails requests with
`StateUnavailable` instead of hanging; the next request reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .base import StateBundle, StateUnavailable, Versioned, redact
from .events import ChangeEventBus, Fanout, SharedSubscription
from .handles import HandleStore

log = logging.getLogger("mcp_stateless.state")

T = TypeVar("T")
_DOWN = (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError)

# KEYS: record, due set. ARGV: data, expiry ms (0: none), due ('' : none), key.
CREATE_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', 1, 'd', ARGV[1])
if ARGV[2] ~= '0' then redis.call('PEXPIREAT', KEYS[1], ARGV[2]) end
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4]) else redis.call('ZREM', KEYS[2], ARGV[4]) end
return 1
"""

# KEYS: record, due set. ARGV: expected version, data, expiry ms (0: none), due ('': none), key.
SWAP_SCRIPT = """
local v = redis.call('HGET', KEYS[1], 'v')
if (not v) or v ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', tonumber(v) + 1, 'd', ARGV[2])
if ARGV[3] ~= '0' then redis.call('PEXPIREAT', KEYS[1], ARGV[3]) else redis.call('PERSIST', KEYS[1]) end
if ARGV[4] ~= '' then redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5]) else redis.call('ZREM', KEYS[2], ARGV[5]) end
return 1
"""


def expiry_ms(t: float | None) -> str:
    return "0" if t is None else str(int(t * 1000) + 1)


def score(t: float | None) -> str:
    return "" if t is None else repr(float(t))


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

    @property
    def connected(self) -> bool:
        return self._client is not None

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
            raise StateUnavailable.observed(self.where, str(e) or type(e).__name__) from None

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            with contextlib.suppress(Exception):
                await client.aclose()


class RedisRecords:
    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn

    def _key(self, ns: str, key: str) -> str:
        return f"{self.conn.prefix}{ns}:{key}"

    def _due(self, ns: str) -> str:
        return f"{self.conn.prefix}{ns}:~due"

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        keys, args = (self._key(ns, key), self._due(ns)), (data, expiry_ms(expires_at), score(due), key)
        done = await self.conn.call(lambda r: r.eval(CREATE_SCRIPT, 2, *keys, *args))
        return int(done) == 1

    async def get(self, ns: str, key: str) -> Versioned | None:
        k = self._key(ns, key)
        v, d = await self.conn.call(lambda r: r.hmget(k, ["v", "d"]))
        return None if v is None or not isinstance(d, bytes) else Versioned(d, int(v))

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        keys = (self._key(ns, key), self._due(ns))
        args = (str(expected_version), data, expiry_ms(expires_at), score(due), key)
        done = await self.conn.call(lambda r: r.eval(SWAP_SCRIPT, 2, *keys, *args))
        return int(done) == 1

    async def delete(self, ns: str, key: str) -> bool:
        k, due = self._key(ns, key), self._due(ns)

        async def op(r: aioredis.Redis) -> int:
            async with r.pipeline(transaction=True) as pipe:
                pipe.delete(k)
                pipe.zrem(due, key)
                n, _ = await pipe.execute()
            return int(n)

        return await self.conn.call(op) == 1

    async def due_by(self, ns: str, before: float, limit: int = 100) -> list[str]:
        due = self._due(ns)

        async def op(r: aioredis.Redis) -> list[str]:
            raw = await r.zrangebyscore(due, "-inf", f"({before!r}", start=0, num=limit)
            keys = [i.decode() if isinstance(i, bytes) else str(i) for i in raw]
            if not keys:
                return keys
            async with r.pipeline(transaction=False) as pipe:
                for k in keys:
                    pipe.exists(self._key(ns, k))
                alive = await pipe.execute()
            gone = [k for k, n in zip(keys, alive, strict=True) if not n]
            if gone:  # records that expired natively leave their due entry behind
                await r.zrem(due, *gone)
            return [k for k, n in zip(keys, alive, strict=True) if n]

        return await self.conn.call(op)

    async def purge(self, now: float) -> int:
        return 0  # Redis expires records itself (PEXPIREAT)

    async def aclose(self) -> None:
        await self.conn.aclose()


ORIGIN_LEN = 16


def new_origin() -> bytes:
    """This process's bus origin: the prefix of every message it publishes, so it can skip its own."""
    return secrets.token_hex(ORIGIN_LEN // 2).encode()


def deliver_framed(fanout: Fanout, prefix: str, origin: bytes, channel: str, data: bytes) -> None:
    """Hand the payload of a bus message on `channel` to `fanout`'s readers of its topic, unless it is
    malformed (not under `prefix`, shorter than an origin) or this process's own."""
    if not channel.startswith(prefix) or len(data) < ORIGIN_LEN:
        log.warning("ignored a malformed bus message on %s", channel)
        return
    if data[:ORIGIN_LEN] != origin:
        fanout.deliver(channel[len(prefix):], data[ORIGIN_LEN:])


class RedisBus:
    """Pub/sub: one pattern subscription per process (every topic of this prefix), started by the first
    reader; a message is this process's origin followed by the payload, so a process skips its own."""

    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self._channel_prefix = f"{conn.prefix}bus:"
        self._fanout = Fanout()
        self._origin = new_origin()
        self._reader: asyncio.Task[None] | None = None
        self._live: asyncio.Event | None = None

    async def publish(self, topic: str, payload: bytes) -> None:
        self._fanout.deliver(topic, payload)
        channel, msg = self._channel_prefix + topic, self._origin + payload
        try:
            await self.conn.call(lambda r: r.publish(channel, msg))
        except StateUnavailable as e:
            log.warning("a %s message was not sent to other instances: %s", topic, e.message)

    def subscribe(self, topic: str) -> SharedSubscription:
        sub = SharedSubscription(self._fanout.subscribe(topic), self.live)
        if self._reader is None or self._reader.done():
            self._live = asyncio.Event()
            self._reader = asyncio.get_running_loop().create_task(self._read(self._live))
        return sub

    async def live(self) -> None:
        live = self._live
        if live is None:
            return
        try:
            await asyncio.wait_for(live.wait(), self.conn.timeout_s * 2)
        except TimeoutError:
            raise StateUnavailable.observed(self.conn.where, "cannot subscribe to the bus") from None

    def _deliver(self, channel: bytes | str, data: bytes) -> None:
        name = channel.decode() if isinstance(channel, bytes) else channel
        deliver_framed(self._fanout, self._channel_prefix, self._origin, name, data)

    async def _read(self, live: asyncio.Event) -> None:
        backoff = 0.1
        while True:
            pubsub = None
            try:
                pubsub = self.conn.client().pubsub(ignore_subscribe_messages=True)
                await asyncio.wait_for(pubsub.psubscribe(self._channel_prefix + "*"), self.conn.timeout_s)
                live.set()
                backoff = 0.1
                while self._fanout.listening:
                    msg = await pubsub.get_message(timeout=1.0)
                    if msg is not None and msg.get("type") == "pmessage" and isinstance(msg.get("data"), bytes):
                        self._deliver(msg["channel"], msg["data"])
                return  # nobody listening any more; the next subscribe starts a new reader
            except _DOWN as e:
                live.clear()
                log.warning("bus messages from other instances paused (%s: %s); reconnecting",
                            self.conn.where, str(e) or type(e).__name__)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await cast(Any, pubsub).aclose()  # untyped before redis-py 8.2

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None


def open_bundle(url: str, query: dict[str, str]) -> StateBundle:
    conn = RedisConnection(url, timeout_s=float(query.get("timeout", 2.0)),
                           prefix=query.get("prefix", "mcp-stateless:"))
    records, bus = RedisRecords(conn), RedisBus(conn)
    return StateBundle(url, records, bus, HandleStore(records), ChangeEventBus(bus), shared=True,
                       multiprocess=True)
