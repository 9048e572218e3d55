"""The GET streams' change log on each real engine: publishers racing from two bundles (two instances)
get consecutive numbers with nothing lost or doubled, the log is bounded by count, entries that are gone
are stepped over, and only the GET streams' kinds of event are logged."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mcp_stateless.server.legacy.changelog import ChangeLog, LoggedEvents
from mcp_stateless.state import StateBundle, open_state
from mcp_stateless.state.events import ChangeEvent, MemoryEventBus
from services import RedisServer


@pytest.fixture(params=["memory", "sqlite", "redis"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.isolated_url()


async def _pair(url: str) -> tuple[StateBundle, StateBundle]:
    first = open_state(url)
    return first, (first if url.startswith("memory:") else open_state(url))


@pytest.mark.slow
async def test_racing_publishers_get_consecutive_numbers(state_url: str) -> None:
    first, second = await _pair(state_url)
    try:
        logs = [ChangeLog(b.records, 60, 1000) for b in (first, second)]
        numbers = await asyncio.gather(*(logs[i % 2].append(ChangeEvent("resource_updated", f"u://{i}"))
                                         for i in range(40)))
        assert sorted(numbers) == list(range(1, 41))
        assert await logs[0].head() == 40
        seen = []
        position = 0
        while (entry := await logs[1].next_after(position)) is not None:
            position, event = entry
            seen.append(event.uri)
        assert sorted(seen, key=lambda u: int((u or "u://-1")[4:])) == [f"u://{i}" for i in range(40)]
        assert position == 40
    finally:
        await first.aclose()
        if second is not first:
            await second.aclose()


@pytest.mark.slow
async def test_the_log_is_bounded_and_gone_entries_are_stepped_over(state_url: str) -> None:
    bundle = open_state(state_url)
    try:
        log = ChangeLog(bundle.records, 60, 5)
        for _ in range(12):
            await log.append(ChangeEvent("tools"))
        assert await log.get(7) is None and await log.get(8) == ChangeEvent("tools")
        assert (await log.next_after(0)) == (8, ChangeEvent("tools"))  # 1..7 were trimmed
        await bundle.records.delete("legacy-changes", "9")  # as if it had expired
        assert (await log.next_after(8)) == (10, ChangeEvent("tools"))
        assert await log.next_after(12) is None
    finally:
        await bundle.aclose()


async def test_only_the_get_streams_kinds_are_logged_and_every_event_is_still_published() -> None:
    bundle = open_state("memory://")
    log = ChangeLog(bundle.records, 60, 100)
    inner = MemoryEventBus()
    sub = inner.subscribe()
    bus = LoggedEvents(inner, lambda: log)
    for event in (ChangeEvent("task", "t1"), ChangeEvent("prompts"), ChangeEvent("resource_updated", "x://1")):
        await bus.publish(event)
    assert [await sub.get(1) for _ in range(3)] == [
        ChangeEvent("task", "t1"), ChangeEvent("prompts"), ChangeEvent("resource_updated", "x://1")]
    assert await log.head() == 2
    assert await log.get(1) == ChangeEvent("prompts")


async def test_the_tap_survives_a_state_bound_after_the_legacy_server() -> None:
    from mcp_stateless import App
    from mcp_stateless.server.legacy import LegacyServer

    app = App("tap")
    legacy = LegacyServer(app)
    bundle = open_state("memory://")
    app.use_state(bundle)  # replaces the event bus: the tap is applied to the new one
    sub = app.events.subscribe()
    await app.notify_tools_changed()
    assert await sub.get(1) == ChangeEvent("tools")
    assert await legacy.change_log.head() == 1
    assert await ChangeLog(bundle.records, 60, 10).get(1) == ChangeEvent("tools")
    LegacyServer(app)  # a second branch on the same app replaces the tap rather than logging twice
    await app.notify_prompts_changed()
    assert await legacy.change_log.head() == 2
