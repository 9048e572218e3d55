"""The cluster fixture: one per backend (SQLite on one machine, Redis, Redis Cluster, a Valkey cluster, Postgres),
shared by the module. The clusters and Postgres are the session's (a key prefix or a schema per module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterlib import NGINX, Cluster  # type: ignore[import-not-found]

BACKENDS = ["sqlite", "redis", pytest.param("redis-cluster", marks=pytest.mark.slow),
            pytest.param("valkey-cluster", marks=pytest.mark.slow), pytest.param("postgres", marks=pytest.mark.slow)]


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not Path(NGINX).exists():
        pytest.fail("nginx is not installed (.ci/run installs it)")
    state = None
    if request.param == "redis-cluster":
        state = request.getfixturevalue("redis_cluster").isolated_url()
    elif request.param == "valkey-cluster":
        state = request.getfixturevalue("valkey_cluster").isolated_url()
    elif request.param == "postgres":
        state = request.getfixturevalue("postgres_server").isolated_url()
    c = Cluster(request.param, tmp_path_factory.mktemp(f"cluster-{request.param}"), state)
    try:
        yield c
    finally:
        c.close()
