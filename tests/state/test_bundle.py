"""One bundle, one connection: handles, tasks and change events share the engine's connection, and
`aclose()` releases it; a relative SQLite URL names the same file for every store."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from mcp_stateless import App, TaskRuntime
from mcp_stateless.state import HandleRecord, StateBundle, open_state
from mcp_stateless.state.events import ChangeEvent
from mcp_stateless.state.redisdb import RedisRecords
from mcp_stateless.state.sqlite import SqliteRecords, sqlite_path
from mcp_stateless.tasks.model import TaskRecord, new_task_id
from mcp_stateless.tasks.store import TaskStore
from services import RedisServer


def _task() -> TaskRecord:
    now = time.time()
    return TaskRecord(new_task_id(), "alice", "slow", {}, {}, now, now, 60_000, 250, lease_until=now + 5)


def _handle(key: str = "k") -> HandleRecord:
    now = time.time()
    return HandleRecord(key, "alice", "imp", {"n": 1}, 1, now, now + 60, now + 120)


async def _use_every_store(bundle: StateBundle) -> TaskRecord:
    task = _task()
    await bundle.handles.create(_handle())
    await bundle.typed_store(TaskStore).create(task)
    await bundle.events.publish(ChangeEvent("tools"))
    return task


def _open_fds_on(path: Path) -> int:
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(path)):  # the file and its -wal / -shm companions
            count += 1
    return count


def test_the_task_store_is_one_per_bundle_on_its_record_store() -> None:
    bundle = open_state("memory://")
    tasks = bundle.typed_store(TaskStore)
    assert bundle.typed_store(TaskStore) is tasks
    assert tasks.records is bundle.records is bundle.handles.records


async def test_an_app_keeps_tasks_in_its_state_bundle(tmp_path: Path) -> None:
    bundle = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    app = App("t", tasks=TaskRuntime())
    app.use_state(bundle)
    assert app.tasks is not None and app.tasks.store is bundle.typed_store(TaskStore)
    await bundle.aclose()


async def test_sqlite_stores_share_one_connection_and_aclose_releases_it(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    bundle = open_state(f"sqlite:///{path}")
    assert isinstance(bundle.records, SqliteRecords)
    db = bundle.records.db
    assert _open_fds_on(path) == 0  # nothing opens before first use
    task = await _use_every_store(bundle)
    assert db.connected
    assert _open_fds_on(path) == 3  # one connection: state.db, state.db-wal, state.db-shm
    await bundle.aclose()
    assert not db.connected
    assert _open_fds_on(path) == 0
    got = await bundle.typed_store(TaskStore).get(task.task_id)  # a later use opens it again
    assert got is not None and got.task_id == task.task_id
    await bundle.aclose()


def _redis_clients(server: RedisServer) -> int:
    with socket.create_connection(("127.0.0.1", server.port), 2) as s:
        s.sendall(b"INFO clients\r\n")
        data = b""
        while b"connected_clients:" not in data or not data.endswith(b"\r\n"):
            data += s.recv(65536)
    line = next(x for x in data.decode().splitlines() if x.startswith("connected_clients:"))
    return int(line.split(":")[1]) - 1  # not counting this probe


@pytest.mark.slow
async def test_redis_stores_share_one_client_and_aclose_releases_it(redis_server: RedisServer) -> None:
    before = _redis_clients(redis_server)
    bundle = open_state(redis_server.isolated_url())
    assert isinstance(bundle.records, RedisRecords)
    conn = bundle.records.conn
    await _use_every_store(bundle)
    assert conn.connected
    assert _redis_clients(redis_server) == before + 1
    sub = bundle.events.subscribe()
    await sub.ready()  # the bus reader holds a pub/sub connection of the same client
    await bundle.handles.get("k")
    assert _redis_clients(redis_server) == before + 2
    sub.close()
    await bundle.aclose()
    assert not conn.connected
    assert _redis_clients(redis_server) == before


async def test_a_relative_sqlite_url_names_one_file_for_handles_and_tasks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert sqlite_path("sqlite:///rel.db") == str(tmp_path / "rel.db")
    assert sqlite_path("sqlite:///sub/rel.db?events=local") == str(tmp_path / "sub" / "rel.db")
    assert sqlite_path("sqlite:////abs/x.db") == "/abs/x.db"
    bundle = open_state("sqlite:///rel.db")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # resolved when opened: a later chdir changes nothing
    task = await _use_every_store(bundle)
    await bundle.aclose()
    assert not (tmp_path / "elsewhere" / "rel.db").exists()
    with sqlite3.connect(tmp_path / "rel.db") as c:
        rows = sorted(c.execute("SELECT ns, key FROM records").fetchall())
    assert rows == [("h", "k"), ("task", task.task_id)]
