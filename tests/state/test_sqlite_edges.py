"""SQLite engine edges the contract tests do not reach (found by mutation testing, docs/mutation.md): the
purge count, the default due-scan limit, the cross-process bus delivering every message and never into a
local-only bus, and a bus whose file cannot be opened failing its readers in bounded time, with a warning."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from mcp_stateless.state.sqlite import SqliteBus, SqliteDatabase, SqliteRecords


async def test_purge_says_how_many_records_it_removed(tmp_path: Path) -> None:
    records = SqliteRecords(SqliteDatabase(str(tmp_path / "s.db")))
    try:
        now = time.time()
        for key in ("a", "b"):
            assert await records.create("ns", key, b"x", expires_at=now + 0.05)
        assert await records.create("ns", "kept", b"x", expires_at=now + 60)
        assert await records.purge(now + 1) == 2
        assert await records.purge(now + 1) == 0
        assert await records.get("ns", "kept") is not None
    finally:
        await records.aclose()


async def test_due_by_lists_at_most_one_hundred_by_default(tmp_path: Path) -> None:
    records = SqliteRecords(SqliteDatabase(str(tmp_path / "s.db")))
    try:
        for i in range(101):
            assert await records.create("ns", f"k{i:03}", b"x", due=1000.0 + i)
        due = await records.due_by("ns", time.time())
        assert due == [f"k{i:03}" for i in range(100)]  # the earliest first
    finally:
        await records.aclose()


async def test_the_shared_bus_delivers_every_message_from_another_process_in_order(tmp_path: Path) -> None:
    path = str(tmp_path / "bus.db")
    here, there = SqliteBus(SqliteDatabase(path), poll_s=0.02), SqliteBus(SqliteDatabase(path), poll_s=0.02)
    sub = there.subscribe("t")
    try:
        await sub.ready()
        for n in range(3):  # each published after the previous one arrived: during the reader's sleep
            await here.publish("t", f"m{n}".encode())
            assert await sub.get(5) == f"m{n}".encode()
    finally:
        sub.close()
        await here.aclose()
        await there.aclose()
        here.db.close()
        there.db.close()


async def test_a_local_bus_never_reads_what_other_processes_share(tmp_path: Path) -> None:
    path = str(tmp_path / "bus.db")
    shared, local = SqliteBus(SqliteDatabase(path)), SqliteBus(SqliteDatabase(path), shared=False, poll_s=0.02)
    sub = local.subscribe("t")
    try:
        await sub.ready()
        await shared.publish("t", b"from elsewhere")
        assert await sub.get(0.3) is None
        await local.publish("t", b"own")
        assert await sub.get(1) == b"own"
    finally:
        sub.close()
        await shared.aclose()
        await local.aclose()
        shared.db.close()
        local.db.close()


async def test_a_bus_whose_file_cannot_be_opened_fails_its_readers_after_the_busy_timeout_plus_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_stateless.state")
    db = SqliteDatabase(str(tmp_path), busy_timeout_s=0.3)  # a directory: sqlite cannot open it
    bus = SqliteBus(db, poll_s=0.05)
    sub = bus.subscribe("t")
    try:
        t0 = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(sub.ready(), 5)  # 5 s: if ready() waited forever, the bound below says so
        assert 1.25 <= time.monotonic() - t0 < 2.2
    finally:
        sub.close()
        await bus.aclose()
    warnings = [r.getMessage() for r in caplog.records if r.name == "mcp_stateless.state"]
    assert warnings and all(w.startswith(f"bus poll failed: State store unavailable (sqlite {tmp_path}): ")
                            for w in warnings)
