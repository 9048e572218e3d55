"""State engines to run the one contract suite over: memory, SQLite (a file per test) and the session's
real redis-server (a key prefix per test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_stateless.state import StateBundle, open_state
from services import RedisServer


def _url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.isolated_url()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, isolated state URL of each engine."""
    return _url(request, tmp_path)


@pytest.fixture(params=["sqlite", "redis"])
def shared_state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The engines several processes (or bundles) share; memory:// is per process by design."""
    return _url(request, tmp_path)


@pytest.fixture
async def bundle(state_url: str) -> AsyncIterator[StateBundle]:
    b = open_state(state_url)
    yield b
    await b.aclose()
