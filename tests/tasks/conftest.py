"""Task stores to run the contract over: memory, SQLite (a file per test), and a real redis-server."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mcp_stateless.tasks.store import MemoryTaskStore, RedisTaskStore, SqliteTaskStore, TaskStore
from services import RedisServer


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    kind = request.param
    s: TaskStore
    if kind == "memory":
        s = MemoryTaskStore()
    elif kind == "sqlite":
        s = SqliteTaskStore(tmp_path / "tasks.db")
    else:
        url = request.getfixturevalue("redis_url")
        s = RedisTaskStore(url, prefix=f"t{time.monotonic_ns()}:")
    try:
        yield s
    finally:
        await s.close()
