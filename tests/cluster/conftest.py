"""The cluster fixture: one per backend (SQLite on one machine, Redis), shared by the module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterlib import NGINX, Cluster  # type: ignore[import-not-found]


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not Path(NGINX).exists():
        pytest.fail("nginx is not installed (.ci/run installs it)")
    c = Cluster(request.param, tmp_path_factory.mktemp(f"cluster-{request.param}"))
    try:
        yield c
    finally:
        c.close()
