"""Redis engine edges the contract tests do not reach (found by mutation testing, docs/mutation.md): what a
delete leaves in the due set, the purge count, malformed and empty bus messages, a bus that cannot subscribe
failing its readers in bounded time, the reader giving its subscription back once nobody listens, and the
reader's reconnection pace through outages (on its own redis-server, which these tests stop and start)."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from mcp_stateless.state import open_state
from mcp_stateless.state.base import StateUnavailable
from mcp_stateless.state.redisdb import RedisBus, RedisConnection, RedisRecords
from services import RedisServer, free_port

ORIGIN = b"f" * 16  # another process's origin (ours is random hex of the same length)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


def _raw(server: RedisServer) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=5)


@pytest.mark.slow
async def test_a_delete_takes_the_key_out_of_its_namespaces_due_set(redis_server: RedisServer) -> None:
    prefix = "edges0:"
    conn = RedisConnection(redis_server.url, prefix=prefix)
    records = RedisRecords(conn)
    raw = _raw(redis_server)
    try:
        assert await records.create("ns", "a", b"x", due=time.time() - 1)
        assert raw.zrange(f"{prefix}ns:~due", 0, -1) == [b"a"]
        assert await records.delete("ns", "a")
        assert raw.zcard(f"{prefix}ns:~due") == 0 and raw.exists(f"{prefix}ns:a") == 0
        assert not await records.delete("ns", "a")
        assert await records.purge(time.time() + 10) == 0  # Redis expires records itself
    finally:
        raw.close()
        await records.aclose()


async def _bus(server: RedisServer, prefix: str, timeout_s: float = 2.0) -> RedisBus:
    return RedisBus(RedisConnection(server.url, prefix=prefix, timeout_s=timeout_s))


@pytest.mark.slow
async def test_bus_messages_of_exactly_an_origin_are_delivered_empty_and_shorter_ones_are_ignored_with_a_warning(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_stateless.state")
    bus = await _bus(redis_server, prefix="edges1:")
    raw = _raw(redis_server)
    try:
        sub = bus.subscribe("topic")
        await sub.ready()
        raw.publish("edges1:bus:topic", ORIGIN[:15])
        raw.publish("edges1:bus:topic", ORIGIN)  # another process's origin and an empty payload
        raw.publish("edges1:bus:topic", ORIGIN + b"after")
        assert await sub.get(5) == b""
        assert await sub.get(5) == b"after"
        assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "mcp_stateless.state"] == [
            ("WARNING", "ignored a malformed bus message on edges1:bus:topic")]
        sub.close()
    finally:
        raw.close()
        await bus.aclose()


@pytest.mark.slow
async def test_the_bus_accepts_channel_names_as_text_and_ignores_other_prefixes(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    # redis-py hands channels over as bytes, or as str on a client that decodes responses
    caplog.set_level(logging.WARNING, logger="mcp_stateless.state")
    bus = await _bus(redis_server, prefix="edges2:")
    try:
        sub = bus.subscribe("topic")
        bus._deliver("edges2:bus:topic", ORIGIN + b"as text")
        bus._deliver(b"other:bus:topic", ORIGIN + b"not ours")
        assert await sub.get(1) == b"as text"
        assert await sub.get(0.2) is None
        assert [r.getMessage() for r in caplog.records if r.name == "mcp_stateless.state"] == [
            "ignored a malformed bus message on other:bus:topic"]
        sub.close()
    finally:
        await bus.aclose()


async def test_a_bus_that_cannot_subscribe_fails_its_readers_after_twice_the_timeout(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_stateless.state")
    port = free_port()  # nothing listens there
    bus = RedisBus(RedisConnection(f"redis://127.0.0.1:{port}/0", timeout_s=0.5))
    try:
        sub = bus.subscribe("topic")
        t0 = time.monotonic()
        with pytest.raises(StateUnavailable) as e:
            await sub.ready()
        waited = time.monotonic() - t0
        assert 0.95 <= waited < 1.45, waited  # 2 x 0.5 s
        tries = [r.getMessage() for r in caplog.records if r.name == "mcp_stateless.state"]
        assert 4 <= len(tries) <= 5, tries  # at about 0, 0.1, 0.3 and 0.7 s (doubling from 0.1 s)
        assert all(t.startswith(f"bus messages from other instances paused (redis redis://127.0.0.1:{port}/0: "
                                f"Error 111 connecting to 127.0.0.1:{port}.") and t.endswith("; reconnecting")
                   for t in tries), tries
        assert e.value.message == (f"State store unavailable (redis redis://127.0.0.1:{port}/0): cannot subscribe "
                                   "to the bus. The request was not completed; retry shortly.")
        sub.close()
    finally:
        await bus.aclose()


@pytest.mark.slow
async def test_the_reader_gives_its_subscription_back_within_a_second_once_nobody_listens(
        own_redis: RedisServer) -> None:
    bus = await _bus(own_redis, prefix="edges3:")
    raw = _raw(own_redis)
    try:
        before = raw.execute_command("PUBSUB", "NUMPAT")
        sub = bus.subscribe("topic")
        await sub.ready()
        assert raw.execute_command("PUBSUB", "NUMPAT") == before + 1
        raw.publish("edges3:bus:topic", ORIGIN + b"x")
        assert await sub.get(5) == b"x"  # the reader has just started its next one-second wait
        sub.close()
        t0 = time.monotonic()
        while raw.execute_command("PUBSUB", "NUMPAT") != before:
            assert time.monotonic() - t0 < 1.7, "the reader kept its subscription"
            await asyncio.sleep(0.02)
        assert bus._reader is not None and bus._reader.done()
    finally:
        raw.close()
        await bus.aclose()


@pytest.mark.slow
async def test_the_reader_reconnects_quickly_after_each_outage(
        own_redis: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    # one warning per attempt: 0.1 s, then doubling up to 2 s, and back to 0.1 s once reconnected
    caplog.set_level(logging.WARNING, logger="mcp_stateless.state")
    bus = await _bus(own_redis, prefix="edges4:", timeout_s=1.0)

    def attempts() -> int:
        return sum(1 for r in caplog.records if r.getMessage().startswith("bus messages from other instances paused"))

    try:
        sub = bus.subscribe("topic")
        await sub.ready()
        for outage in (1, 2):
            before = attempts()
            own_redis.stop()
            await asyncio.sleep(1.2)  # attempts at about 0, 0.1, 0.3 and 0.7 s
            assert 3 <= attempts() - before <= 6, (outage, attempts() - before)
            own_redis.start()
            raw = _raw(own_redis)
            try:
                deadline = time.monotonic() + 5
                while True:  # published until the reader is back (messages before that are lost: pub/sub)
                    raw.publish("edges4:bus:topic", ORIGIN + b"back")
                    if await sub.get(0.1) == b"back":
                        break
                    assert time.monotonic() < deadline, f"no reconnection after outage {outage}"
                while await sub.get(0.3) is not None:  # the other copies, delivered once it was back
                    pass
            finally:
                raw.close()
        sub.close()
    finally:
        await bus.aclose()


@pytest.mark.slow
async def test_due_by_lists_at_most_one_hundred_by_default(redis_server: RedisServer) -> None:
    records = RedisRecords(RedisConnection(redis_server.url, prefix="edges5:"))
    try:
        for i in range(101):
            assert await records.create("ns", f"k{i:03}", b"x", due=1000.0 + i)
        assert await records.due_by("ns", time.time()) == [f"k{i:03}" for i in range(100)]  # the earliest first
    finally:
        await records.aclose()


@pytest.mark.slow
async def test_a_publish_redis_cannot_take_is_still_delivered_here_and_logged(
        own_redis: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_stateless.state")
    bus = await _bus(own_redis, prefix="edges6:", timeout_s=0.5)
    try:
        sub = bus.subscribe("topic")
        await sub.ready()
        own_redis.stop()
        caplog.clear()
        await bus.publish("topic", b"local")
        assert await sub.get(1) == b"local"
        sent = [r.getMessage() for r in caplog.records if r.getMessage().startswith("a topic message")]
        assert len(sent) == 1, sent
        assert sent[0].startswith(f"a topic message was not sent to other instances: State store unavailable "
                                  f"(redis {own_redis.url}): ")
        sub.close()
    finally:
        await bus.aclose()


@pytest.mark.slow
async def test_a_bus_closed_once_serves_a_new_subscription(redis_server: RedisServer) -> None:
    # an App closed and started again (tests, lifespan restarts) reuses its bundle's bus
    bus = await _bus(redis_server, prefix="edges7:")
    raw = _raw(redis_server)
    try:
        first = bus.subscribe("topic")
        await first.ready()
        await bus.aclose()
        again = bus.subscribe("topic")
        await again.ready()
        raw.publish("edges7:bus:topic", ORIGIN + b"after a close")
        assert await again.get(5) == b"after a close"
        again.close()
    finally:
        raw.close()
        await bus.aclose()


@pytest.mark.slow
async def test_a_record_expires_at_the_first_millisecond_not_before_its_time(redis_server: RedisServer) -> None:
    records = RedisRecords(RedisConnection(redis_server.url, prefix="edges8:"))
    raw = _raw(redis_server)
    try:
        at = time.time() + 60.0004
        assert await records.create("ns", "a", b"x", expires_at=at)
        assert raw.execute_command("PEXPIRETIME", "edges8:ns:a") == int(at * 1000) + 1
        got = await records.get("ns", "a")
        assert got is not None
        assert await records.swap("ns", "a", got.version, b"y", expires_at=at + 1)
        assert raw.execute_command("PEXPIRETIME", "edges8:ns:a") == int((at + 1) * 1000) + 1
    finally:
        raw.close()
        await records.aclose()


@pytest.mark.slow
async def test_a_hash_that_is_not_a_record_reads_as_absent(redis_server: RedisServer) -> None:
    records = RedisRecords(RedisConnection(redis_server.url, prefix="edges9:"))
    raw = _raw(redis_server)
    try:
        raw.hset("edges9:ns:data-only", "d", b"x")
        raw.hset("edges9:ns:version-only", "v", 3)
        assert await records.get("ns", "data-only") is None
        assert await records.get("ns", "version-only") is None
    finally:
        raw.close()
        await records.aclose()


async def test_a_bus_nobody_subscribed_to_is_live_at_once() -> None:
    bus = RedisBus(RedisConnection(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.5))
    await asyncio.wait_for(bus.live(), 0.2)  # no reader to wait for (and no Redis needed)
    await bus.aclose()


@pytest.mark.slow
async def test_a_redis_url_sets_the_timeout_and_the_prefix(redis_server: RedisServer) -> None:
    tuned, plain = open_state(f"{redis_server.url}?timeout=0.7&prefix=edges10:"), open_state(redis_server.url)
    raw = _raw(redis_server)
    try:
        for bundle, timeout_s, prefix in ((tuned, 0.7, "edges10:"), (plain, 2.0, "mcp-stateless:")):
            assert isinstance(bundle.records, RedisRecords)
            assert (bundle.url, bundle.shared, bundle.multiprocess) == (
                redis_server.url, True, True)  # the URL without the options it consumed
            assert (bundle.records.conn.timeout_s, bundle.records.conn.prefix) == (timeout_s, prefix)
            assert await bundle.records.create("edges", "k", b"x")
            assert raw.exists(f"{prefix}edges:k") == 1
            assert await bundle.records.delete("edges", "k")
    finally:
        raw.close()
        await tuned.aclose()
        await plain.aclose()


@pytest.mark.slow
async def test_a_call_to_a_redis_that_stopped_answering_fails_after_its_socket_timeout(own_redis: RedisServer) -> None:
    records = RedisRecords(RedisConnection(own_redis.url, prefix="edges11:", timeout_s=0.5))
    assert own_redis.proc is not None
    try:
        assert await records.get("ns", "k") is None  # connected
        own_redis.proc.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        with pytest.raises(StateUnavailable) as e:
            await records.get("ns", "k")
        waited = time.monotonic() - t0
        assert 0.95 <= waited < 1.35, waited  # the socket timeout twice (one retry), within 3 x 0.5 s in all
        assert e.value.message.startswith(f"State store unavailable (redis {own_redis.url}): ")
    finally:
        own_redis.proc.send_signal(signal.SIGCONT)
        await records.aclose()


async def test_a_call_to_a_dead_redis_says_where_and_why() -> None:
    port = free_port()
    records = RedisRecords(RedisConnection(f"redis://127.0.0.1:{port}/0", timeout_s=0.5))
    try:
        with pytest.raises(StateUnavailable) as e:
            await records.get("ns", "k")
        assert e.value.message.startswith(f"State store unavailable (redis redis://127.0.0.1:{port}/0): "
                                          f"Error 111 connecting to 127.0.0.1:{port}.")
        assert e.value.message.endswith(". The request was not completed; retry shortly.")
    finally:
        await records.aclose()


@pytest.mark.slow
async def test_a_connection_left_stale_by_a_redis_restart_is_replaced_on_the_next_call(own_redis: RedisServer) -> None:
    records = RedisRecords(RedisConnection(own_redis.url, prefix="edges12:", timeout_s=1.0))
    try:
        assert await records.create("ns", "k", b"x")
        own_redis.stop()
        own_redis.start()  # without persistence: the record is gone, the connection is stale
        assert await records.get("ns", "k") is None  # no error: one immediate retry on a new connection
    finally:
        await records.aclose()


@pytest.mark.slow
def test_a_connection_used_from_a_new_event_loop_gets_a_new_client(redis_server: RedisServer) -> None:
    # each worker thread or asyncio.run has its own loop; a client is bound to the loop that made it
    conn = RedisConnection(redis_server.url, prefix="edges13:")
    records = RedisRecords(conn)

    async def roundtrip(key: str) -> bool:
        return await records.create("ns", key, b"x") and await records.delete("ns", key)

    assert asyncio.run(roundtrip("first"))
    assert asyncio.run(roundtrip("second"))
    asyncio.run(conn.aclose())
