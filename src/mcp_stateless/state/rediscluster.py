"""The Redis Cluster engine (also a Valkey cluster): `redis-cluster://HOST:PORT[,HOST:PORT…]`, on redis-py's
asyncio `RedisCluster` (the redis extra; no other client).

Keys. A record and the due set its script updates must share a hash slot, or the cluster refuses the script
(CROSSSLOT). Tagging by namespace alone would put a whole namespace (every task) on one shard, so each key
goes to one of `buckets` (16) groups per namespace by a stable hash of the key, and the hash tag is
`{ns:bucket}`: the record `<prefix>{ns:b}:key` and the due set `<prefix>{ns:b}:~due` share a slot, while a
namespace spreads over every shard. The due scan asks each bucket's set (concurrently) and merges.

Bus. Sharded pub/sub (`SSUBSCRIBE`/`SPUBLISH`) has no pattern form, so every topic is its own shard
channel `<prefix>bus:<topic>`, which hashes to some shard: topics spread over the masters and a message
travels only inside its shard (classic cluster pub/sub copies every message to every node). Each master that
owns one of this process's topics gets one pub/sub connection and one reader; a subscription is `ready()`
once its master confirmed the `SSUBSCRIBE`. When a master dies or a slot moves, the reader re-reads the
topology and subscribes on the new owner; what is published meanwhile is lost (the bus is at most once,
the record store is the truth).

Failover. MOVED/ASK and topology changes are followed by the client. When a master is killed, the requests
whose keys it owned fail with `StateUnavailable` (bounded by the timeouts) until its replica is promoted
(`cluster-node-timeout` plus an election: about 4 s with 2000 ms), then they succeed again. Replication is
asynchronous: a write acknowledged by the master in the last moments before it died may not have reached the
replica and is lost. `?wait=N` narrows that window: every write is followed by `WAIT N timeout` on the
same connection, so it is acknowledged only once N replicas have it (or a warning is logged when they do
not confirm within `wait_timeout` ms); see docs/deployment.md.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast
from urllib.parse import unquote

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ClusterDownError, MovedError, RedisClusterException, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .base import STATE_ERRORS, StateBundle, StateUnavailable, Versioned, redact
from .events import ChangeEventBus, Fanout, SharedSubscription
from .handles import HandleStore
from .redisdb import CREATE_SCRIPT, SWAP_SCRIPT, deliver_framed, expiry_ms, new_origin, score

log = logging.getLogger("mcp_stateless.state")

T = TypeVar("T")
# What a cluster in the middle of a failover answers besides a dead socket: no owner for the slot yet
# (CLUSTERDOWN), a migrating slot (TRYAGAIN), or no reachable node at all (RedisClusterException).
_DOWN = (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError, ClusterDownError, TryAgainError,
         RedisClusterException)

# KEYS: record, due set. ARGV: key.
_DELETE = """
local n = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return n
"""

# KEYS: due set, then the tag prefix of the bucket's records. ARGV: before (exclusive), limit.
# Returns [key, score, key, score, ...] of live records; drops entries whose record expired natively.
_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
local out = {}
for i = 1, #due, 2 do
  if redis.call('EXISTS', KEYS[2] .. due[i]) == 1 then
    out[#out + 1] = due[i]
    out[#out + 1] = due[i + 1]
  else
    redis.call('ZREM', KEYS[1], due[i])
  end
end
return out
"""

DEFAULT_BUCKETS = 16


def parse_seeds(netloc: str) -> tuple[list[tuple[str, int]], str | None, str | None]:
    """(seed nodes, username, password) of `user:password@host:port,host:port`."""
    cred, _, hosts = netloc.rpartition("@")
    user, _, password = cred.partition(":")
    seeds: list[tuple[str, int]] = []
    for item in hosts.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"invalid seed node {item!r} in a redis-cluster:// URL: write HOST:PORT[,HOST:PORT…]")
        seeds.append((host.strip("[]"), int(port)))
    return seeds, unquote(user) or None, unquote(password) or None


class RedisClusterConnection:
    """A `RedisCluster` client per event loop, created on first use, with bounded timeouts. The client
    follows MOVED/ASK and re-reads the topology after errors; `call` bounds the whole exchange, so a
    shard without a master fails the request instead of hanging it."""

    def __init__(self, url: str, seeds: list[tuple[str, int]], *, username: str | None = None,
                 password: str | None = None, timeout_s: float = 2.0, prefix: str = "mcp-stateless:",
                 buckets: int = DEFAULT_BUCKETS, wait_replicas: int = 0, wait_timeout_ms: int = 1000) -> None:
        self.url = url
        self.where = f"redis-cluster {redact(url)}"
        self.seeds = seeds
        self.username, self.password = username, password
        self.timeout_s = timeout_s
        self.prefix = prefix
        self.buckets = buckets
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._client: RedisCluster | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._initialized: asyncio.Lock | None = None
        # ?wait=N: one connection per master for writes, so that WAIT covers the write before it
        self._direct: dict[str, tuple[aioredis.Redis, asyncio.Lock]] = {}

    @property
    def connected(self) -> bool:
        return self._client is not None

    def node_client(self, host: str, port: int, *, extra_s: float = 0.0, **kw: Any) -> aioredis.Redis:
        """A plain client of one node (pub/sub, WAIT), with this engine's timeouts and credentials."""
        return aioredis.Redis(host=host, port=port, username=self.username, password=self.password,
                              socket_timeout=self.timeout_s + extra_s, socket_connect_timeout=self.timeout_s,
                              retry=Retry(NoBackoff(), 0), **kw)  # the caller decides where to retry

    def client(self) -> RedisCluster:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = RedisCluster(
                startup_nodes=[ClusterNode(h, p) for h, p in self.seeds],
                username=self.username, password=self.password,
                socket_timeout=self.timeout_s, socket_connect_timeout=self.timeout_s,
                retry=Retry(NoBackoff(), 1), health_check_interval=30)
            self._loop = loop
            self._direct = {}
            self._initialized = None
        return self._client

    async def ready(self) -> RedisCluster:
        """The client, its topology read once: concurrent first commands on a fresh client each start
        connecting to the same nodes and break each other's connections (seen with redis-py 8.1)."""
        client = self.client()
        if self._initialized is None:
            self._initialized = lock = asyncio.Lock()
            async with lock:
                try:
                    await client.initialize()
                except BaseException:
                    self._initialized = None  # the next call tries again
                    raise
        elif self._initialized.locked():
            async with self._initialized:
                pass
        return client

    async def call(self, fn: Callable[[RedisCluster], Awaitable[T]], *, extra_s: float = 0.0) -> T:
        async def run() -> T:
            return await fn(await self.ready())

        try:
            return await asyncio.wait_for(run(), self.timeout_s * 3 + extra_s)
        except _DOWN as e:
            raise StateUnavailable.observed(self.where, str(e) or type(e).__name__) from None

    async def write(self, key: str, script: str, keys: tuple[str, ...], args: tuple[Any, ...]) -> Any:
        """Run a write script on the key's slot; with `?wait=N`, also wait until N replicas have it."""
        if not self.wait_replicas:
            return await self.call(lambda r: r.eval(script, len(keys), *keys, *args))

        async def durable(r: RedisCluster) -> Any:
            for attempt in range(3):
                if not r.nodes_manager.slots_cache:
                    await r.initialize()
                node = r.get_node_from_key(key)
                if node is None:
                    raise ClusterDownError(f"no master for the slot of {key}")
                direct, lock = self._direct.get(node.name) or (None, None)
                if direct is None or lock is None:
                    # WAIT blocks up to wait_timeout on the server: the socket waits that much longer
                    direct = self.node_client(node.host, int(node.port), extra_s=self.wait_timeout_ms / 1000,
                                              single_connection_client=True)
                    lock = asyncio.Lock()
                    self._direct[node.name] = (direct, lock)
                try:
                    async with lock:  # WAIT counts this connection's writes: nobody else's in between
                        done = await direct.eval(script, len(keys), *keys, *args)
                        acked = int(await direct.wait(self.wait_replicas, self.wait_timeout_ms))
                except (MovedError, ResponseError) as e:
                    moved = isinstance(e, MovedError) or str(e).startswith(("MOVED", "ASK"))
                    if not moved or attempt == 2:
                        raise
                    # the slot moved (a failover, resharding): learn the new owner and write there
                    await r.nodes_manager.initialize()
                    continue
                except (RedisConnectionError, RedisTimeoutError, OSError):
                    dead = self._direct.pop(node.name, None)
                    if dead is not None:
                        with contextlib.suppress(Exception):
                            await dead[0].aclose()
                    if attempt == 2:
                        raise
                    await r.nodes_manager.initialize()  # the master may be gone: learn its successor
                    continue
                if acked < self.wait_replicas:
                    STATE_ERRORS["redis-cluster-wait"] += 1
                    log.warning("a write to %s reached %d of %d replicas within %d ms: a failover now may lose it",
                                node.name, acked, self.wait_replicas, self.wait_timeout_ms)
                return done
            raise ClusterDownError("the slot kept moving")

        return await self.call(durable, extra_s=self.wait_timeout_ms / 1000 * 2)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        direct, self._direct = self._direct, {}
        if self._loop is asyncio.get_running_loop():
            for r, _ in direct.values():
                with contextlib.suppress(Exception):
                    await r.aclose()
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.aclose()


class RedisClusterRecords:
    def __init__(self, conn: RedisClusterConnection) -> None:
        self.conn = conn

    def _tag(self, ns: str, bucket: int) -> str:
        return f"{self.conn.prefix}{{{ns}:{bucket}}}:"

    def _bucket(self, key: str) -> int:
        return zlib.crc32(key.encode()) % self.conn.buckets  # stable in every process (hash() is salted)

    def _keys(self, ns: str, key: str) -> tuple[str, str]:
        tag = self._tag(ns, self._bucket(key))
        return tag + key, tag + "~due"

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        keys = self._keys(ns, key)
        done = await self.conn.write(keys[0], CREATE_SCRIPT, keys, (data, expiry_ms(expires_at), score(due), key))
        return int(done) == 1

    async def get(self, ns: str, key: str) -> Versioned | None:
        k = self._keys(ns, key)[0]
        v, d = await self.conn.call(lambda r: r.hmget(k, ["v", "d"]))
        return None if v is None or not isinstance(d, bytes) else Versioned(d, int(v))

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        keys = self._keys(ns, key)
        args = (str(expected_version), data, expiry_ms(expires_at), score(due), key)
        return int(await self.conn.write(keys[0], SWAP_SCRIPT, keys, args)) == 1

    async def delete(self, ns: str, key: str) -> bool:
        keys = self._keys(ns, key)
        return int(await self.conn.write(keys[0], _DELETE, keys, (key,))) == 1

    async def due_by(self, ns: str, before: float, limit: int = 100) -> list[str]:
        async def bucket(r: RedisCluster, b: int) -> list[tuple[float, str]]:
            tag = self._tag(ns, b)
            raw = await r.eval(_DUE, 2, tag + "~due", tag, repr(float(before)), limit)
            items = [i.decode() if isinstance(i, bytes) else str(i) for i in raw]
            return [(float(items[i + 1]), items[i]) for i in range(0, len(items), 2)]

        async def op(r: RedisCluster) -> list[str]:
            found = await asyncio.gather(*(bucket(r, b) for b in range(self.conn.buckets)))
            merged = sorted(pair for part in found for pair in part)
            return [k for _, k in merged[:limit]]

        return await self.conn.call(op)

    async def purge(self, now: float) -> int:
        return 0  # Redis expires records itself (PEXPIREAT)

    async def aclose(self) -> None:
        await self.conn.aclose()


class _NodeReader:
    """One master's pub/sub connection: subscribes to the shard channels `want` names (changed by the bus
    between reads, on the reader's own task, so one coroutine owns the connection) and delivers messages."""

    def __init__(self, bus: RedisClusterBus, name: str, host: str, port: int) -> None:
        self.bus, self.name = bus, name
        self.want: set[str] = set()
        self.subscribed: set[str] = set()
        self._dropping: collections.Counter[str] = collections.Counter()  # our own SUNSUBSCRIBEs unconfirmed
        self.client = bus.conn.node_client(host, port)
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        pubsub = self.client.pubsub()
        timeout = self.bus.conn.timeout_s
        try:
            while True:
                add, drop = self.want - self.subscribed, self.subscribed - self.want
                for channel in add:  # one at a time: channels of several slots in one SSUBSCRIBE are CROSSSLOT
                    await asyncio.wait_for(pubsub.ssubscribe(channel), timeout)
                    self.subscribed.add(channel)
                if drop:
                    self.subscribed -= drop
                    for channel in drop:
                        self.bus.unready(channel)
                    for channel in drop:
                        self._dropping[channel] += 1
                        await asyncio.wait_for(pubsub.sunsubscribe(channel), timeout)
                if not self.subscribed:
                    await asyncio.sleep(0.1)
                    continue
                msg = await pubsub.get_message(timeout=0.1)
                if msg is None:
                    continue
                kind, channel = msg.get("type"), msg.get("channel")
                name = channel.decode() if isinstance(channel, bytes) else str(channel)
                if kind == "smessage" and isinstance(msg.get("data"), bytes):
                    self.bus.deliver(name, msg["data"])
                elif kind == "ssubscribe":
                    self.bus.mark_ready(name)
                elif kind == "sunsubscribe" and self._dropping[name] > 0:
                    self._dropping[name] -= 1
                    if not self._dropping[name]:
                        del self._dropping[name]
                elif kind == "sunsubscribe" and name in self.subscribed:
                    # not ours: the server dropped it because its slot moved to another master
                    raise RedisConnectionError(f"shard channel {name} moved off {self.name}")
        finally:
            for channel in self.subscribed:
                self.bus.unready(channel)
            with contextlib.suppress(Exception):
                await cast(Any, pubsub).aclose()  # untyped before redis-py 8.2
            with contextlib.suppress(Exception):
                await self.client.aclose()

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task


class RedisClusterBus:
    """Sharded pub/sub: a shard channel per topic, one reader per master that owns a topic of this
    process, kept in line with the topics this process listens to and with the cluster's topology."""

    def __init__(self, conn: RedisClusterConnection) -> None:
        self.conn = conn
        self._channel_prefix = f"{conn.prefix}bus:"
        self._fanout = Fanout(on_change=self._wake)
        self._origin = new_origin()
        self._ready: dict[str, asyncio.Event] = {}
        self._readers: dict[str, _NodeReader] = {}
        self._manager: asyncio.Task[None] | None = None
        self._changed: asyncio.Event | None = None

    def _channel(self, topic: str) -> str:
        return self._channel_prefix + topic

    async def publish(self, topic: str, payload: bytes) -> None:
        self._fanout.deliver(topic, payload)
        channel, msg = self._channel(topic), self._origin + payload
        try:
            await self.conn.call(lambda r: r.spublish(channel, msg))
        except StateUnavailable as e:
            log.warning("a %s message was not sent to other instances: %s", topic, e.message)

    def subscribe(self, topic: str) -> SharedSubscription:
        if self._manager is None or self._manager.done():
            self._changed = asyncio.Event()
            self._manager = asyncio.get_running_loop().create_task(self._manage(self._changed))
        sub = SharedSubscription(self._fanout.subscribe(topic), lambda: self._wait_ready(topic))
        return sub

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def _event(self, channel: str) -> asyncio.Event:
        event = self._ready.get(channel)
        if event is None:
            event = self._ready[channel] = asyncio.Event()
        return event

    def mark_ready(self, channel: str) -> None:
        if self._fanout.has(channel[len(self._channel_prefix):]):  # a late confirmation keeps no entry
            self._event(channel).set()

    def unready(self, channel: str) -> None:
        """The channel is no longer subscribed on the server (dropped, or its master is gone)."""
        if channel[len(self._channel_prefix):] not in self._fanout.topics:
            self._ready.pop(channel, None)  # nobody reads it any more (per-session topics come and go)
        elif (event := self._ready.get(channel)) is not None and event.is_set():
            self._ready[channel] = asyncio.Event()  # a reader's ready() waits for the resubscription
        self._wake()

    async def _wait_ready(self, topic: str) -> None:
        try:
            await asyncio.wait_for(self._event(self._channel(topic)).wait(), self.conn.timeout_s * 2)
        except TimeoutError:
            raise StateUnavailable.observed(self.conn.where, f"cannot subscribe to the bus topic {topic!r}") from None

    def deliver(self, channel: str, data: bytes) -> None:
        deliver_framed(self._fanout, self._channel_prefix, self._origin, channel, data)

    async def _place(self, stale: bool) -> None:
        """Give each master's reader the channels whose slots it owns now."""
        if not self._fanout.listening:
            for reader in self._readers.values():
                await reader.close()
            self._readers = {}
            return
        r = await self.conn.ready()
        if stale or not r.nodes_manager.slots_cache:
            await asyncio.wait_for(r.nodes_manager.initialize(), self.conn.timeout_s * 2)
        want: dict[str, tuple[ClusterNode, set[str]]] = {}
        for topic in self._fanout.topics:
            channel = self._channel(topic)
            node = r.get_node_from_key(channel)
            if node is None:
                raise ClusterDownError(f"no master for the slot of {channel}")
            want.setdefault(node.name, (node, set()))[1].add(channel)
        for name, reader in list(self._readers.items()):
            if name not in want:
                del self._readers[name]
                await reader.close()
        wanted = {c for _, channels in want.values() for c in channels}
        for channel in [c for c in self._ready if c not in wanted]:
            del self._ready[channel]  # topics that left before (or after) they were subscribed: memory bounded
        for name, (node, channels) in want.items():
            if name not in self._readers:
                self._readers[name] = _NodeReader(self, name, node.host, int(node.port))
            self._readers[name].want = channels

    async def _manage(self, changed: asyncio.Event) -> None:
        stale, backoff = False, 0.1
        try:
            # Runs until aclose, idle while nobody listens: a manager that stopped when the last reader
            # left could miss the subscribe that comes while it winds down.
            while True:
                changed.clear()
                try:
                    await self._place(stale)
                    stale, backoff = False, 0.1
                except _DOWN as e:
                    stale = True
                    log.warning("bus messages from other instances paused (%s: %s); retrying",
                                self.conn.where, str(e) or type(e).__name__)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)
                    continue
                tasks = [r.task for r in self._readers.values()]
                waker = asyncio.ensure_future(changed.wait())
                try:
                    await asyncio.wait([waker, *tasks], timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waker.cancel()
                for name, reader in list(self._readers.items()):
                    if reader.task.done():  # its master died or a slot moved: re-read the topology
                        del self._readers[name]
                        exc = reader.task.exception() if not reader.task.cancelled() else None
                        log.warning("bus reader of %s stopped (%s); resubscribing on the current owner",
                                    name, exc)
                        stale = True
                if stale:
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)
        finally:
            readers, self._readers = self._readers, {}
            for reader in readers.values():
                await reader.close()

    async def aclose(self) -> None:
        if self._manager is not None:
            self._manager.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._manager
            self._manager = None


def open_bundle(url: str, query: dict[str, str]) -> StateBundle:
    rest = url.split("://", 1)[1]
    netloc = rest.split("/", 1)[0].split("?", 1)[0]
    seeds, user, password = parse_seeds(netloc)
    numbers: dict[str, int] = {}
    for name, default, low in (("buckets", DEFAULT_BUCKETS, 1), ("wait", 0, 0), ("wait_timeout", 1000, 1)):
        raw = query.get(name, str(default))
        if not raw.isdigit() or int(raw) < low:
            raise ValueError(f"invalid {name}={raw!r} in state URL: an integer of at least {low}")
        numbers[name] = int(raw)
    conn = RedisClusterConnection(url, seeds, username=user, password=password,
                                  timeout_s=float(query.get("timeout", 2.0)),
                                  prefix=query.get("prefix", "mcp-stateless:"), buckets=numbers["buckets"],
                                  wait_replicas=numbers["wait"], wait_timeout_ms=numbers["wait_timeout"])
    records, bus = RedisClusterRecords(conn), RedisClusterBus(conn)
    return StateBundle(url, records, bus, HandleStore(records), ChangeEventBus(bus), shared=True,
                       multiprocess=True)
