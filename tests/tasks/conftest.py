"""Task stores to run the contract over: one per state engine (memory, SQLite in a file per test, and the
session's real redis-server), each the typed store of a bundle."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_stateless.state import open_state
from mcp_stateless.tasks.store import TaskStore
from services import RedisServer


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.slow)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        url = server.isolated_url()
    bundle = open_state(url)
    try:
        yield bundle.typed_store(TaskStore)
    finally:
        await bundle.aclose()
