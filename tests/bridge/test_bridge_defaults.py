"""The bridge's documented defaults and its edges in process: what `Bridge(...)` hands its pool, watches and
listeners, the params a 2025 upstream gets, and a failure that is not the protocol's (a -32603 that says
nothing of the inside). Each value here is one a one-line slip would change without any call failing."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcp_stateless import App
from mcp_stateless.bridge import Bridge
from mcp_stateless.bridge.endpoint import _upstream_params
from mcp_stateless.client.memory import MemoryChannel
from mcp_stateless.endpoint import Call, Request
from mcp_stateless.protocol.versions import package_version
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.state.events import ChangeEventBus, MemoryEventBus
from mcp_stateless.state.memory import MemoryBus


def _bridge(**kw: Any) -> Bridge:
    app = App("defaults-upstream")

    @app.tool()
    def hi() -> str:
        return "hi"

    return Bridge(lambda: MemoryChannel(app, legacy=LegacyServer(app)), **kw)


def test_the_defaults_handed_to_the_pool_the_watches_and_the_listeners() -> None:
    b = _bridge()
    assert (b.pool.max_sessions, b.pool.idle_s, b.pool.timeout, b.pool.acquire_timeout) == (16, 300.0, 60.0, 30.0)
    assert b.pool.client_info == {"name": "mcp-stateless-bridge", "version": package_version()}
    assert b.pool.credentialed is None and b.pool.on_notification is not None
    assert (b.pending_ttl_s, b.holder_timeout, b.probe_timeout) == (300.0, 5.0, 10.0)
    assert b.listeners.keepalive_s == 15.0
    assert b.watches.max_watches == 8  # half the pool's sessions
    assert b.watches.open_watch(Call()).timeout == 60.0
    assert (b.per_principal, b.credentialed, b.authenticator, b.bus, b.upstream) == (False, False, None, None, None)
    assert isinstance(b.events, MemoryEventBus) and b.listeners.events is b.events
    assert len(b.instance) == 12 and int(b.instance, 16) >= 0 and b.pending == {}
    assert b.supported_versions == ("2026-07-28",)


def test_what_is_given_is_what_is_handed_on() -> None:
    bus = MemoryBus()
    b = _bridge(bus=bus, max_sessions=3, idle_s=7.0, upstream_timeout=9.0, pending_ttl_s=11.0,
                holder_timeout=2.0, listen_keepalive_s=4.0, probe_timeout=1.5, per_principal=True)
    assert (b.pool.max_sessions, b.pool.idle_s, b.pool.timeout) == (3, 7.0, 9.0)
    assert (b.pending_ttl_s, b.holder_timeout, b.probe_timeout, b.listeners.keepalive_s) == (11.0, 2.0, 1.5, 4.0)
    assert b.watches.max_watches == 1 and b.watches.open_watch(Call()).timeout == 9.0
    assert b.per_principal and b.bus is bus and isinstance(b.events, ChangeEventBus)
    assert _bridge(max_sessions=1).watches.max_watches == 1  # never none
    assert _bridge(max_watches=5).watches.max_watches == 5


def test_a_2025_upstream_gets_the_params_without_the_modern_fields() -> None:
    params = {"name": "hi", "arguments": {"a": 1}, "_meta": {"progressToken": 3}, "inputResponses": {"q1": {}},
              "requestState": "sealed", "cursor": "c"}
    assert _upstream_params(params) == {"name": "hi", "arguments": {"a": 1}, "cursor": "c"}
    assert params["_meta"] == {"progressToken": 3}  # the request's own params are left as they were


async def test_a_failure_that_is_not_the_protocols_is_an_internal_error_that_says_nothing_of_it(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    b = _bridge()

    async def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(b.pool, "acquire", broken)
    with caplog.at_level(logging.ERROR, "mcp_stateless.bridge"):
        reply = await b.handle(Request(4, "tools/list", {}, "2026-07-28", {}, None, None, None), Call())
    assert reply.message == {"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": "Internal error"}}
    assert [r.getMessage() for r in caplog.records] == ["internal error bridging tools/list"]
    assert "secret detail" in caplog.text  # logged for the operator, never answered
    await b.aclose()
