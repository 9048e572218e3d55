"""Fixtures: real authorization servers (see as_harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from as_harness import NODE, OIDC, AuthServer, signing_key
from cimd_harness import Tls, self_signed_certificate

from services import need


def _auth_server(tmp: Path, kid: str) -> Iterator[AuthServer]:
    need(NODE, "Node 22 (tools/node)")
    need(OIDC, "oidc-provider (tools/node)")
    server = AuthServer(tmp)
    server.start([signing_key(kid)])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    yield from _auth_server(tmp_path_factory.mktemp("as"), "as1-key1")


@pytest.fixture(scope="module")
def other_auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    """A second, real authorization server the protected app does not trust (unless told to)."""
    yield from _auth_server(tmp_path_factory.mktemp("as2"), "as2-key1")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    """A throwaway self-signed certificate for 127.0.0.1 (test-only: a CIMD document's URL must be HTTPS)."""
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))
