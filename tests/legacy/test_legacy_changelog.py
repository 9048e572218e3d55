"""The GET streams' change log on each real engine: publishers racing from two bundles (two instances)
get consecutive numbers with nothing lost or doubled, the log is bounded by count, entries that are gone
are stepped over, and only the GET streams' kinds of event are logged."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from mcp_stateless.protocol.errors import McpError
from mcp_stateless.server.legacy.changelog import CHANGELOG_NS, ChangeLog, LoggedEvents
from mcp_stateless.state import StateBundle, open_state
from mcp_stateless.state.events import ChangeEvent, MemoryEventBus
from mcp_stateless.state.memory import MemoryRecords
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


class Written(MemoryRecords):
    """The memory engine, with the expiry each record was created with kept by key."""

    def __init__(self) -> None:
        super().__init__()
        self.expiry: dict[str, float | None] = {}

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        self.expiry[key] = expires_at
        return await super().create(ns, key, data, expires_at=expires_at, due=due)


async def test_each_entry_lives_the_logs_ttl_and_the_oldest_is_trimmed_past_max_events() -> None:
    records = Written()
    log = ChangeLog(records, 30, 3)
    t0 = time.time()
    for _ in range(3):
        await log.append(ChangeEvent("tools"))
    assert [await log.get(n) for n in (1, 2, 3)] == [ChangeEvent("tools")] * 3  # exactly max_events: all kept
    expires = records.expiry["1"]
    assert expires is not None and t0 + 30 <= expires <= time.time() + 30
    assert await log.append(ChangeEvent("prompts")) == 4
    assert await log.get(1) is None  # the fourth entry trims the first, and only it
    assert [await log.get(n) for n in (2, 3, 4)] == [ChangeEvent("tools"), ChangeEvent("tools"),
                                                     ChangeEvent("prompts")]
    assert await log.head() == 4


async def test_a_log_whose_next_256_numbers_are_taken_is_too_contended(caplog: pytest.LogCaptureFixture) -> None:
    bundle = open_state("memory://")
    log = ChangeLog(bundle.records, 60, 1000)
    for n in range(1, 257):  # as if publishers had taken them without moving the head
        await bundle.records.create(CHANGELOG_NS, str(n), b"{}", expires_at=time.time() + 60)
    with pytest.raises(McpError) as raised:
        await log.append(ChangeEvent("tools"))
    assert raised.value.code == -32603
    assert raised.value.message == "the GET streams' event log is too contended"
    # Published through the tap: logged as a warning, and the event still goes out.
    inner = MemoryEventBus()
    sub = inner.subscribe()
    with caplog.at_level(logging.WARNING, logger="mcp_stateless.legacy"):
        await LoggedEvents(inner, lambda: log).publish(ChangeEvent("resources"))
    assert await sub.get(1) == ChangeEvent("resources")
    (warned,) = [r for r in caplog.records if r.name == "mcp_stateless.legacy"]
    assert warned.getMessage() == ("a change event was not logged for legacy GET streams: the GET streams' "
                                   "event log is too contended")
    assert getattr(warned, "era", None) == "legacy"
