"""The watch session of a bridge instance, in process, over the real pool and a real 2025 server in memory:
what it subscribes upstream and when (one `resources/subscribe` per URI however many streams want it, one
`resources/unsubscribe` after the last), when it lets the session go, and what an upstream that fails,
hangs or refuses leaves behind (nothing held, nothing counted, the session dropped when it broke)."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from failing_channel import FailingChannel

from mcp_stateless import App
from mcp_stateless.bridge.events import Watch, Watches
from mcp_stateless.bridge.pool import UpstreamPool
from mcp_stateless.client.memory import MemoryChannel
from mcp_stateless.endpoint import Call
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.principal import Principal
from mcp_stateless.server.legacy import LegacyServer

A, B = "test://a", "test://b"


def _app() -> App:
    app = App("watched-upstream")

    @app.resource(A, name="a")
    def a() -> str:
        return "a"

    @app.resource(B, name="b")
    def b() -> str:
        return "b"

    return app


@pytest.fixture
async def pool() -> AsyncIterator[UpstreamPool]:
    FailingChannel.reset()
    app = _app()
    p = UpstreamPool(lambda: FailingChannel(MemoryChannel(app, legacy=LegacyServer(app))),
                     {"name": "t", "version": "1"})
    try:
        yield p
    finally:
        await p.aclose()
        FailingChannel.reset()


def _watch(pool: UpstreamPool, timeout: float = 10.0) -> Watch:
    return Watch(lambda: pool.acquire({}, None), pool.release, timeout=timeout)


def _subscriptions() -> list[tuple[str, Any]]:
    return [(m, p) for m, p in FailingChannel.requests if m.startswith("resources/")]


def _subs(*uris: str) -> dict[str, Any]:
    return {"resourceSubscriptions": list(uris)}


async def _settled(watch: Watch) -> None:
    for _ in range(200):  # unsubscribing runs after a stream's end, in a task of its own
        if not watch._settling and not watch._lock.locked():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the watch did not settle")


async def test_one_subscribe_per_uri_however_many_streams_want_it_and_one_unsubscribe_after_the_last(
        pool: UpstreamPool) -> None:
    watch = _watch(pool)
    async with AsyncExitStack() as first:
        await first.enter_async_context(watch.hold(_subs(A)))
        assert watch.lease is not None and watch.lease.busy == 1 and pool.opened == 1
        async with watch.hold(_subs(A, B)):
            assert _subscriptions() == [("resources/subscribe", {"uri": A}), ("resources/subscribe", {"uri": B})]
            assert watch.subscribed == {A, B} and watch.streams == 2 and watch.holders == 2
            assert watch.refs == collections.Counter({A: 2, B: 1})
            assert not watch.idle
        await _settled(watch)
        # B wanted by none: unsubscribed; A still wanted by the first stream: kept, the session still held
        assert _subscriptions()[2:] == [("resources/unsubscribe", {"uri": B})]
        assert watch.subscribed == {A} and dict(watch.refs) == {A: 1}  # the zero count forgotten
        assert watch.streams == 1 and watch.holders == 1 and watch.lease is not None and watch.lease.busy == 1
        assert not watch.idle
    await _settled(watch)
    assert _subscriptions()[3:] == [("resources/unsubscribe", {"uri": A})]
    assert watch.lease is None and watch.subscribed == set() and dict(watch.refs) == {}
    assert watch.streams == 0 and watch.holders == 0 and watch.idle
    assert [le.busy for le in pool.leases] == [0] and pool.opened == 1  # given back, not closed


async def test_a_stream_without_subscriptions_holds_the_session_and_one_honouring_nothing_holds_nothing(
        pool: UpstreamPool) -> None:
    watch = _watch(pool)
    async with watch.hold({}):
        assert watch.lease is None and watch.holders == 0 and pool.opened == 0 and watch.idle
    async with watch.hold({"toolsListChanged": True}):
        assert watch.lease is not None and watch.streams == 1 and watch.subscribed == set()
        # the next stream that wants a URI reuses the held session
        async with watch.hold(_subs(A)):
            assert pool.opened == 1 and watch.subscribed == {A}
    await _settled(watch)
    assert watch.lease is None and pool.opened == 1 and _subscriptions() == [
        ("resources/subscribe", {"uri": A}), ("resources/unsubscribe", {"uri": A})]


async def test_a_subscribe_the_upstream_fails_leaves_nothing_and_breaks_the_session(
        pool: UpstreamPool) -> None:
    watch = _watch(pool)
    FailingChannel.failing = {"resources/subscribe"}
    with pytest.raises(McpError) as e:
        async with watch.hold(_subs(A)):
            raise AssertionError("a stream whose subscription failed must not be held")
    assert e.value.code == -32603
    assert e.value.message == "the upstream server failed resources/subscribe: the upstream went away"
    assert watch.lease is None and watch.streams == 0 and watch.holders == 0 and dict(watch.refs) == {}
    assert watch.subscribed == set() and watch.idle
    assert pool.leases == []  # the broken session dropped, not lent again
    FailingChannel.failing = set()
    async with watch.hold(_subs(A)):
        assert pool.opened == 2 and watch.subscribed == {A}  # a new session


async def test_a_subscribe_the_upstream_refuses_is_its_own_error_and_the_session_stays(
        pool: UpstreamPool) -> None:
    watch = _watch(pool)
    async with watch.hold(_subs(A)):
        with pytest.raises(McpError) as e:
            async with watch.hold(_subs("test://" + "x" * 5000)):  # longer than the upstream takes
                raise AssertionError("unreachable")
        assert (e.value.code, e.value.message) == (-32602, "params.uri is longer than 4096 characters")
        assert watch.streams == 1 and watch.holders == 1 and dict(watch.refs) == {A: 1}
        assert watch.lease is not None and not watch.lease.broken and watch.subscribed == {A}
    await _settled(watch)
    assert watch.lease is None and [le.busy for le in pool.leases] == [0]


async def test_a_hanging_subscribe_is_timed_out_with_the_watchs_own_timeout(pool: UpstreamPool) -> None:
    watch = _watch(pool, timeout=0.2)
    FailingChannel.hanging = {"resources/subscribe"}
    started = asyncio.get_running_loop().time()
    with pytest.raises(McpError) as e:
        await asyncio.wait_for(watch.hold(_subs(A)).__aenter__(), 3)  # not the pool's 60 s
    assert 0.15 <= asyncio.get_running_loop().time() - started < 3
    assert e.value.code == -32603 and e.value.message.startswith("the upstream server failed resources/subscribe: ")
    assert watch.lease is None and watch.streams == 0 and pool.leases == []


async def test_an_unsubscribe_the_upstream_fails_is_logged_and_the_session_is_dropped(
        pool: UpstreamPool, caplog: pytest.LogCaptureFixture) -> None:
    watch = _watch(pool)
    with caplog.at_level(logging.INFO, logger="mcp_stateless.bridge"):
        async with watch.hold(_subs(A)):
            FailingChannel.failing = {"resources/unsubscribe"}
        await _settled(watch)
    said = [r.getMessage() for r in caplog.records if r.name == "mcp_stateless.bridge"]
    assert f"resources/unsubscribe {A} upstream: the upstream server failed resources/unsubscribe: " \
           "the upstream went away" in said
    assert watch.lease is None and watch.subscribed == set() and watch.idle
    assert pool.leases == []  # broken: closed when given back, never lent to the next watch


async def test_closing_the_watch_ends_its_settling_and_gives_the_session_back(pool: UpstreamPool) -> None:
    watch = _watch(pool)
    FailingChannel.hanging = {"resources/unsubscribe"}
    async with watch.hold(_subs(A)):
        pass
    await asyncio.sleep(0.05)
    assert len(watch._settling) == 1 and watch.lease is not None and not watch.idle  # stuck unsubscribing
    (settling,) = watch._settling
    await watch.aclose()
    assert settling.cancelled()  # ended before aclose returned, not just told to
    assert watch._settling == set() and watch.lease is None and watch.subscribed == set()
    assert [le.busy for le in pool.leases] == [0]


async def test_closing_a_held_watch_gives_its_session_back(pool: UpstreamPool) -> None:
    watch = _watch(pool)
    held = watch.hold(_subs(A))
    await held.__aenter__()
    lease = watch.lease
    assert lease is not None and lease.busy == 1
    await watch.aclose()
    assert watch.lease is None and watch.subscribed == set() and lease.busy == 0
    await held.__aexit__(None, None, None)
    await _settled(watch)
    assert _subscriptions() == [("resources/subscribe", {"uri": A})]  # closed: nothing left to undo upstream


async def test_a_stream_waiting_for_the_watch_counts_as_held_before_it_gets_the_lock(pool: UpstreamPool) -> None:
    watch = _watch(pool)
    FailingChannel.hanging = {"resources/subscribe"}
    waiting = asyncio.ensure_future(watch.hold(_subs(A)).__aenter__())
    await asyncio.sleep(0.05)
    assert watch.holders == 1 and not watch.idle
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert watch.holders == 0 and watch.streams == 0 and watch.lease is None and watch.idle


def _watches(pool: UpstreamPool, max_watches: int = 2) -> tuple[Watches, list[str | None]]:
    opened: list[str | None] = []

    def open_watch(call: Call) -> Watch:
        opened.append(_key(call))
        return _watch(pool)

    return Watches(open_watch, _key, max_watches), opened


def _key(call: Call) -> str | None:
    return call.principal.id


def _call(who: str) -> Call:
    return Call(principal=Principal(who))


async def test_watches_keep_one_watch_per_caller_and_refuse_one_caller_past_the_bound(pool: UpstreamPool) -> None:
    watches, opened = _watches(pool, max_watches=2)
    async with watches.hold({}, _call("alice")):
        assert watches.watches == {} and opened == []  # honouring nothing: no watch
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(watches.hold(_subs(A), _call("alice")))
        await stack.enter_async_context(watches.hold(_subs(B), _call("alice")))
        await stack.enter_async_context(watches.hold(_subs(A), _call("bob")))
        assert opened == ["alice", "bob"] and watches.live() == 2
        assert watches.watches["alice"].subscribed == {A, B} and watches.watches["bob"].subscribed == {A}
        with pytest.raises(McpError) as e:
            async with watches.hold(_subs(A), _call("carol")):
                raise AssertionError("unreachable")
        assert e.value.code == -32603 and e.value.data == {"limit": 2}
        assert e.value.message.startswith("this bridge instance already holds upstream watch sessions for 2 "
                                          "callers' listen streams (--upstream-watches)")
        assert opened == ["alice", "bob"]
    for watch in list(watches.watches.values()):
        await _settled(watch)
    assert watches.live() == 0
    alice = watches.watches["alice"]
    async with watches.hold(_subs(A), _call("alice")):  # the caller's own idle watch is taken up again
        assert watches.watches["alice"] is alice and opened == ["alice", "bob"]
    await _settled(alice)
    async with watches.hold(_subs(A), _call("carol")):  # the idle ones are forgotten: room again
        assert set(watches.watches) == {"carol"} and opened == ["alice", "bob", "carol"]
        assert watches.live() == 1
    await watches.aclose()
    assert watches.watches == {}
