"""`mcp-stateless serve --state`: refusals that keep a deployment from silently diverging."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).with_name("mcp-stateless"))
ROOT = Path(__file__).resolve().parents[2]


def serve(*args: str, keys: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MCP_STATELESS_KEYS", "MCP_STATELESS_STATE")}
    if keys:
        env["MCP_STATELESS_KEYS"] = "k1:" + "a" * 43
    return subprocess.run([EXE, "serve", "examples/importer.py:app", "--http", "127.0.0.1:1", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)


def test_a_shared_store_without_a_shared_mrtr_key_is_refused() -> None:
    r = serve("--state", "redis://:secret@127.0.0.1:1/0", keys=False)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        "mcp-stateless: error: --state redis://***@127.0.0.1:1/0 is shared by several instances, so they need "
        "one MRTR key: set MCP_STATELESS_KEYS=kid:base64secret (the same on every instance)")


def test_memory_state_cannot_serve_several_workers() -> None:
    r = serve("--state", "memory://", "--workers", "2", keys=True)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        "mcp-stateless: error: --state memory:// cannot be shared by 2 workers: use sqlite:///path.db "
        "(one machine), redis://, redis-cluster:// or postgresql://")


def test_an_unknown_state_url_is_refused() -> None:
    r = serve("--state", "mongodb://db/x", keys=True)
    assert r.returncode == 2
    assert "mcp-stateless: error: --state: unsupported state URL 'mongodb://db/x'" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("url", "shown"), [
    ("redis-cluster://:secret@127.0.0.1:1,127.0.0.1:2", "redis-cluster://***@127.0.0.1:1,127.0.0.1:2"),
    ("postgresql://app:secret@127.0.0.1:1/db", "postgresql://app:***@127.0.0.1:1/db"),
])
def test_the_cluster_and_postgres_stores_are_shared_and_need_the_mrtr_key(url: str, shown: str) -> None:
    r = serve("--state", url, keys=False)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        f"mcp-stateless: error: --state {shown} is shared by several instances, so they need "
        "one MRTR key: set MCP_STATELESS_KEYS=kid:base64secret (the same on every instance)")
