"""Postgres engine edges the contract tests do not reach (found by mutation testing, docs/mutation.md): a bus
message between processes inline in its NOTIFY or, past the NOTIFY bound, through the bus table (the exact
boundary, the table pruned of what is past retention), malformed or foreign notifications ignored, a publish
while the store is down delivered here and logged, and a bus that cannot listen failing its readers."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import psycopg
import pytest

from mcp_stateless.state.base import StateUnavailable
from mcp_stateless.state.postgres import BUS_RETENTION_S, NOTIFY_MAX, PostgresBus, PostgresConnection
from services import PostgresServer, free_port

pytestmark = pytest.mark.slow  # a Postgres of the session's, or of the test's own
OTHER = "f" * 16  # another process's origin (ours is random hex of the same length)


def _schema(url: str) -> str:
    return url.split("schema=", 1)[1].split("&", 1)[0]


@pytest.fixture
async def pair(postgres_server: PostgresServer) -> AsyncIterator[tuple[PostgresBus, PostgresBus, str]]:
    url = postgres_server.isolated_url()
    schema = _schema(url)
    base = url.split("?", 1)[0]
    here = PostgresBus(PostgresConnection(base, schema=schema, timeout_s=3))
    there = PostgresBus(PostgresConnection(base, schema=schema, timeout_s=3))
    try:
        yield here, there, schema
    finally:
        await here.aclose()
        await there.aclose()


async def _rows(server: PostgresServer, schema: str, where: str = "TRUE") -> int:
    async with await psycopg.AsyncConnection.connect(server.url, autocommit=True) as c:
        row = await (await c.execute(f"SELECT count(*) FROM {schema}.bus WHERE {where}")).fetchone()
        assert row is not None
        return int(row[0])


async def _notify(server: PostgresServer, schema: str, raw: str) -> None:
    async with await psycopg.AsyncConnection.connect(server.url, autocommit=True) as c:
        await c.execute("SELECT pg_notify(%s, %s)", (f"mcp_stateless_{schema}", raw))


def _note_length(topic: str, payload: bytes) -> int:
    import base64

    return len(orjson.dumps([OTHER, topic, base64.b64encode(payload).decode()]))


async def test_a_message_at_the_notify_bound_goes_inline_and_one_past_it_through_the_table(
        pair: tuple[PostgresBus, PostgresBus, str], postgres_server: PostgresServer) -> None:
    here, there, schema = pair
    payload = bytes(range(256)) * 20 + b"\x00" * 109  # 5229 bytes: 6972 base64 characters
    at_bound, past_bound = "tt", "ttt"
    assert _note_length(at_bound, payload) == NOTIFY_MAX and _note_length(past_bound, payload) == NOTIFY_MAX + 1
    subs = {topic: here.subscribe(topic) for topic in (at_bound, past_bound, "big", "empty")}
    for sub in subs.values():
        await sub.ready()
    await there.publish(at_bound, payload)
    assert await subs[at_bound].get(3) == payload
    assert await _rows(postgres_server, schema) == 0  # inline: nothing stored
    await there.publish(past_bound, payload)
    assert await subs[past_bound].get(3) == payload
    assert await _rows(postgres_server, schema) == 1
    big = b"\xff\x00" * 50_000
    await there.publish("big", big)
    assert await subs["big"].get(3) == big
    await there.publish("empty", b"")
    assert await subs["empty"].get(3) == b""
    assert await _rows(postgres_server, schema) == 2
    for sub in subs.values():
        assert await sub.get(0.2) is None  # each once
        sub.close()


async def test_the_first_large_message_prunes_the_table_of_what_is_past_retention(
        pair: tuple[PostgresBus, PostgresBus, str], postgres_server: PostgresServer) -> None:
    here, there, schema = pair
    sub = here.subscribe("t")
    await sub.ready()
    now = time.time()
    async with await psycopg.AsyncConnection.connect(postgres_server.url, autocommit=True) as c:
        for at in (now - BUS_RETENTION_S - 30, now - BUS_RETENTION_S + 30):
            await c.execute(f"INSERT INTO {schema}.bus (payload, at) VALUES (%s, %s)", (b"old", at))
    large = b"x" * 10_000
    await there.publish("t", large)
    assert await sub.get(3) == large
    assert await _rows(postgres_server, schema, f"at < {now - BUS_RETENTION_S}") == 0  # pruned
    assert await _rows(postgres_server, schema) == 2  # the one within retention, and the new one
    async with await psycopg.AsyncConnection.connect(postgres_server.url, autocommit=True) as c:
        await c.execute(f"INSERT INTO {schema}.bus (payload, at) VALUES (%s, %s)", (b"old", now - 1000))
    await there.publish("t", large)  # the second: not every publish prunes
    assert await sub.get(3) == large
    assert await _rows(postgres_server, schema) == 4
    sub.close()


async def test_malformed_foreign_and_own_notifications_are_ignored_and_the_next_is_delivered(
        pair: tuple[PostgresBus, PostgresBus, str], postgres_server: PostgresServer,
        caplog: pytest.LogCaptureFixture) -> None:
    here, _there, schema = pair
    sub = here.subscribe("t")
    await sub.ready()
    async with await psycopg.AsyncConnection.connect(postgres_server.url, autocommit=True) as c:
        row = await (await c.execute(f"INSERT INTO {schema}.bus (payload, at) VALUES (%s, %s) RETURNING id",
                                     (b"stored", time.time()))).fetchone()
        assert row is not None
    stored = int(row[0])
    notes: list[Any] = [
        "not json", [OTHER, "t"],  # malformed: logged
        [OTHER, ["t"], "aGk="], [here._origin, "t", "aGk="],  # a topic that is not text; our own: skipped
        # no row, a row named by text (a stored one: still not read), a row that is gone
        [OTHER, "t", None], [OTHER, "t", None, str(stored)], [OTHER, "t", None, stored + 1000],
    ]
    with caplog.at_level(logging.WARNING, logger="mcp_stateless"):
        for note in notes:
            await _notify(postgres_server, schema, note if isinstance(note, str) else orjson.dumps(note).decode())
        await _notify(postgres_server, schema, orjson.dumps([OTHER, "t", "aGk="]).decode())
        assert await sub.get(3) == b"hi"  # notifications arrive in order: every one above was handled first
    assert await sub.get(0.2) is None
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [f"ignored a malformed bus notification on mcp_stateless_{schema}"] * 2
    sub.close()


async def test_a_publish_while_the_store_is_down_reaches_this_process_and_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    server = PostgresServer().start()
    url = server.isolated_url()
    bus = PostgresBus(PostgresConnection(url.split("?", 1)[0], schema=_schema(url), timeout_s=1))
    try:
        sub = bus.subscribe("t")
        await sub.ready()
        server.stop()
        with caplog.at_level(logging.WARNING, logger="mcp_stateless"):
            await asyncio.wait_for(bus.publish("t", b"local"), 10)
        assert await sub.get(1) == b"local"
        said = [r.getMessage() for r in caplog.records if "was not sent" in r.getMessage()]
        assert len(said) == 1 and said[0].startswith("a t message was not sent to other instances: ")
        sub.close()
    finally:
        await bus.aclose()
        server.remove()


async def test_a_bus_that_cannot_listen_fails_its_readers_after_twice_the_timeout(
        caplog: pytest.LogCaptureFixture) -> None:
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"  # nothing listens there
    bus = PostgresBus(PostgresConnection(nowhere, schema="nobody", timeout_s=1))
    try:
        with caplog.at_level(logging.WARNING, logger="mcp_stateless"):
            sub = bus.subscribe("t")
            started = time.monotonic()
            with pytest.raises(StateUnavailable) as e:
                await sub.ready()
            assert 1.8 <= time.monotonic() - started < 2.9  # 2 x timeout_s
        assert "cannot listen on the bus" in e.value.message
        assert any(r.getMessage().startswith(f"bus messages from other instances paused ({bus.conn.where}: ")
                   and r.getMessage().endswith("); reconnecting") for r in caplog.records)
        sub.close()
    finally:
        await bus.aclose()


async def test_closing_the_connection_closes_its_pool(postgres_server: PostgresServer) -> None:
    url = postgres_server.isolated_url()
    conn = PostgresConnection(url.split("?", 1)[0], schema=_schema(url), timeout_s=3)
    pool = await conn._pool_ready()
    assert not pool.closed and conn.connected
    await conn.aclose()
    assert pool.closed and not conn.connected
