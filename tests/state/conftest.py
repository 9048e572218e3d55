"""State backends to run the one contract suite over: memory, SQLite (a file per test) and a real
redis-server on a free port (never the machine's 6379)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mcp_stateless.state import StateBundle, open_state
from services import RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


_prefix_counter = iter(range(1_000_000))


def _url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    return f"{server.url}?prefix=t{next(_prefix_counter)}:"


@pytest.fixture(params=["memory", "sqlite", "redis"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, isolated state URL of each backend."""
    return _url(request, tmp_path)


@pytest.fixture(params=["sqlite", "redis"])
def shared_state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The backends several processes (or bundles) share; memory:// is per process by design."""
    return _url(request, tmp_path)


@pytest.fixture
async def bundle(state_url: str) -> AsyncIterator[StateBundle]:
    b = open_state(state_url)
    yield b
    await b.aclose()
