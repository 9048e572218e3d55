"""Fixtures: real authorization servers (see as_harness.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from as_harness import AuthServer, running_auth_server
from cimd_harness import Tls, self_signed_certificate


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    with running_auth_server(tmp_path_factory.mktemp("as"), "as1-key1") as server:
        yield server


@pytest.fixture(scope="module")
def other_auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    """A second, real authorization server the protected app does not trust (unless told to)."""
    with running_auth_server(tmp_path_factory.mktemp("as2"), "as2-key1") as server:
        yield server


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    """A throwaway self-signed certificate for 127.0.0.1 (test-only: a CIMD document's URL must be HTTPS)."""
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))
