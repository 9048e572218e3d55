"""`mcp-stateless audit` end to end: real servers launched by the auditor (3 instances behind its
round-robin), over stdio, deliberately broken ones reported with the right step and fix and nothing else,
and the report formats checked against the shipped schema and a JUnit parser."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from auditlib import EXE, FASTMCP_PY, KEYS, ROOT, SDK_PY, assert_clean, audit, by_status, serve
from junitparser import Failure, JUnitXml, Skipped

from services import RedisServer, need

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    r = RedisServer(tmp_path_factory.mktemp("audit-redis")).start()
    try:
        yield r
    finally:
        r.stop()


# ------------------------------------------------------------------------------------ our own examples


def _state(backend: str, tmp: Path, redis: RedisServer | None) -> str:
    return redis.isolated_url() if redis is not None and backend == "redis" else f"sqlite:///{tmp / 'state.db'}"


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_importer_passes_every_check_on_three_instances(backend: str, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    redis = request.getfixturevalue("redis") if backend == "redis" else None
    cmd = serve("examples/importer.py:app", state=_state(backend, tmp_path, redis))
    # examples/importer.py:app takes no principals (every caller is anonymous): the theft check runs on the
    # cluster app below, which reads a bearer token.
    rc, rep, _ = audit(["--launch", cmd, "--instances", "3", "--flow", str(HERE / "flows" / "importer.yaml")],
                       tmp_path, {"MCP_STATELESS_KEYS": KEYS})
    assert_clean(rc, rep)
    passed = by_status(rep, "pass")
    # The handle flow really ran across instances and across restarts.
    assert {"flow.importer.instances", "flow.importer.restart", "stateless.instances", "era"} <= set(passed)
    assert rep["target"] | {"description": "", "url": ""} == {
        "kind": "http", "description": "", "url": "", "instances": 3, "era": "dual", "versions": ["2026-07-28"],
        "serverInfo": {"name": "importer", "version": "1.0.0"}}


def test_importer_handles_refused_to_another_principal(tmp_path: Path) -> None:
    """examples/importer.py with a bearer principal (the cluster tests' app): handles stay with their owner."""
    cmd = serve("tests/cluster/cluster_app.py:app", state=f"sqlite:///{tmp_path / 's.db'}")
    rc, rep, _ = audit(["--launch", cmd, "--instances", "2", "--flow", str(HERE / "flows" / "importer.yaml"),
                        "--principal", "alice=alice", "--principal", "bob=bob", "--only", "flow"], tmp_path,
                       {"MCP_STATELESS_KEYS": KEYS})
    assert_clean(rc, rep)
    assert "every handle refused to 'bob'" in by_status(rep, "pass")["flow.importer.principal"]["finding"]


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_conformance_server_passes_every_check_on_three_instances(backend: str, tmp_path: Path,
                                                                  request: pytest.FixtureRequest) -> None:
    redis = request.getfixturevalue("redis") if backend == "redis" else None
    cmd = serve("examples/conformance_server.py:app", state=_state(backend, tmp_path, redis))
    rc, rep, _ = audit(["--launch", cmd, "--instances", "3"], tmp_path, {"MCP_STATELESS_KEYS": KEYS})
    assert_clean(rc, rep)
    passed = by_status(rep, "pass")
    assert {"mrtr.instances", "mrtr.restart", "mrtr.tampered-state", "stateless.history",
            "listen.fan-out", "tasks.instances", "tasks.restart", "broken.reconnect"} <= set(passed)
    # The fixtures that add and remove a tool and a prompt were among the earlier calls: what they
    # changed is shared state, so every instance lists the same afterwards.
    assert "test_trigger_tool_change, test_trigger_prompt_change on one connection, every list is the same " \
           "on new connections to all 3 instance(s)" in passed["stateless.history"]["finding"]
    assert "reached the listen streams of all 3 instance(s)" in passed["listen.fan-out"]["finding"]
    assert rep["target"]["url"].startswith("http://127.0.0.1:") and rep["target"]["url"].endswith("/mcp")
    assert rep["target"]["description"].startswith(rep["target"]["url"] + " → ")
    assert rep["summary"]["seconds"] < 60  # the bar for a full audit of three instances


def test_conformance_server_over_stdio(tmp_path: Path) -> None:
    # Tasks and the MRTR key must outlive the process the auditor restarts: a state file and shared keys.
    cmd = serve("examples/conformance_server.py:app", stdio=True, state=f"sqlite:///{tmp_path / 's.db'}")
    rc, rep, _ = audit(["--stdio", cmd], tmp_path, {"MCP_STATELESS_KEYS": KEYS})
    assert_clean(rc, rep)
    assert {"stdio.interleave", "stdio.cancel", "stateless.capabilities", "mrtr.restart",
            "tasks.restart"} <= set(by_status(rep, "pass"))


# ----------------------------------------------------------------------------- broken on purpose


def _broken() -> list[Any]:
    servers = HERE / "servers"
    flows = HERE / "flows"
    return [
        # Its one MRTR tool is named delete_everything: the auditor calls it only when told to.
        pytest.param(["--launch", serve(f"{servers}/mrtr_process_key.py:app"), "--instances", "3",
                      "--call-tool", "delete_everything"], {},
                     {"mrtr.instances": 5, "mrtr.restart": "restart"}, "Seal requestState with a key every instance",
                     id="ours-per-process-mrtr-key"),
        pytest.param(["--launch", serve(f"{servers}/memory_handles.py:app"), "--instances", "3",
                      "--flow", str(flows / "cart.yaml")], {},
                     {"flow.cart.instances": 4, "flow.cart.restart": "restart"}, "not in process memory",
                     id="ours-handles-in-process-memory"),
        pytest.param(["--stdio", serve(f"{servers}/cached_caps.py:app", stdio=True)], {},
                     {"stateless.capabilities": 1}, "never cache them per connection, stdio process",
                     id="ours-capabilities-cached-per-process"),
        pytest.param(["--launch", serve(f"{servers}/unbound_handles.py:app"), "--instances", "3",
                      "--flow", str(flows / "notes.json"), "--principal", "alice=alice", "--principal", "bob=bob"],
                     {"NOTES_DB": "{tmp}/notes.db"}, {"flow.notes.principal": 9},
                     "Bind every handle to the principal", id="ours-handle-not-bound-to-principal"),
        pytest.param(["--launch", serve(f"{servers}/listen_local.py:app"), "--instances", "3"], {},
                     {"listen.fan-out": 6}, "Publish change events on a bus every instance subscribes to",
                     id="ours-listen-bus-does-not-fan-out"),
        pytest.param(["--launch", serve(f"{servers}/stream_work.py:app"), "--instances", "3",
                      "--flow", str(flows / "bump_thread.yaml"), "--flow", str(flows / "bump_async.yaml")],
                     {"COUNTER_DB": "{tmp}/counter.db"},
                     {"flow.bump_thread.instances": "broken-stream", "flow.bump_thread.restart": "restart"},
                     "Treat a dropped response stream as cancellation", id="ours-work-continues-after-stream-breaks"),
        pytest.param(["--launch", serve(f"{servers}/tasks_memory.py:app"), "--instances", "3"], {},
                     {"tasks.instances": 8, "tasks.restart": "restart"}, "Keep task records in a store",
                     id="ours-tasks-in-process-memory"),
        pytest.param(["--launch", serve(f"{servers}/counter.py:app"), "--instances", "2"], {},
                     {"results.read-tools": 4}, "a read-only tool must answer the same whichever instance",
                     id="ours-counter-per-process"),
        pytest.param(["--stdio", serve(f"{servers}/counter.py:app", stdio=True)], {},
                     {"results.read-tools": 4}, "a read-only tool must answer the same whichever instance",
                     id="ours-counter-per-process-stdio"),
        pytest.param(["--stdio", f"{SDK_PY} {servers}/sdk_cached_caps.py"], {},
                     {"stateless.capabilities": 1}, "never cache them per connection, stdio process",
                     id="mcp-2.3.0-capabilities-cached-per-process"),
        pytest.param(["--launch", f"{SDK_PY} {servers}/sdk_session_cart.py {{port}}", "--instances", "3",
                      "--flow", str(flows / "cart.yaml")], {},
                     {"flow.cart.instances": 4, "flow.cart.restart": "restart"}, "not under a session",
                     id="mcp-2.3.0-session-keyed-cart"),
        pytest.param(["--launch", f"{SDK_PY} {servers}/sdk_dynamic_tools.py {{port}}", "--instances", "3"], {},
                     {"stateless.history": "balancer"}, "never of earlier calls",
                     id="mcp-2.3.0-tool-list-depends-on-earlier-calls"),
        pytest.param(["--launch", f"{SDK_PY} {servers}/sdk_plain_state.py {{port}}", "--instances", "3"], {},
                     {"mrtr.tampered-state": 5}, "an encoding (base64, JSON) is not a seal",
                     id="mcp-2.3.0-request-state-only-encoded"),
        pytest.param(["--launch", f"{FASTMCP_PY} {servers}/fastmcp_unlock_tools.py {{port}}", "--instances", "3"],
                     {}, {"stateless.history": "balancer"}, "never of earlier calls",
                     id="fastmcp-4.1.6-tool-list-depends-on-earlier-calls"),
    ]


@pytest.mark.parametrize(("args", "env", "expected", "fix"), _broken())
def test_broken_server_is_reported_with_its_step_and_fix_and_nothing_else(
        args: list[str], env: dict[str, str], expected: dict[str, Any], fix: str, tmp_path: Path) -> None:
    if any(str(SDK_PY) in a for a in args):
        need(SDK_PY, "the official SDK venv (mcp==2.3.0)")
    if any(str(FASTMCP_PY) in a for a in args):
        need(FASTMCP_PY, "the fastmcp venv (fastmcp==4.1.6)")
    rc, rep, junit = audit(args, tmp_path, {k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()})
    failed = by_status(rep, "fail")
    assert rc == 1 and rep["summary"]["ok"] is False
    assert {i: c["step"] for i, c in failed.items()} == expected
    assert by_status(rep, "warn") == {}
    for c in failed.values():
        assert fix in c["fix"] and c["evidence"], c
        assert all("request" in e and "response" in e for e in c["evidence"])
    # The JUnit file says the same, read by a JUnit parser.
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    cases = {case.name: case for case in suite}
    assert set(cases) == {c["id"] for c in rep["checks"]}
    failing = {name for name, case in cases.items() if any(isinstance(r, Failure) for r in case.result)}
    skipped = {name for name, case in cases.items() if any(isinstance(r, Skipped) for r in case.result)}
    assert failing == set(expected) and skipped == set(by_status(rep, "skip"))
    assert suite.failures == len(expected) and suite.tests == len(rep["checks"])



def test_named_mrtr_and_task_calls(tmp_path: Path) -> None:
    """--mrtr-tool and --task-tool pick calls the auditor would not find on its own (arguments given)."""
    cmd = serve("examples/conformance_server.py:app", state=f"sqlite:///{tmp_path / 's.db'}")
    rc, rep, _ = audit(["--launch", cmd, "--instances", "2", "--only", "mrtr", "--only", "tasks",
                        "--mrtr-tool", "test_input_required_result_multi_round",
                        "--task-tool", 'slow_compute={"seconds": 0.3, "label": "audit"}'], tmp_path,
                       {"MCP_STATELESS_KEYS": KEYS})
    assert_clean(rc, rep)
    passed = by_status(rep, "pass")
    assert passed["mrtr.instances"]["finding"].startswith("test_input_required_result_multi_round: 3 rounds")
    assert passed["tasks.instances"]["finding"].startswith("a slow_compute task seen by all 2 instance(s)")


@pytest.mark.parametrize(("sig", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_interrupting_an_audit_stops_every_instance_it_started(sig: str, status: int, tmp_path: Path) -> None:
    import signal
    import time

    cmd = serve("examples/conformance_server.py:app")
    proc = subprocess.Popen([EXE, "audit", "--launch", cmd, "--instances", "3", "--quiet"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    children: list[int] = []
    deadline = time.monotonic() + 30
    while len(children) < 3 and time.monotonic() < deadline and proc.poll() is None:
        out = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout
        children = [int(x) for x in out.split()]
        time.sleep(0.1)
    assert len(children) == 3, "the auditor did not start three instances"
    proc.send_signal(getattr(signal, sig))  # SIGTERM: how CI runners and timeout(1) stop a job
    assert proc.wait(60) == status
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_server_without_list_changed_is_held_to_the_dropped_call_only(tmp_path: Path) -> None:
    """fastmcp 4.1.6 declares `listChanged: false` everywhere and answers subscriptions/listen with -32601,
    which the spec allows a server that offers no listen; broken.reconnect then checks the dropped call
    and its retry alone instead of skipping on the refused listen."""
    need(FASTMCP_PY, "the fastmcp venv (fastmcp==4.1.6)")
    rc, rep, _ = audit(["--launch", f"{FASTMCP_PY} {HERE / 'servers' / 'fastmcp_unlock_tools.py'} {{port}}",
                        "--instances", "2", "--only", "broken"], tmp_path)
    assert rc == 0 and [c["id"] for c in rep["checks"]] == ["era", "broken.reconnect"]
    assert by_status(rep, "pass")["broken.reconnect"]["finding"] == (
        "after a dropped ping, the retry was answered (result (complete)); no listen to drop (the server "
        "declares no listChanged capability)")


def test_instances_that_all_fail_to_answer_are_not_a_pass_of_stateless_instances(tmp_path: Path) -> None:
    app = f"{HERE / 'servers' / 'stuck_lists.py'}:app"
    _, rep, _ = audit(["--launch", serve(app), "--instances", "2", "--only", "stateless.instances",
                       "--timeout", "1"], tmp_path)
    [check] = [c for c in rep["checks"] if c["id"] == "stateless.instances"]
    assert check["status"] == "warn", check
    assert check["finding"].startswith("could not compare the instances: tools/list: instance 1 gave no answer")


@pytest.mark.parametrize(("mode", "how"), [
    ("names", r"instance 2 also lists \['local_\d+'\], lacks \['local_\d+'\]"),
    ("details", r"instance 2 the same names, other details"),
])
def test_instances_that_answer_differently_fail_stateless_instances(mode: str, how: str, tmp_path: Path) -> None:
    """Every instance answers with a result, so a check comparing only "result or error" would pass this; the
    names differ in one mode and only a description in the other, so a check comparing names alone passes
    the second."""
    app = f"{HERE / 'servers' / 'per_instance.py'}:app"
    rc, rep, _ = audit(["--launch", serve(app), "--instances", "2", "--only", "stateless.instances"], tmp_path,
                       env={"PER_INSTANCE": mode})
    [check] = [c for c in rep["checks"] if c["id"] == "stateless.instances"]
    assert check["status"] == "fail", check
    assert rc != 0
    assert re.fullmatch(r"instances answer the same request differently: tools/list: compared with instance 1, "
                        + how, check["finding"]), check["finding"]


def test_a_counter_in_a_shared_sqlite_file_reads_the_same_everywhere(tmp_path: Path) -> None:
    """The clean counterpart of counter.py's per-process counter: one SQLite file for both instances."""
    app = f"{HERE / 'servers' / 'counter.py'}:app"
    rc, rep, _ = audit(["--launch", serve(app), "--instances", "2"], tmp_path,
                       {"COUNTER_DB": str(tmp_path / "counter.db")})
    assert_clean(rc, rep)
    assert by_status(rep, "pass")["results.read-tools"]["finding"] == (
        "count answer the same on all 2 instance(s) before and after calling bump (on instance 1) and after a "
        "restart of every instance")
    called = {c["name"]: c["checks"] for c in rep["tools"]["called"]}
    assert "results.read-tools" in called["count"] and "results.read-tools" in called["bump"]


def test_a_read_tool_named_on_the_command_line_is_compared(tmp_path: Path) -> None:
    """Without readOnlyHint, `count` is one more argument-free call; --read-tool makes it the reader."""
    app = f"{HERE / 'servers' / 'counter.py'}:app"
    args = ["--launch", serve(app), "--instances", "2", "--only", "results"]
    _, rep, _ = audit(args, tmp_path, {"COUNTER_READONLY": "0"})
    assert by_status(rep, "skip")["results.read-tools"]["finding"].startswith("skipped: no read-only tool")
    rc, rep, _ = audit([*args, "--read-tool", "count"], tmp_path, {"COUNTER_READONLY": "0"})
    [check] = [c for c in rep["checks"] if c["id"] == "results.read-tools"]
    assert rc == 1 and check["status"] == "fail", check
    assert re.fullmatch(
        r"a read-only tool's answer depends on the instance or the process: after calling bump \(on instance "
        r"(\d)\), count answers \{\"n\": ?1\} on instance \1; \{\"n\": ?0\} on instance \d \| a restart of every "
        r"instance changed what count answers \(instance \1: \{\"n\": ?1\} before, \{\"n\": ?0\} after\)",
        check["finding"]), check["finding"]


def test_a_tool_slower_than_the_timeout_is_left_out_after_its_first_call_and_named(tmp_path: Path) -> None:
    """`nap` takes 3 s, the timeout is 1 s: its first unanswered call marks it slow, the later checks leave it
    out (so no check spends its budget waiting on it, and none fails for it), and the report names it with
    the reason. Without the rule, stateless.capabilities waited 1 s per `nap` call and results.read-tools
    warned that `nap` never answered."""
    cmd = serve("tests/audit/servers/slow_tool.py:app")
    rc, rep, _ = audit(["--launch", cmd, "--instances", "2", "--timeout", "1",
                        "--only", "stateless", "--only", "results"], tmp_path)
    statuses = {c["id"]: c["status"] for c in rep["checks"]}
    assert statuses == {"era": "pass", "stateless.instances": "pass", "stateless.history": "pass",
                        "stateless.capabilities": "pass", "results.read-tools": "pass"}, rep["checks"]
    assert rc == 0
    skipped = {t["name"]: t["reason"] for t in rep["tools"]["skipped"]}
    assert skipped == {"nap": "no answer within 1 s (--timeout) when called: left out of the checks after that "
                              "call"}
    calls = {t["name"]: t["calls"] for t in rep["tools"]["called"]}
    assert calls["nap"] == 1  # by the first check that called it, never after
    assert calls["ping"] > 2
