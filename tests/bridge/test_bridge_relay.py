"""What an upstream session's notification becomes on the event bus: the change it announces and whose it
is, counted when coalesced, warned of at the first drop, a change the bus could not take logged and the
next one published, and a closed relay started again by the next change."""

from __future__ import annotations

import asyncio
import logging

import pytest

from mcp_stateless.bridge.events import Relay, Watch, change_of
from mcp_stateless.state.events import ChangeEvent, MemoryEventBus

TOOLS = {"method": "notifications/tools/list_changed"}
PROMPTS = {"method": "notifications/prompts/list_changed"}
RESOURCES = {"method": "notifications/resources/list_changed"}


class DownBus(MemoryEventBus):
    """A real in-process bus that fails to publish while `down` (as a store outage does)."""

    down = False

    async def publish(self, event: ChangeEvent) -> None:
        if self.down:
            raise ConnectionError("the bus is down")
        await super().publish(event)


def test_a_change_heard_by_one_callers_session_is_addressed_to_that_caller() -> None:
    updated = {"method": "notifications/resources/updated", "params": {"uri": "a://b"}}
    assert change_of(updated, "alice") == ChangeEvent("resource_updated", "a://b", "alice")
    assert change_of(TOOLS, "alice") == ChangeEvent("tools", None, "alice")
    assert change_of(TOOLS) == ChangeEvent("tools", None, None)
    for method in (["notifications/tools/list_changed"], {"m": 1}, None):  # not a method name (unhashable too)
        assert change_of({"method": method}, "alice") is None


async def test_the_relay_publishes_a_change_with_the_principal_whose_session_heard_it() -> None:
    bus = MemoryEventBus()
    sub = bus.subscribe()
    relay = Relay(bus)
    try:
        relay.notify(TOOLS, "alice")
        relay.notify(TOOLS)
        assert [await asyncio.wait_for(sub.get(1), 3) for _ in range(2)] == [
            ChangeEvent("tools", None, "alice"), ChangeEvent("tools")]  # two changes: not equal, not coalesced
    finally:
        await relay.aclose()
        sub.close()


async def test_coalesced_changes_are_counted_and_the_first_drop_is_warned_of_at_once(
        caplog: pytest.LogCaptureFixture) -> None:
    relay = Relay(MemoryEventBus(), max_pending=1)
    try:
        with caplog.at_level(logging.WARNING, logger="mcp_stateless.bridge"):
            relay.notify(TOOLS)
            relay.notify(TOOLS)
            relay.notify(TOOLS)
            assert relay.coalesced == 2
            relay.notify(PROMPTS)
            assert relay.dropped == 1
            assert [r.getMessage() for r in caplog.records] == [
                "more than 1 upstream changes wait to be published: dropping"]
            relay.notify(RESOURCES)
            relay.notify(PROMPTS)
            assert relay.dropped == 3 and len(caplog.records) == 1  # warned once, not at every drop
    finally:
        await relay.aclose()


async def test_a_change_the_bus_cannot_take_is_logged_and_the_next_one_is_published(
        caplog: pytest.LogCaptureFixture) -> None:
    bus = DownBus()
    sub = bus.subscribe()
    relay = Relay(bus)
    try:
        bus.down = True
        with caplog.at_level(logging.WARNING, logger="mcp_stateless.bridge"):
            relay.notify(PROMPTS)
            for _ in range(100):
                if caplog.records:
                    break
                await asyncio.sleep(0.01)
        assert [r.getMessage() for r in caplog.records] == [
            "could not publish an upstream change (prompts): the bus is down"]
        bus.down = False
        relay.notify(TOOLS)
        assert await asyncio.wait_for(sub.get(1), 3) == ChangeEvent("tools")  # the worker lives on
    finally:
        await relay.aclose()
        sub.close()


async def test_a_closed_relay_is_started_again_by_the_next_change() -> None:
    bus = MemoryEventBus()
    sub = bus.subscribe()
    relay = Relay(bus)
    try:
        relay.notify(TOOLS)
        assert await asyncio.wait_for(sub.get(1), 3) == ChangeEvent("tools")
        await relay.aclose()
        assert relay._worker is None
        relay.notify(PROMPTS)
        assert await asyncio.wait_for(sub.get(1), 3) == ChangeEvent("prompts")
    finally:
        await relay.aclose()
        sub.close()


async def test_a_watch_times_its_upstream_requests_out_after_ten_seconds_unless_told() -> None:
    async def acquire() -> None:
        raise AssertionError("not called")

    assert Watch(acquire, acquire).timeout == 10.0  # type: ignore[arg-type]
