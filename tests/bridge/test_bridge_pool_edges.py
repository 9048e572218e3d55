"""The upstream pool in process: the capabilities a session declares are exactly its key's, a question with
no call to ask is refused, a pool with every session busy gives up after its acquire timeout, and a session
that fails to start leaves nothing behind."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_stateless import App
from mcp_stateless.bridge.pool import Lease, UpstreamPool
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
        caps: dict[str, Any], method: str, attr: str) -> None:
    ref: list[Lease] = []
    handler = getattr(_pool()._handlers(caps, ref), attr)
    with pytest.raises(McpError) as e:
        await handler({"x": 1})
    assert e.value.code == -32600 and e.value.message.startswith(f"{method} cannot be answered here")
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
            await pool.acquire({"elicitation": {}}, None)
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
