"""What only the shared engines must show, on real servers: compare-and-set from several processes at once,
the Redis Cluster's key and topic layout and a master killed with kill -9, Postgres's schema migration and a
Postgres outage with recovery. Every test here starts processes (slow)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from mcp_stateless.protocol.errors import INTERNAL_ERROR
from mcp_stateless.state import StateUnavailable, Versioned, open_state
from services import PostgresServer, RedisCluster, redis_server_exe, valkey_server

pytestmark = pytest.mark.slow

WORKER = """
import asyncio, sys
from mcp_stateless.state import open_state

async def main(url, n):
    b = open_state(url)
    conflicts = 0
    for _ in range(n):
        while True:
            cur = await b.records.get("ns", "counter")
            if await b.records.swap("ns", "counter", cur.version, str(int(cur.data) + 1).encode()):
                break
            conflicts += 1
    await b.aclose()
    print(conflicts)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


async def test_compare_and_set_from_four_processes_loses_no_update(shared_state_url: str) -> None:
    b = open_state(shared_state_url)
    try:
        await b.records.create("ns", "counter", b"0")
        procs, each = 4, 50
        workers = [subprocess.Popen([sys.executable, "-c", WORKER, shared_state_url, str(each)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(procs)]
        outs = [w.communicate(timeout=120) for w in workers]
        assert [w.returncode for w in workers] == [0] * procs, [e.decode()[-800:] for _, e in outs]
        assert await b.records.get("ns", "counter") == Versioned(str(procs * each).encode(), procs * each + 1)
    finally:
        await b.aclose()


# ----------------------------------------------------------------------------- Redis Cluster
def _owner(cluster: RedisCluster, key: str) -> int:
    """The port of the master that owns `key`'s slot."""
    slot = int(subprocess.run(["redis-cli", "-p", str(cluster.nodes[0].port), "cluster", "keyslot", key],
                              capture_output=True, text=True, timeout=5).stdout)
    nodes = subprocess.run(["redis-cli", "-p", str(cluster.live_masters()[0].port), "cluster", "nodes"],
                           capture_output=True, text=True, timeout=5).stdout
    for line in nodes.splitlines():
        parts = line.split()
        if "master" not in parts[2] or "fail" in parts[2]:
            continue
        for rng in parts[8:]:
            lo, _, hi = rng.partition("-")
            if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                return int(parts[1].split("@")[0].rsplit(":", 1)[1])
    raise AssertionError(f"no master owns slot {slot}")


async def test_one_namespace_and_its_topics_spread_over_every_master(redis_cluster: RedisCluster) -> None:
    url = redis_cluster.isolated_url()
    b = open_state(url)
    try:
        prefix = url.split("prefix=", 1)[1]
        for i in range(16):
            await b.records.create("tasks", f"k{i}", b"x", due=float(i))
        # every record sits beside its bucket's due set (one slot: no CROSSSLOT), the buckets on every master
        owners = {_owner(redis_cluster, f"{prefix}{{tasks:{zlib.crc32(f'k{i}'.encode()) % 16}}}:k{i}")
                  for i in range(16)}
        assert len(owners) == 3
        assert await b.records.due_by("tasks", 100.0, limit=5) == ["k0", "k1", "k2", "k3", "k4"]
        topics = {_owner(redis_cluster, f"{prefix}bus:session:{i}") for i in range(12)}
        assert len(topics) == 3  # sharded pub/sub: per-topic channels, spread over the shards
    finally:
        await b.aclose()


@pytest.mark.parametrize("server", ["redis", "valkey"])
async def test_a_killed_master_is_replaced_and_the_store_serves_again(tmp_path: Path, server: str) -> None:
    """kill -9 of a master: requests on its slots fail with a retryable -32603 (never hang) until its
    replica is promoted, then every record acknowledged with ?wait=1 is there and new writes succeed
    within 10 s of the promotion; a bus reader on that shard gets messages again."""
    cluster = RedisCluster(tmp_path, exe=redis_server_exe() if server == "redis" else valkey_server()).start()
    b = open_state(cluster.url + "?wait=1&timeout=1")
    try:
        for i in range(60):
            assert await b.records.create("ns", f"k{i}", f"v{i}".encode())
        prefix = "mcp-stateless:"
        victim_port = _owner(cluster, f"{prefix}{{ns:{zlib.crc32(b'k0') % 16}}}:k0")
        topic = next(f"t{i}" for i in range(100) if _owner(cluster, f"{prefix}bus:t{i}") == victim_port)
        sub = b.bus.subscribe(topic)
        await sub.ready()
        victim = next(n for n in cluster.nodes if n.port == victim_port)
        victim.kill(signal.SIGKILL)
        killed = time.monotonic()
        failures = 0
        with pytest.raises(StateUnavailable) as down:
            await b.records.get("ns", "k0")
        assert down.value.code == INTERNAL_ERROR and down.value.data == {"retryable": True}
        promoted = None
        while time.monotonic() - killed < 30:
            if len(cluster.live_masters()) == 3 and promoted is None:
                promoted = time.monotonic()
            try:
                got = await b.records.get("ns", "k0")
                break
            except StateUnavailable:
                failures += 1
                await asyncio.sleep(0.2)
        else:
            raise AssertionError("the store did not serve k0 again within 30 s of the kill")
        served = time.monotonic()
        if promoted is None:
            promoted = served
        assert got == Versioned(b"v0", 1)
        assert served - promoted < 10, (served - promoted)
        # exactly what was kept: every record acknowledged before the kill (each confirmed by a replica)
        assert [await b.records.get("ns", f"k{i}") for i in range(60)] == [
            Versioned(f"v{i}".encode(), 1) for i in range(60)]
        assert await b.records.swap("ns", "k0", 1, b"after")
        deadline = time.monotonic() + 10
        while True:  # the reader resubscribes on the promoted replica
            other = open_state(cluster.url)
            await other.bus.publish(topic, b"after failover")
            await other.aclose()
            if await sub.get(0.5) == b"after failover":
                break
            assert time.monotonic() < deadline, "the bus reader did not come back on the new master"
        sub.close()
        assert failures >= 1
    finally:
        await b.aclose()
        cluster.stop()


def test_redis_cluster_urls_are_checked() -> None:
    with pytest.raises(ValueError, match="write HOST:PORT"):
        open_state("redis-cluster://127.0.0.1")
    with pytest.raises(ValueError, match="an integer of at least 1"):
        open_state("redis-cluster://127.0.0.1:7000?buckets=0")
    with pytest.raises(ValueError, match="an integer of at least 0"):
        open_state("redis-cluster://127.0.0.1:7000?wait=many")


# ----------------------------------------------------------------------------- Postgres
async def test_the_schema_is_created_once_versioned_and_a_newer_one_is_refused(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.isolated_url()
    schema = url.split("schema=", 1)[1]
    a, b = open_state(url), open_state(url)
    try:
        # two instances starting together: the advisory lock makes one migrate, the other see it done
        await asyncio.gather(a.records.create("ns", "x", b"1"), b.records.create("ns", "y", b"2"))
        versions = subprocess.run(["psql", postgres_server.url, "-Atc", f"SELECT version FROM {schema}.schema_version"],
                                  capture_output=True, text=True, timeout=10).stdout.split()
        assert versions == ["1"]
        subprocess.run(["psql", postgres_server.url, "-c", f"INSERT INTO {schema}.schema_version VALUES (99)"],
                       check=True, capture_output=True, timeout=10)
    finally:
        await a.aclose()
        await b.aclose()
    c = open_state(url)
    try:
        with pytest.raises(StateUnavailable, match="is at version 99, newer than this release's 1"):
            await c.records.get("ns", "x")
    finally:
        await c.aclose()


def test_postgres_urls_are_checked() -> None:
    with pytest.raises(ValueError, match="lower-case letters"):
        open_state("postgresql://u@127.0.0.1:1/db?schema=Robert'); DROP")
    with pytest.raises(ValueError, match="pool_min is larger than pool_max"):
        open_state("postgresql://u@127.0.0.1:1/db?pool_min=5&pool_max=2")


async def test_postgres_down_fails_clearly_and_a_restart_is_used_again() -> None:
    server = PostgresServer().start()
    url = server.isolated_url("timeout=1&pool_max=4")
    b = open_state(url)
    try:
        await b.records.create("ns", "kept", b"before")
        sub = b.bus.subscribe("t")
        await sub.ready()
        server.stop()
        started = time.monotonic()
        with pytest.raises(StateUnavailable) as down:
            await b.records.get("ns", "kept")
        assert time.monotonic() - started < 5  # bounded, never a hang
        assert down.value.code == INTERNAL_ERROR and "postgres" in down.value.message
        await b.bus.publish("t", b"lost")  # logged, not raised: the bus is at most once
        server.start()  # the same port and data directory
        assert await b.records.get("ns", "kept") == Versioned(b"before", 1)
        assert await b.records.swap("ns", "kept", 1, b"after")
        other = open_state(url)
        deadline = time.monotonic() + 15
        while True:  # the listener reconnects by itself
            await other.bus.publish("t", b"back")
            if await sub.get(0.5) == b"back":
                break
            assert time.monotonic() < deadline, "the LISTEN connection did not come back"
        await other.aclose()
        sub.close()
    finally:
        await b.aclose()
        server.remove()


async def test_the_due_scan_skips_a_row_another_instance_is_claiming(postgres_server: PostgresServer) -> None:
    import psycopg

    url = postgres_server.isolated_url()
    schema = url.split("schema=", 1)[1]
    b = open_state(url)
    try:
        await b.records.create("tasks", "busy", b"", due=1.0)
        await b.records.create("tasks", "free", b"", due=2.0)
        assert await b.records.due_by("tasks", 10.0) == ["busy", "free"]
        async with await psycopg.AsyncConnection.connect(postgres_server.url) as other, other.transaction():
            # another instance's claim in flight: its row is locked until it commits
            await other.execute(f"SELECT 1 FROM {schema}.records WHERE key = 'busy' FOR UPDATE")
            assert await b.records.due_by("tasks", 10.0) == ["free"]  # skipped, not waited for
        assert await b.records.due_by("tasks", 10.0) == ["busy", "free"]
    finally:
        await b.aclose()


async def test_wait_without_a_replica_to_confirm_keeps_the_write_and_warns(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """?wait=1 when the key's master has no live replica: WAIT times out after wait_timeout, the write
    stands (it is on the master), a warning names the shortfall and the engine's error counter grows."""
    from mcp_stateless.state.base import STATE_ERRORS

    cluster = RedisCluster(tmp_path).start()
    # the confirmed write gets a generous timeout: under CI load a replica's ACK can take longer than 300 ms
    confirming = open_state(cluster.url + "?wait=1&wait_timeout=10000")
    b = open_state(cluster.url + "?wait=1&wait_timeout=300")
    try:
        assert await confirming.records.create("ns", "k", b"1")  # confirmed by the replica: no warning
        assert "replicas within" not in caplog.text
        owner = _owner(cluster, f"mcp-stateless:{{ns:{zlib.crc32(b'k') % 16}}}:k")
        replica = next(n for n in cluster.nodes if n.proc is not None and n.port != owner
                       and _redis_replica_of(n.port) == owner)
        replica.kill(signal.SIGKILL)
        before = STATE_ERRORS["redis-cluster-wait"]
        started = time.monotonic()
        assert await b.records.swap("ns", "k", 1, b"2")
        assert 0.25 < time.monotonic() - started < 3  # waited wait_timeout for the replica, then went on
        assert STATE_ERRORS["redis-cluster-wait"] == before + 1
        assert "reached 0 of 1 replicas within 300 ms" in caplog.text
        assert await b.records.get("ns", "k") == Versioned(b"2", 2)
    finally:
        await confirming.aclose()
        await b.aclose()
        cluster.stop()


def _redis_replica_of(port: int) -> int | None:
    """The master port a replica replicates from (None for a master)."""
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "replication"], capture_output=True, text=True,
                         timeout=5).stdout
    info = dict(line.strip().split(":", 1) for line in out.splitlines() if ":" in line)
    return int(info["master_port"]) if info.get("role") == "slave" else None


async def test_per_session_topics_that_come_and_go_leave_nothing_behind(redis_cluster: RedisCluster) -> None:
    """2025 sessions each have a topic: 200 of them opened and closed (some before the server confirmed
    them) leave no subscription, readiness entry or per-master reader behind, and the bus still works."""
    from mcp_stateless.state.rediscluster import RedisClusterBus

    url = redis_cluster.isolated_url()
    b = open_state(url)
    bus = b.bus
    assert isinstance(bus, RedisClusterBus)
    try:
        for i in range(200):
            sub = bus.subscribe(f"session:{i}")
            if i % 2:
                await sub.ready()
                sub.close()
            else:  # a reader that gives up waiting: its session ended before the subscription was placed
                waiting = asyncio.ensure_future(sub.ready())
                await asyncio.sleep(0)
                sub.close()
                waiting.cancel()
        deadline = time.monotonic() + 10
        while bus._ready or bus._readers:
            assert time.monotonic() < deadline, (len(bus._ready), list(bus._readers))
            await asyncio.sleep(0.1)
        live = bus.subscribe("changes")
        await live.ready()
        other = open_state(url)
        await other.bus.publish("changes", b"still here")
        assert await live.get(3.0) == b"still here"
        live.close()
        await other.aclose()
    finally:
        await b.aclose()


async def test_a_redis_cluster_leaves_expiry_to_redis_and_purges_nothing(redis_cluster: RedisCluster) -> None:
    b = open_state(redis_cluster.isolated_url())
    try:
        await b.records.create("ns", "short", b"x", expires_at=time.time() + 0.2)
        await asyncio.sleep(0.4)
        assert await b.records.get("ns", "short") is None  # expired by Redis itself
        assert await b.records.purge(time.time() + 10) == 0
    finally:
        await b.aclose()
