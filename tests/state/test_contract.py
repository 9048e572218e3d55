"""The one contract every state backend passes (memory, SQLite, Redis, Redis Cluster, Postgres): handle records
and change events."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from mcp_stateless.state import HandleRecord, StateBundle, open_state
from mcp_stateless.state.events import ChangeEvent, ChangeSubscription, decode_change


def record(key: str = "k1", *, ttl: float = 60.0, data: dict | None = None, principal: str = "alice") -> HandleRecord:
    now = time.time()
    return HandleRecord(key, principal, "imp", data if data is not None else {"files": []}, 1, now, now + ttl,
                        now + ttl + 60)


def shares_across_bundles(url: str) -> bool:
    return not url.startswith("memory:")


async def test_create_then_get_returns_the_same_record(bundle: StateBundle) -> None:
    rec = record(data={"files": ["a"], "n": 1, "nested": {"x": [1, 2]}})
    assert await bundle.handles.create(rec) is True
    got = await bundle.handles.get("k1")
    assert got is not None
    assert (got.key, got.principal, got.kind, got.data, got.version, got.ended) == (
        "k1", "alice", "imp", {"files": ["a"], "n": 1, "nested": {"x": [1, 2]}}, 1, False)
    assert got.expires_at == pytest.approx(rec.expires_at, abs=1e-3)
    assert got.purge_at == pytest.approx(rec.purge_at, abs=1e-3)


async def test_create_refuses_an_existing_key_and_changes_nothing(bundle: StateBundle) -> None:
    assert await bundle.handles.create(record(data={"v": 1}))
    assert await bundle.handles.create(record(data={"v": 2}, principal="mallory")) is False
    got = await bundle.handles.get("k1")
    assert got is not None and got.data == {"v": 1} and got.principal == "alice"


async def test_get_of_unknown_key_is_none(bundle: StateBundle) -> None:
    assert await bundle.handles.get("nope") is None


async def test_returned_data_is_a_copy(bundle: StateBundle) -> None:
    await bundle.handles.create(record())
    got = await bundle.handles.get("k1")
    assert got is not None
    got.data["files"].append("x")
    again = await bundle.handles.get("k1")
    assert again is not None and again.data == {"files": []}


async def test_swap_succeeds_on_the_current_version_and_bumps_it(bundle: StateBundle) -> None:
    rec = record()
    await bundle.handles.create(rec)
    assert await bundle.handles.swap("k1", 1, {"files": ["a"]}, rec.expires_at + 5, rec.purge_at + 5, False)
    got = await bundle.handles.get("k1")
    assert got is not None and got.version == 2 and got.data == {"files": ["a"]}
    assert got.expires_at == pytest.approx(rec.expires_at + 5, abs=1e-3)


async def test_swap_with_a_stale_version_fails_and_changes_nothing(bundle: StateBundle) -> None:
    rec = record()
    await bundle.handles.create(rec)
    assert await bundle.handles.swap("k1", 1, {"files": ["a"]}, rec.expires_at, rec.purge_at, False)
    assert await bundle.handles.swap("k1", 1, {"files": ["b"]}, rec.expires_at, rec.purge_at, False) is False
    got = await bundle.handles.get("k1")
    assert got is not None and got.version == 2 and got.data == {"files": ["a"]}


async def test_swap_of_a_missing_key_fails(bundle: StateBundle) -> None:
    assert await bundle.handles.swap("nope", 1, {}, time.time() + 5, time.time() + 10, False) is False


async def test_swap_can_end_a_record(bundle: StateBundle) -> None:
    rec = record()
    await bundle.handles.create(rec)
    assert await bundle.handles.swap("k1", 1, {"files": []}, rec.expires_at, rec.purge_at, True)
    got = await bundle.handles.get("k1")
    assert got is not None and got.ended is True and got.version == 2


async def _increment(b: StateBundle, key: str, all_read: asyncio.Barrier) -> int:
    attempts = 0
    while True:
        attempts += 1
        cur = await b.handles.get(key)
        assert cur is not None
        if attempts == 1:  # every writer holds the same version before anyone writes: they must collide
            await all_read.wait()
        data = {"n": cur.data["n"] + 1}
        if await b.handles.swap(key, cur.version, data, cur.expires_at, cur.purge_at, False):
            return attempts
        assert attempts < 500


async def test_concurrent_compare_and_set_from_two_instances_loses_no_update(state_url: str) -> None:
    first = open_state(state_url)
    second = open_state(state_url) if shares_across_bundles(state_url) else first
    try:
        await first.handles.create(record(data={"n": 0}))
        writers = 40
        all_read = asyncio.Barrier(writers)
        tasks = [_increment(first if i % 2 else second, "k1", all_read) for i in range(writers)]
        attempts = await asyncio.gather(*tasks)
        got = await first.handles.get("k1")
        assert got is not None and got.data == {"n": writers} and got.version == writers + 1
        # all read version 1, so exactly one first write wins and the other 39 retry at least once
        assert attempts.count(1) == 1
        assert sum(attempts) >= 2 * writers - 1
    finally:
        await first.aclose()
        if second is not first:
            await second.aclose()


async def test_touch_extends_but_never_shortens(bundle: StateBundle) -> None:
    rec = record(ttl=30)
    await bundle.handles.create(rec)
    await bundle.handles.touch("k1", rec.expires_at + 100, rec.purge_at + 100)
    got = await bundle.handles.get("k1")
    assert got is not None and got.expires_at == pytest.approx(rec.expires_at + 100, abs=1e-3)
    assert got.version == 1  # a touch is not an update
    await bundle.handles.touch("k1", rec.expires_at, rec.purge_at)
    got = await bundle.handles.get("k1")
    assert got is not None and got.expires_at == pytest.approx(rec.expires_at + 100, abs=1e-3)


async def test_touch_does_not_revive_an_ended_or_expired_record(bundle: StateBundle) -> None:
    now = time.time()
    await bundle.handles.create(HandleRecord("old", "alice", "imp", {}, 1, now - 10, now - 1, now + 60))
    await bundle.handles.touch("old", now + 100, now + 200)
    got = await bundle.handles.get("old")
    assert got is not None and got.expires_at == pytest.approx(now - 1, abs=1e-3)
    rec = record()
    await bundle.handles.create(rec)
    await bundle.handles.swap("k1", 1, {}, rec.expires_at, rec.purge_at, True)
    await bundle.handles.touch("k1", rec.expires_at + 100, rec.purge_at + 100)
    got = await bundle.handles.get("k1")
    assert got is not None and got.expires_at == pytest.approx(rec.expires_at, abs=1e-3)


async def test_delete(bundle: StateBundle) -> None:
    await bundle.handles.create(record())
    assert await bundle.handles.delete("k1") is True
    assert await bundle.handles.get("k1") is None
    assert await bundle.handles.delete("k1") is False


async def test_records_past_their_purge_time_are_gone(bundle: StateBundle) -> None:
    now = time.time()
    await bundle.handles.create(HandleRecord("p", "alice", "imp", {}, 1, now, now + 0.2, now + 0.4))
    assert await bundle.handles.get("p") is not None
    await asyncio.sleep(0.6)
    assert await bundle.handles.get("p") is None
    await bundle.handles.purge(time.time())
    assert await bundle.handles.create(HandleRecord("p", "bob", "imp", {}, 1, now, now + 5, now + 10))


async def test_a_record_survives_reopening_the_store(shared_state_url: str) -> None:
    state_url = shared_state_url
    first = open_state(state_url)
    await first.handles.create(record(data={"files": ["a"]}))
    await first.aclose()
    second = open_state(state_url)
    try:
        got = await second.handles.get("k1")
        assert got is not None and got.data == {"files": ["a"]}
    finally:
        await second.aclose()


# ----------------------------------------------------------------------------- events
async def _ready(sub: ChangeSubscription) -> None:
    await sub.ready()  # every subscription has it (a no-op in memory)


async def test_an_event_reaches_a_subscriber_of_the_same_bundle(bundle: StateBundle) -> None:
    sub = bundle.events.subscribe()
    await _ready(sub)
    await bundle.events.publish(ChangeEvent("resource_updated", "file:///a.txt"))
    assert await sub.get(2.0) == ChangeEvent("resource_updated", "file:///a.txt")
    assert await sub.get(0.3) is None  # delivered once, not echoed back from the shared bus
    sub.close()


async def test_an_addressed_event_keeps_its_audience_across_instances(shared_state_url: str) -> None:
    """The bridge publishes what a caller's own upstream session heard addressed to that caller; a listen
    stream on another instance must still see whom it is for (else it would reach every caller)."""
    a, b = open_state(shared_state_url), open_state(shared_state_url)
    try:
        sub = b.events.subscribe()
        await _ready(sub)
        await a.events.publish(ChangeEvent("resource_updated", "board://mine", "credential:p"))
        await a.events.publish(ChangeEvent("tools", None, "credential:p"))
        assert await sub.get(3.0) == ChangeEvent("resource_updated", "board://mine", "credential:p")
        assert await sub.get(3.0) == ChangeEvent("tools", None, "credential:p")
        sub.close()
    finally:
        await a.aclose()
        await b.aclose()


def test_an_addressed_payload_whose_audience_cannot_be_read_is_dropped() -> None:
    assert decode_change(b'["resource_updated","x://1",7]') is None
    assert decode_change(b'["resource_updated","x://1","p","q"]') is None
    assert decode_change(b'["resource_updated","x://1"]') == ChangeEvent("resource_updated", "x://1")


async def test_an_event_reaches_every_subscriber_of_every_instance(shared_state_url: str) -> None:
    state_url = shared_state_url
    a, b = open_state(state_url), open_state(state_url)
    try:
        subs = [a.events.subscribe(), a.events.subscribe(), b.events.subscribe()]
        for s in subs:
            await _ready(s)
        await b.events.publish(ChangeEvent("tools"))
        await a.events.publish(ChangeEvent("resource_updated", "x://1"))
        for s in subs:
            got = {await s.get(3.0), await s.get(3.0)}
            assert got == {ChangeEvent("tools"), ChangeEvent("resource_updated", "x://1")}
            s.close()
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_closed_subscription_gets_nothing_more(bundle: StateBundle) -> None:
    sub = bundle.events.subscribe()
    await _ready(sub)
    await bundle.events.publish(ChangeEvent("resources"))
    sub.close()
    await bundle.events.publish(ChangeEvent("tools"))
    other = bundle.events.subscribe()
    await _ready(other)
    await bundle.events.publish(ChangeEvent("prompts"))
    assert await other.get(2.0) == ChangeEvent("prompts")
    assert await other.get(0.3) is None
    assert await sub.get(0.3) is None  # neither the unread event from before close nor anything after
    other.close()


async def test_end_makes_the_reader_see_end(bundle: StateBundle) -> None:
    sub = bundle.events.subscribe()
    await _ready(sub)
    sub.end()
    got = await sub.get(1.0)
    assert got is not None and got.kind == "end"
    sub.close()


def test_unsupported_urls_are_refused_with_the_accepted_forms() -> None:
    accepted = ("use memory://, sqlite:///path.db, redis://host:port/db, redis-cluster://host:port[,host:port…] "
                "or postgresql://user@host:port/db")
    with pytest.raises(ValueError, match=re.escape(accepted)):
        open_state("mongodb://x/y")
    with pytest.raises(ValueError, match="positive number of seconds"):
        open_state("redis://127.0.0.1:1/0?timeout=-1")
    with pytest.raises(ValueError, match="shared or local"):
        open_state("sqlite:///x.db?events=maybe")
