"""The two engine primitives every state engine implements (memory, SQLite, Redis): the record store
(versioned compare-and-swap, TTL, due scan, namespaces) and the topic bus."""

from __future__ import annotations

import asyncio
import time

import pytest

from mcp_stateless.state import StateBundle, Versioned, open_state
from mcp_stateless.state.events import Fanout


async def test_create_get_and_a_second_create_is_refused(bundle: StateBundle) -> None:
    r = bundle.records
    assert await r.create("ns", "a", b"one") is True
    assert await r.create("ns", "a", b"two") is False
    assert await r.get("ns", "a") == Versioned(b"one", 1)
    assert await r.get("ns", "missing") is None


async def test_swap_needs_the_current_version_and_bumps_it(bundle: StateBundle) -> None:
    r = bundle.records
    await r.create("ns", "a", b"v1")
    assert await r.swap("ns", "a", 1, b"v2") is True
    assert await r.swap("ns", "a", 1, b"stale") is False  # a conflict changes nothing
    assert await r.get("ns", "a") == Versioned(b"v2", 2)
    assert await r.swap("ns", "missing", 1, b"x") is False


async def test_concurrent_swaps_from_two_bundles_lose_nothing(state_url: str) -> None:
    first = open_state(state_url)
    second = first if state_url.startswith("memory:") else open_state(state_url)
    try:
        await first.records.create("ns", "n", b"0")

        async def increment(b: StateBundle) -> None:
            while True:
                cur = await b.records.get("ns", "n")
                assert cur is not None
                if await b.records.swap("ns", "n", cur.version, str(int(cur.data) + 1).encode()):
                    return

        await asyncio.gather(*(increment(first if i % 2 else second) for i in range(30)))
        assert await first.records.get("ns", "n") == Versioned(b"30", 31)
    finally:
        await first.aclose()
        if second is not first:
            await second.aclose()


async def test_an_expired_record_is_gone_and_its_key_can_be_created_again(bundle: StateBundle) -> None:
    r = bundle.records
    at = time.time() + 1.0  # long enough to read it back on a loaded machine
    await r.create("ns", "a", b"short", expires_at=at)
    await r.create("ns", "forever", b"kept")
    assert await r.get("ns", "a") == Versioned(b"short", 1)
    await asyncio.sleep(max(0.0, at - time.time()) + 0.1)
    assert await r.get("ns", "a") is None
    assert await r.swap("ns", "a", 1, b"late") is False
    assert await r.create("ns", "a", b"again") is True
    assert await r.get("ns", "a") == Versioned(b"again", 1)
    await r.purge(time.time())
    assert await r.get("ns", "forever") == Versioned(b"kept", 1)


async def test_swap_sets_or_clears_the_expiry(bundle: StateBundle) -> None:
    r = bundle.records
    await r.create("ns", "a", b"x", expires_at=time.time() + 0.3)
    assert await r.swap("ns", "a", 1, b"y", expires_at=None)  # now kept for good
    await r.create("ns", "b", b"x")
    assert await r.swap("ns", "b", 1, b"y", expires_at=time.time() + 0.3)
    await asyncio.sleep(0.5)
    assert await r.get("ns", "a") == Versioned(b"y", 2)
    assert await r.get("ns", "b") is None


async def test_due_by_lists_live_records_whose_time_came_earliest_first(bundle: StateBundle) -> None:
    r = bundle.records
    now = time.time()
    await r.create("ns", "late", b"", due=now - 1)
    await r.create("ns", "early", b"", due=now - 5)
    await r.create("ns", "future", b"", due=now + 60)
    await r.create("ns", "none", b"")
    await r.create("ns", "expired", b"", due=now - 9, expires_at=now + 0.2)
    await r.create("other", "elsewhere", b"", due=now - 9)
    await asyncio.sleep(0.4)
    assert await r.due_by("ns", time.time()) == ["early", "late"]
    assert await r.due_by("ns", time.time(), limit=1) == ["early"]
    assert await r.swap("ns", "early", 1, b"", due=None)  # cleared by a swap
    assert await r.swap("ns", "future", 1, b"", due=now - 3)  # moved by a swap
    assert await r.due_by("ns", time.time()) == ["future", "late"]
    assert await r.delete("ns", "late") is True
    assert await r.due_by("ns", time.time()) == ["future"]


async def test_due_by_gives_at_most_a_hundred_unless_told_in_due_order_across_buckets(bundle: StateBundle) -> None:
    r = bundle.records
    for i in range(101, 0, -1):  # created latest first; several share a bucket on the sharded engines
        await r.create("many", f"k{i:03}", b"", due=float(i))
    await r.create("many", "later", b"", due=10_000.0)
    assert await r.due_by("many", 5_000.0) == [f"k{i:03}" for i in range(1, 101)]
    assert await r.due_by("many", 5_000.0, limit=200) == [f"k{i:03}" for i in range(1, 102)]
    assert await r.due_by("many", 3.5, limit=2) == ["k001", "k002"]


async def test_namespaces_are_isolated(bundle: StateBundle) -> None:
    r = bundle.records
    await r.create("a", "k", b"in a")
    assert await r.get("b", "k") is None
    assert await r.create("b", "k", b"in b") is True
    assert await r.swap("b", "k", 1, b"b2")
    assert await r.get("a", "k") == Versioned(b"in a", 1)
    assert await r.delete("a", "k") is True
    assert await r.get("b", "k") == Versioned(b"b2", 2)
    assert await r.delete("a", "k") is False


async def test_a_record_survives_reopening_the_engine(shared_state_url: str) -> None:
    first = open_state(shared_state_url)
    await first.records.create("ns", "k", b"durable", due=123.0)
    await first.aclose()
    second = open_state(shared_state_url)
    try:
        assert await second.records.get("ns", "k") == Versioned(b"durable", 1)
        assert await second.records.due_by("ns", 200.0) == ["k"]
    finally:
        await second.aclose()


# ----------------------------------------------------------------------------- bus
async def test_a_topic_reaches_its_readers_only(bundle: StateBundle) -> None:
    one, two, other = bundle.bus.subscribe("t1"), bundle.bus.subscribe("t1"), bundle.bus.subscribe("t2")
    for s in (one, two, other):
        await s.ready()
    await bundle.bus.publish("t1", b"hello")
    assert await one.get(2.0) == b"hello"
    assert await two.get(2.0) == b"hello"
    assert await other.get(0.3) is None
    assert await one.get(0.3) is None  # once, not echoed back from the shared bus
    for s in (one, two, other):
        s.close()


async def test_a_topic_reaches_readers_in_every_process(shared_state_url: str) -> None:
    a, b = open_state(shared_state_url), open_state(shared_state_url)
    try:
        session, unrelated = a.bus.subscribe("session:1"), a.bus.subscribe("session:2")
        await session.ready()
        await unrelated.ready()
        await b.bus.publish("session:1", b"for one")
        assert await session.get(3.0) == b"for one"
        assert await unrelated.get(0.5) is None
        session.close()
        unrelated.close()
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_closed_subscription_gets_nothing_more(bundle: StateBundle) -> None:
    sub = bundle.bus.subscribe("t")
    await sub.ready()
    await bundle.bus.publish("t", b"unread")
    sub.close()
    await bundle.bus.publish("t", b"after close")
    still = bundle.bus.subscribe("t")
    await still.ready()
    await bundle.bus.publish("t", b"later")
    assert await still.get(2.0) == b"later"
    assert await sub.get(0.3) is None  # neither what was unread at close nor anything published after
    still.close()


async def test_put_reaches_one_reader(bundle: StateBundle) -> None:
    a, b = bundle.bus.subscribe("t"), bundle.bus.subscribe("t")
    a.put(b"only a")
    assert await a.get(1.0) == b"only a"
    assert await b.get(0.2) is None
    a.close()
    b.close()


@pytest.mark.parametrize("payload", [b"", b"\x00\xffbinary", b"x" * 100_000])
async def test_payloads_arrive_byte_for_byte(bundle: StateBundle, payload: bytes) -> None:
    sub = bundle.bus.subscribe("t")
    await sub.ready()
    await bundle.bus.publish("t", payload)
    assert await sub.get(2.0) == payload
    sub.close()


async def test_the_fanout_forgets_a_topic_when_its_last_reader_leaves() -> None:
    fanout = Fanout()
    a, b, c = fanout.subscribe("session:1"), fanout.subscribe("session:1"), fanout.subscribe("session:2")
    assert fanout.listening
    a.close()
    c.close()
    fanout.deliver("session:1", b"x")
    assert await b.get(0) == b"x"
    assert fanout.listening  # session:1 still has a reader
    b.close()
    assert not fanout.listening  # so a shared bus's reader stops
    assert fanout._topics == {}
