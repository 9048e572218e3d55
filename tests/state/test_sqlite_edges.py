"""SQLite engine edges the contract tests do not reach (found by mutation testing, docs/mutation.md): the
purge count, the default due-scan limit, the cross-process bus delivering every message and never into a
local-only bus, and a bus whose file cannot be opened failing its readers in bounded time, with a warning."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from mcp_stateless.state.sqlite import BUS_RETENTION_S, SqliteBus, SqliteDatabase, SqliteRecords, sqlite_path


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
    here, there = SqliteBus(SqliteDatabase(path)), SqliteBus(SqliteDatabase(path))  # shared, polled every 0.1 s
    sub = there.subscribe("t")
    try:
        await sub.ready()
        for n in range(3):  # each published after the previous one arrived: during the reader's sleep
            await here.publish("t", f"m{n}".encode())
            assert await sub.get(0.9) == f"m{n}".encode()
        sub.close()
        await there.aclose()  # the poller stops; a new reader starts another
        sub = there.subscribe("t")
        await sub.ready()
        await here.publish("t", b"again")
        assert await sub.get(0.9) == b"again"
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


def _rows(db: SqliteDatabase, sql: str) -> int:
    return int(db._call(lambda c: c.execute(sql).fetchone()[0]))


async def test_every_256th_create_purges_what_has_expired(tmp_path: Path) -> None:
    db = SqliteDatabase(str(tmp_path / "s.db"))
    records = SqliteRecords(db)
    try:
        assert await records.create("ns", "old", b"x", expires_at=time.time() + 0.05)  # create 1 (purges first)
        await asyncio.sleep(0.1)
        for i in range(2, 257):  # creates 2..256: nothing purged, the expired row stays in the file
            assert await records.create("ns", f"k{i}", b"x")
            if i in (2, 255, 256):
                assert _rows(db, "SELECT COUNT(*) FROM records WHERE key = 'old'") == 1, i
        assert await records.create("ns", "k257", b"x")  # create 257: purged
        assert _rows(db, "SELECT COUNT(*) FROM records WHERE key = 'old'") == 0
    finally:
        await records.aclose()


async def test_every_64th_publish_prunes_bus_rows_older_than_the_retention(tmp_path: Path) -> None:
    db = SqliteDatabase(str(tmp_path / "bus.db"))
    bus = SqliteBus(db)

    def old_row() -> None:
        db._call(lambda c: c.execute("INSERT INTO bus (origin, topic, payload, at) VALUES ('x', 't', x'00', ?)",
                                     (time.time() - BUS_RETENTION_S - 5,)))

    old = f"SELECT COUNT(*) FROM bus WHERE at < {time.time() - BUS_RETENTION_S}"
    try:
        db._call(lambda c: None)  # the schema
        old_row()
        await bus.publish("t", b"1")  # publish 1 prunes
        assert _rows(db, old) == 0
        old_row()
        for n in range(2, 65):  # publishes 2..64 do not
            await bus.publish("t", b"n")
            if n in (2, 63, 64):
                assert _rows(db, old) == 1, n
        await bus.publish("t", b"65")  # publish 65 prunes again
        assert _rows(db, old) == 0
        assert _rows(db, "SELECT COUNT(*) FROM bus") == 65  # fresh rows are kept
    finally:
        await bus.aclose()
        db.close()


async def test_a_publish_the_file_cannot_take_is_still_delivered_here_and_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_stateless.state")
    bus = SqliteBus(SqliteDatabase(str(tmp_path)))  # a directory: sqlite cannot open it
    sub = bus._fanout.subscribe("topic-a")  # a reader in this process only: no poller
    try:
        await bus.publish("topic-a", b"p")
        assert await sub.get(1) == b"p"
    finally:
        sub.close()
        await bus.aclose()
    msgs = [r.getMessage() for r in caplog.records if r.name == "mcp_stateless.state"]
    assert len(msgs) == 1
    assert msgs[0].startswith(f"a topic-a message was not shared with other processes: State store unavailable "
                              f"(sqlite {tmp_path}): ")


def test_sqlite_state_urls_at_the_edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert sqlite_path("sqlite:///a") == str(tmp_path / "a")  # the shortest relative path
    assert sqlite_path("sqlite:///:memory:") == ":memory:"  # SQLite's in-memory database, not a file
    assert sqlite_path("sqlite:///a.db?poll=0.5?x") == str(tmp_path / "a.db")  # the path ends at the first "?"
    for bad in ("sqlite://a.db", "sqlite://", "sqlite:///"):  # no slash after the scheme, or no path
        with pytest.raises(ValueError) as e:
            sqlite_path(bad)
        assert str(e.value) == (f"invalid SQLite state URL {bad!r}: write sqlite:///relative.db or "
                                "sqlite:////abs/path.db")


def test_a_sqlite_url_sets_the_busy_timeout_and_the_poll_interval(tmp_path: Path) -> None:
    from mcp_stateless.state.sqlite import open_bundle

    tuned = open_bundle(f"sqlite:///{tmp_path / 'a.db'}?timeout=0.5&poll=0.25", {"timeout": "0.5", "poll": "0.25"})
    plain = open_bundle(f"sqlite:///{tmp_path / 'b.db'}", {})
    for bundle, timeout, poll in ((tuned, 0.5, 0.25), (plain, 5.0, 0.1)):
        assert isinstance(bundle.records, SqliteRecords) and isinstance(bundle.bus, SqliteBus)
        assert (bundle.records.db.busy_timeout_s, bundle.bus.poll_s) == (timeout, poll)
        assert bundle.bus.db is bundle.records.db  # one connection for records and bus
