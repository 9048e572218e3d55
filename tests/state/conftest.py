"""State engines to run the one contract suite over: memory, SQLite (a file per test), the session's real
redis-server and 3-master Redis Cluster, the same two on Valkey 9 (a key prefix per test) and its real
Postgres (a schema per test).
The engines that need a server process are marked slow."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_stateless.state import StateBundle, open_state
from services import PostgresServer, RedisCluster, RedisServer

SERVED = pytest.mark.slow  # the session starts redis-server, a Redis Cluster or Postgres for these
ENGINES = ["memory", "sqlite", pytest.param("redis", marks=SERVED), pytest.param("redis-cluster", marks=SERVED),
           pytest.param("valkey", marks=SERVED), pytest.param("valkey-cluster", marks=SERVED),
           pytest.param("postgres", marks=SERVED)]
SHARED = [e for e in ENGINES if e != "memory"]


def _url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    if request.param == "redis-cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        return cluster.isolated_url()
    if request.param == "valkey":
        valkey: RedisServer = request.getfixturevalue("valkey_standalone")
        return valkey.isolated_url()
    if request.param == "valkey-cluster":
        vcluster: RedisCluster = request.getfixturevalue("valkey_cluster")
        return vcluster.isolated_url()
    if request.param == "postgres":
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        return pg.isolated_url()
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.isolated_url()


@pytest.fixture(params=ENGINES)
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, isolated state URL of each engine."""
    return _url(request, tmp_path)


@pytest.fixture(params=SHARED)
def shared_state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The engines several processes (or bundles) share; memory:// is per process by design."""
    return _url(request, tmp_path)


@pytest.fixture
async def bundle(state_url: str) -> AsyncIterator[StateBundle]:
    b = open_state(state_url)
    yield b
    await b.aclose()
