"""`mcp-stateless audit` on servers nobody here wrote: the official Python SDK (mcp 2.3.0) everything-style
server on three instances, an @modelcontextprotocol/server 2.x server over HTTP and stdio, and a legacy-only
@modelcontextprotocol/sdk 1.x server. Each failure asserted here is a defect of that server, named in the
test's docstring (docs/audit.md lists the same findings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from auditlib import INTEROP, NODE, SDK_PY, audit, by_status

from services import need

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

SERVERS = Path(__file__).resolve().parent / "servers"


def test_the_python_sdk_everything_server_fails_only_listen_fan_out(tmp_path: Path) -> None:
    """mcp 2.3.0 (tests/audit/servers/sdk_everything.py, three instances): every check that applies passes
    but listen.fan-out — the SDK's notify_tools_changed reaches the listen streams of its own process only,
    there is no bus between instances."""
    need(SDK_PY, "the official SDK venv (mcp==2.3.0)")
    rc, rep, _ = audit(["--launch", f"{SDK_PY} {SERVERS / 'sdk_everything.py'} {{port}}", "--instances", "3",
                        "--listen-trigger", "test_trigger_tool_change"], tmp_path)
    failed = by_status(rep, "fail")
    assert rc == 1 and set(failed) == {"listen.fan-out"} and by_status(rep, "warn") == {}
    assert failed["listen.fan-out"]["step"] == 6
    assert "instance 2 lacks ['notifications/tools/list_changed']" in failed["listen.fan-out"]["finding"]
    assert set(by_status(rep, "pass")) == {
        "era", "era.legacy-leg", "discover", "envelope.meta-required", "envelope.unsupported-version",
        "envelope.result-type", "http.header-mismatch", "http.post-only", "http.session-id",
        "stateless.instances", "stateless.history", "stateless.capabilities", "mrtr.instances", "mrtr.restart",
        "broken.reconnect", "wire.schema"}
    # ask_name sends no requestState, the SDK offers no tasks, no principal was given, stdio is a separate run,
    # no tool is declared read-only (nor named by --read-tool), and the legacy profile is for 2025-only servers.
    skipped = by_status(rep, "skip")
    assert set(skipped) == {"auth.per-request", "mrtr.tampered-state", "tasks.instances", "tasks.restart",
                            "stdio.interleave", "stdio.cancel", "results.read-tools", "legacy.sessions",
                            "legacy.history", "legacy.results", "legacy.restart", "legacy.stdio",
                            "legacy.broken-stream"}
    assert skipped["legacy.sessions"]["finding"] == "skipped: the legacy profile is for 2025-only servers"
    assert "migrationPlan" not in rep
    assert rep["summary"]["seconds"] < 60


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_legacy_only_sdk_server_is_reported_as_such(transport: str, tmp_path: Path) -> None:
    """@modelcontextprotocol/sdk 1.x: initialize and sessions only."""
    need(NODE, "Node 22 (tools/node)")
    server = f"{NODE} {INTEROP / 'ts_legacy_server.mjs'}"
    args = ["--launch", f"{server} http {{port}}", "--instances", "2"] if transport == "http" \
        else ["--stdio", f"{server} stdio"]
    rc, rep, _ = audit(args, tmp_path)
    era = rep["checks"][0]
    assert rc == 1 and rep["target"]["era"] == "legacy" and era["status"] == "fail"
    assert era["finding"].startswith("legacy-only server (ts-legacy-interop): it answers initialize (2025-11-25)")
    assert "implement server/discover" in era["fix"] and "Mcp-Session-Id" not in era["fix"]
    # Only the legacy profile runs on it (tests/audit/test_legacy_profile.py holds its findings).
    assert {c["status"] for c in rep["checks"][1:] if not c["id"].startswith("legacy.")} == {"skip"}
    assert [s["step"] for s in rep["migrationPlan"]][:3] == [1, 2, 3]


def test_a_modern_sdk_server_with_a_process_local_tool_toggle(tmp_path: Path) -> None:
    """@modelcontextprotocol/server 2.x (tests/interop/servers/ts_server.mjs): everything passes (or cannot be
    driven without consent) but its `toggle` fixture, which adds a tool in the memory of the process that
    served it and announces it to the listen streams of that process only (the SDK's notify reaches its own
    handler's streams)."""
    need(NODE, "Node 22 (tools/node)")
    rc, rep, _ = audit(["--launch", f"{NODE} {INTEROP / 'ts_server.mjs'} http {{port}}", "--instances", "3"], tmp_path)
    failed = by_status(rep, "fail")
    assert rc == 1 and set(failed) == {"stateless.history", "listen.fan-out"} and by_status(rep, "warn") == {}
    assert "instance 2 lacks ['extra']" in failed["stateless.history"]["finding"]
    assert "instance 2 lacks ['notifications/tools/list_changed']" in failed["listen.fan-out"]["finding"]
    assert "http.session-id" in by_status(rep, "pass")
    # greet asks again when declined (even on one instance), and the auditor never consents: no round can end
    skipped = by_status(rep, "skip")
    for check in ("mrtr.instances", "mrtr.restart"):
        assert skipped[check]["finding"].startswith("skipped: greet asks again when its question is declined"), (
            skipped[check])


def test_a_modern_sdk_stdio_server_serves_an_unsupported_version_after_earlier_requests(tmp_path: Path) -> None:
    """@modelcontextprotocol/server 2.x `serveStdio` picks the era from the process's traffic: after the
    audit's earlier requests on the process, a request naming version 2099-01-01 is served instead of
    refused with -32022 — alone and interleaved. A fresh process refuses it (per-process state)."""
    need(NODE, "Node 22 (tools/node)")
    rc, rep, _ = audit(["--stdio", f"{NODE} {INTEROP / 'ts_server.mjs'} stdio"], tmp_path)
    failed = by_status(rep, "fail")
    assert rc == 1 and set(failed) == {"envelope.unsupported-version", "stdio.interleave"}
    assert failed["envelope.unsupported-version"]["finding"] == (
        "an unsupported protocol version: result (complete) instead of -32022")
    assert "expected error -32022, got result (complete)" in failed["stdio.interleave"]["finding"]


async def test_the_python_sdk_listen_works_within_one_process_only() -> None:
    """The control for listen.fan-out above: on two instances of the same server, a listen stream on
    instance 2 gets notifications/tools/list_changed when the trigger runs on instance 2, and nothing when
    it runs on instance 1 — the SDK's default InMemorySubscriptionBus, not a listen bug."""
    need(SDK_PY, "the official SDK venv (mcp==2.3.0)")
    from mcp_stateless.audit import LaunchedTarget
    from mcp_stateless.audit.checks.calls import call
    from mcp_stateless.audit.wire import modern

    target = LaunchedTarget(f"{SDK_PY} {SERVERS / 'sdk_everything.py'} {{port}}", 2)
    await target.start()
    got = {}
    try:
        for where in (0, 1):
            listen = modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
            async with target.stream(listen, 1) as stream:
                ack = await stream.next(5)
                assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged"
                made = await target.send(call("test_trigger_tool_change"), instance=where)
                assert made.result is not None
                event = await stream.next(2)
                got[where + 1] = event and event["method"]
    finally:
        await target.aclose()
    assert got == {1: None, 2: "notifications/tools/list_changed"}
