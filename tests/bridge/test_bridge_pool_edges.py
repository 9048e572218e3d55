"""The upstream pool in process: the capabilities a session declares are exactly its key's, a question with
no call to ask is refused, a pool with every session busy gives up after its acquire timeout, and a session
that fails to start leaves nothing behind."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from failing_channel import FailingChannel

from mcp_stateless import App
from mcp_stateless.bridge.pool import Lease, UpstreamPool, pool_key
from mcp_stateless.client.errors import ChannelError
from mcp_stateless.client.memory import MemoryChannel
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.server.legacy import LegacyServer

INFO = {"name": "pool-tests", "version": "1"}


def _app() -> App:
    app = App("pool-upstream")

    @app.tool()
    def hi() -> str:
        return "hi"

    return app


def _pool(**kw: Any) -> UpstreamPool:
    app = _app()
    return UpstreamPool(lambda: MemoryChannel(app, legacy=LegacyServer(app)), INFO, **kw)


@pytest.mark.parametrize(("caps", "declared"), [
    ({}, {}),
    ({"elicitation": {}}, {"elicitation": {"form": {}}}),
    ({"elicitation": {"form": {}}}, {"elicitation": {"form": {}}}),
    ({"elicitation": {"url": {}}}, {"elicitation": {"url": {}}}),
    ({"elicitation": {"form": {}, "url": {}}}, {"elicitation": {"form": {}, "url": {}}}),
    ({"sampling": {}}, {"sampling": {}}),
    ({"roots": {"listChanged": True}}, {"roots": {}}),
    ({"elicitation": {}, "sampling": {}, "roots": {}}, {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}),
])
def test_a_session_declares_exactly_the_capabilities_of_its_key(caps: dict[str, Any],
                                                                 declared: dict[str, Any]) -> None:
    assert _pool()._handlers(caps, []).capabilities() == declared


@pytest.mark.parametrize(("caps", "method", "attr"), [
    ({"elicitation": {}}, "elicitation/create", "elicitation"),
    ({"elicitation": {"url": {}}}, "elicitation/create", "url_elicitation"),
    ({"sampling": {}}, "sampling/createMessage", "sampling"),
    ({"roots": {}}, "roots/list", "roots"),
])
async def test_a_question_with_no_call_holding_the_session_is_refused_and_one_with_a_call_goes_to_it(
        caps: dict[str, Any], method: str, attr: str, caplog: pytest.LogCaptureFixture) -> None:
    ref: list[Lease] = []
    handler = getattr(_pool()._handlers(caps, ref), attr)
    with caplog.at_level(logging.INFO, logger="mcp_stateless.bridge"), pytest.raises(McpError) as e:
        await handler({"x": 1})
    assert e.value.code == -32600 and e.value.message == (
        f"{method} cannot be answered here: the 2026-07-28 client behind this bridge is asked only during its own "
        "tools/call, prompts/get or resources/read, and none is in flight on this session")
    assert [r.getMessage() for r in caplog.records] == [f"the upstream sent {method} outside a call: refused"]
    asked: list[tuple[str, dict[str, Any]]] = []

    async def ask(m: str, params: dict[str, Any]) -> Any:
        asked.append((m, params))
        return {"answered": m}

    ref.append(Lease("k", None, True, ask=ask))  # type: ignore[arg-type]  # the handler reads only `ask`
    assert await handler({"x": 1}) == {"answered": method}
    assert asked == [(method, {"x": 1})]


async def test_a_pool_with_every_session_busy_gives_up_after_its_acquire_timeout() -> None:
    pool = _pool(max_sessions=1, acquire_timeout=0.3)
    try:
        held = await pool.acquire({"elicitation": {}}, None)  # exclusive: lent to one call at a time
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError) as e:
            await asyncio.wait_for(pool.acquire({"elicitation": {}}, None), 3)  # its own timeout, not this one
        assert str(e.value) == "all 1 upstream sessions are busy"
        assert 0.25 <= asyncio.get_running_loop().time() - started < 2.0
        waiter = asyncio.ensure_future(pool.acquire({"elicitation": {}}, None))
        await asyncio.sleep(0.05)
        await pool.release(held)
        again = await asyncio.wait_for(waiter, 2)
        assert again is held and held.busy == 1 and pool.opened == 1  # the released session, not a new one
    finally:
        await pool.aclose()


async def test_a_session_that_fails_to_start_leaves_nothing_behind() -> None:
    class Refusing(MemoryChannel):
        async def exchange(self, *args: Any, **kw: Any) -> Any:
            raise ChannelError("no upstream here")

    app = _app()
    pool = UpstreamPool(lambda: Refusing(app, legacy=LegacyServer(app)), INFO)
    try:
        with pytest.raises(ChannelError, match=r"^no upstream here$"):
            await pool.acquire({}, None)
        assert pool.leases == [] and pool.opened == 0
    finally:
        await pool.aclose()


def test_the_pools_defaults() -> None:
    pool = _pool()
    assert (pool.max_sessions, pool.idle_s, pool.timeout, pool.acquire_timeout) == (16, 300.0, 60.0, 30.0)
    assert pool.client_info == INFO and pool.client_info is not INFO
    assert (pool.credentialed, pool.on_notification, pool.leases, pool.opened) == (None, None, [], 0)


@pytest.fixture
def failing() -> Any:
    FailingChannel.reset()
    yield FailingChannel
    FailingChannel.reset()


def _failing_pool(**kw: Any) -> UpstreamPool:
    app = _app()

    @app.tool()
    async def changes() -> str:
        await app.notify_tools_changed()
        return "changed"

    return UpstreamPool(lambda: FailingChannel(MemoryChannel(app, legacy=LegacyServer(app))),
                        INFO, **kw)


def test_a_key_does_not_depend_on_the_order_of_a_capabilitys_members() -> None:
    assert pool_key({"elicitation": {"url": {}, "form": {}}}, None) == pool_key(
        {"elicitation": {"form": {}, "url": {}}}, None)


async def test_a_full_pool_closes_its_longest_idle_session_for_a_new_key(failing: Any) -> None:
    pool = _failing_pool(max_sessions=2, acquire_timeout=5)
    try:
        older = await pool.acquire({}, "alice")
        await pool.release(older)
        newer = await pool.acquire({}, "bob")
        await pool.release(newer)
        busy = await asyncio.wait_for(pool.acquire({"sampling": {}}, None), 3)  # full: the longest idle one makes room
        assert pool.leases == [newer, busy] and pool.opened == 3
        third = await asyncio.wait_for(pool.acquire({}, "carol"), 3)  # not after the acquire timeout
        assert pool.leases == [busy, third] and pool.opened == 4
        for _ in range(100):
            if failing.closed == 2:
                break
            await asyncio.sleep(0.01)
        assert failing.closed == 2  # the evicted sessions' channels are closed, not left open
    finally:
        await pool.aclose()
    assert failing.closed == 4


async def test_closing_the_pool_waits_for_the_sessions_it_dropped_and_a_failing_close_is_logged(
        failing: Any, caplog: pytest.LogCaptureFixture) -> None:
    pool = _failing_pool()
    dropped = await pool.acquire({"sampling": {}}, None)
    failing.breaks_on_close = True
    with caplog.at_level(logging.DEBUG, logger="mcp_stateless.bridge"):
        await pool.release(dropped, broken=True)
        assert pool.leases == [] and failing.closed == 0  # closing, in a task of its own
        await pool.aclose()  # returns once the dropped session is closed too
        assert failing.closed == 1
    said = [r.getMessage() for r in caplog.records if r.name == "mcp_stateless.bridge"]
    assert said == ["closing an upstream session: the upstream was gone already"]


async def test_a_session_that_may_ask_is_settled_with_a_ping_before_it_is_lent(failing: Any) -> None:
    pool = _failing_pool()
    try:
        await pool.acquire({"roots": {}}, None)
        assert [m for m, _ in failing.requests] == ["initialize", "ping"]
        assert failing.requests[1] == ("ping", {})
        await pool.acquire({}, None)
        assert [m for m, _ in failing.requests] == ["initialize", "ping", "initialize"]  # a shared one: no ping
    finally:
        await pool.aclose()


async def test_a_sessions_notifications_are_told_with_the_principal_it_was_opened_for(failing: Any) -> None:
    heard: list[tuple[str, str | None]] = []
    pool = _failing_pool(on_notification=lambda m, p: heard.append((m["method"], p)))
    try:
        for principal in ("alice", None):
            lease = await pool.acquire({}, principal)
            await lease.session.request("tools/call", {"name": "changes", "arguments": {}})
        for _ in range(100):
            if len(heard) == 2:
                break
            await asyncio.sleep(0.01)
        assert heard == [("notifications/tools/list_changed", "alice"), ("notifications/tools/list_changed", None)]
    finally:
        await pool.aclose()


async def test_a_sessions_requests_are_timed_out_with_the_pools_timeout(failing: Any) -> None:
    pool = _failing_pool(timeout=0.2)
    try:
        lease = await pool.acquire({}, None)
        failing.hanging = {"tools/call"}
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(lease.session.request("tools/call", {"name": "hi", "arguments": {}}), 3)
        assert 0.15 <= asyncio.get_running_loop().time() - started < 2
    finally:
        await pool.aclose()
