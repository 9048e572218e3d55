"""`mcp-stateless audit` on 2025-only servers: the legacy profile (the guide's four tests run through 2025
sessions) and the migration plan. Fixtures keep a counter per session, per process, or in a shared SQLite file
(the clean counterpart); the published servers are the ones scripts/setup.sh installs: the reference everything
server over Streamable HTTP (its sessions live in one process: the true failure), the reference filesystem
server and mcp-server-time over stdio (nothing kept: clean), and mcp-proxy serving mcp-server-time over
Streamable HTTP (sessionful by default: the true failure; `--stateless`: clean)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from auditlib import INTEROP, NODE, ROOT, audit, by_status

from mcp_stateless.audit import to_markdown
from services import need

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

SERVERS = Path(__file__).resolve().parent / "servers"
SDK1_PY = ROOT / ".cache" / "venv-mcp-1.30.0" / "bin" / "python"
EVERYTHING = ROOT / "tools/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM = ROOT / "tools/node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
TIME = ROOT / ".cache" / "venv-mcp-server-time-2025.9.25" / "bin" / "mcp-server-time"
PROXY = ROOT / ".cache" / "venv-mcp-proxy-0.8.2" / "bin" / "mcp-proxy"
CONVERT = 'convert_time={"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}'
LEGACY_CHECKS = {"legacy.sessions", "legacy.history", "legacy.results", "legacy.restart", "legacy.stdio",
                 "legacy.broken-stream"}


def _legacy(rep: dict[str, Any]) -> dict[str, str]:
    """Each legacy check's status, and the era's."""
    return {c["id"]: c["status"] for c in rep["checks"] if c["id"] in LEGACY_CHECKS | {"era"}}


def _plan(rep: dict[str, Any]) -> list[int]:
    return [item["step"] for item in rep.get("migrationPlan", [])]


def _modern_skipped(rep: dict[str, Any]) -> None:
    """Every check of the modern profile is skipped on a 2025-only server, saying why."""
    for c in rep["checks"]:
        if c["id"] not in LEGACY_CHECKS | {"era"}:
            assert c["status"] == "skip" and c["finding"] == "skipped: the server does not speak 2026-07-28", c


def _counters(mode: str, tmp: Path) -> list[str]:
    need(SDK1_PY, "the 2025-era SDK venv (mcp==1.30.0)")
    db = f" {tmp / 'counter.db'}" if mode == "shared" else ""
    return ["--launch", f"{SDK1_PY} {SERVERS / 'legacy_counters.py'} {mode} {{port}}{db}", "--instances", "2"]


def test_a_counter_kept_per_session_fails_sessions_results_and_restart(tmp_path: Path) -> None:
    rc, rep, junit = audit(_counters("session", tmp_path), tmp_path)
    assert rc == 1 and rep["target"]["era"] == "legacy"
    assert _legacy(rep) == {"era": "fail", "legacy.sessions": "fail", "legacy.history": "pass",
                            "legacy.results": "fail", "legacy.restart": "fail", "legacy.stdio": "skip",
                            "legacy.broken-stream": "pass"}
    failed = by_status(rep, "fail")
    assert failed["legacy.sessions"]["finding"].startswith(
        "a 2025 session opened on instance 1 is unknown to the others: instance 2 answers HTTP 404")
    assert ('after calling bump in one session, count answers {"result":"1"} there and {"result":"0"} in a new '
            "session on instance 1 (state kept by the session)") in failed["legacy.results"]["finding"]
    assert failed["legacy.restart"]["finding"].startswith(
        "a restart ends every open 2025 session: after every instance restarted, the session's next request got "
        "HTTP 404")
    assert "Mcp-Session-Id (sticky sessions)" in failed["legacy.sessions"]["fix"]
    assert _plan(rep) == [1, 2, 3, 4, 7]
    step4 = rep["migrationPlan"][3]
    assert step4["title"] == "Remove hidden protocol state"
    assert step4["checks"] == ["legacy.sessions", "legacy.results", "legacy.restart"]
    _modern_skipped(rep)
    # the plan in the other formats: Markdown bullets keep the step numbers (an ordered list renumbers from 1)
    md = to_markdown(rep)
    assert "#### Migration plan" in md and "- **Step 7. Update Streamable HTTP routing**: " in md
    props = {p.get("name"): p.get("value") for p in ElementTree.parse(junit).iter("property")}
    assert props["plan.step7"].startswith("Update Streamable HTTP routing: its sessions keep a standalone GET")
    assert [k for k in props if k.startswith("plan.")] == ["plan.step1", "plan.step2", "plan.step3", "plan.step4",
                                                            "plan.step7"]


def test_a_counter_kept_per_process_differs_by_instance_and_after_a_restart(tmp_path: Path) -> None:
    rc, rep, _ = audit(_counters("process", tmp_path), tmp_path)
    assert rc == 1
    assert _legacy(rep)["legacy.results"] == "fail" and _legacy(rep)["legacy.history"] == "fail"
    # its resource is named after its process: a difference before any call, not one the calls made
    assert by_status(rep, "fail")["legacy.history"]["finding"].startswith(
        "lists depend on the session, the process or the instance (calling bump, count in one session): "
        "resources/list differs by instance before any call: compared with instance 1, instance 2 also lists "
        "['counter://process-")
    finding = by_status(rep, "fail")["legacy.results"]["finding"]
    # legacy.history called bump once on instance 1 before this check, then this check called it again there
    assert ('before this check called anything, count answers {"result":"1"} on instance 1; {"result":"0"} on '
            "instance 2") in finding
    assert ('after calling bump in one session, count answers {"result":"2"} on instance 1; {"result":"0"} on '
            "instance 2 (state kept by the process)") in finding
    assert ('a restart of every instance changed what count answers (instance 1: {"result":"2"} before, '
            '{"result":"0"} after)') in finding


def test_a_counter_in_a_shared_store_without_sessions_passes_every_legacy_check(tmp_path: Path) -> None:
    rc, rep, _ = audit(_counters("shared", tmp_path), tmp_path)
    assert rc == 1  # the era check: it is still 2025-only
    assert _legacy(rep) == {"era": "fail", "legacy.sessions": "pass", "legacy.history": "pass",
                            "legacy.results": "pass", "legacy.restart": "pass", "legacy.stdio": "skip",
                            "legacy.broken-stream": "pass"}
    passed = by_status(rep, "pass")
    assert passed["legacy.sessions"]["finding"] == (
        "the server opens no session (no Mcp-Session-Id): all 2 instances answer each request on its own, as "
        "2026-07-28 needs")
    assert passed["legacy.results"]["finding"] == (
        "count answer the same in new sessions on all 2 instance(s) and in the session that called bump and after "
        "a restart of every instance")
    assert _plan(rep) == [1, 2, 3]
    assert [c["name"] for c in rep["tools"]["called"]] == ["bump", "count"]


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_the_legacy_sdk_servers_process_wide_toggle_is_found(transport: str, tmp_path: Path) -> None:
    """tests/interop/servers/ts_legacy_server.mjs (@modelcontextprotocol/sdk 1.x): `toggle` adds the `extra`
    tool in the memory of the process that served it (every session of that process sees it)."""
    need(NODE, "Node 22 (tools/node)")
    server = f"{NODE} {INTEROP / 'ts_legacy_server.mjs'}"
    args = ["--launch", f"{server} http {{port}}", "--instances", "2"] if transport == "http" \
        else ["--stdio", f"{server} stdio"]
    rc, rep, _ = audit(args, tmp_path)
    history = by_status(rep, "fail")["legacy.history"]["finding"]
    if transport == "http":
        assert _legacy(rep) == {"era": "fail", "legacy.sessions": "fail", "legacy.history": "fail",
                                "legacy.results": "skip", "legacy.restart": "fail", "legacy.stdio": "skip",
                                "legacy.broken-stream": "pass"}
        assert ("tools/list (kept by the process): the calls changed it on instance 1, not elsewhere: compared "
                "with the session that made the calls, a new session on instance 2 lacks ['extra']") in history
        assert _plan(rep) == [1, 2, 3, 4, 6, 7]
    else:
        assert _legacy(rep) == {"era": "fail", "legacy.sessions": "skip", "legacy.history": "fail",
                                "legacy.results": "skip", "legacy.restart": "skip", "legacy.stdio": "pass",
                                "legacy.broken-stream": "pass"}
        assert ("tools/list (kept by the process, its one session): compared with the session that made the "
                "calls, a new process lacks ['extra']") in history
        assert _plan(rep) == [1, 2, 3, 4, 6]
    assert rc == 1
    _modern_skipped(rep)


def test_the_published_everything_server_over_http_keeps_its_sessions_in_one_process(tmp_path: Path) -> None:
    """@modelcontextprotocol/server-everything 2026.8.31 (SDK 1.x, `streamableHttp`), two instances: its
    sessions are the transport's in-memory map, so a session is unknown to the other instance and ends with a
    restart. `get-env` is left out: it answers each instance's own environment (the auditor gives each its
    own PORT), a difference the auditor made."""
    need(NODE, "Node 22 (tools/node)")
    need(EVERYTHING, "@modelcontextprotocol/server-everything 2026.8.31 (tools/node)")
    rc, rep, _ = audit(["--launch", f"env PORT={{port}} {NODE} {EVERYTHING} streamableHttp", "--instances", "2",
                        "--exclude-tool", "get-env", "--exclude-tool", "trigger-long-running-operation"], tmp_path)
    assert rc == 1 and rep["target"]["serverInfo"]["name"] == "mcp-servers/everything"
    assert _legacy(rep) == {"era": "fail", "legacy.sessions": "fail", "legacy.history": "pass",
                            "legacy.results": "pass", "legacy.restart": "fail", "legacy.stdio": "skip",
                            "legacy.broken-stream": "pass"}
    failed = by_status(rep, "fail")
    # get-resource-reference embeds the time of day ("created at 21:04:05"): not compared, and said so.
    assert by_status(rep, "pass")["legacy.results"]["finding"].endswith(
        "(not compared, they vary on their own: get-resource-reference)")
    assert failed["legacy.sessions"]["finding"].startswith(
        "a 2025 session opened on instance 1 is unknown to the others: instance 2 answers error -32000 "
        "'Bad Request: No valid session ID provided' (HTTP 400)")
    assert "standalone GET stream" in by_status(rep, "pass")["legacy.broken-stream"]["finding"]
    assert _plan(rep) == [1, 2, 3, 4, 6, 7]
    why = {item["step"]: item["why"] for item in rep["migrationPlan"]}
    assert "it declares logging: logging/setLevel is session state; 2026-07-28 takes the log level per request" \
        in why[4]
    assert why[6] == ["it declares tools.listChanged, prompts.listChanged, resources.listChanged, "
                      "resources.subscribe: notifications after the session become subscriptions/listen events"]


def test_the_published_filesystem_and_time_servers_over_stdio_keep_nothing(tmp_path: Path) -> None:
    """@modelcontextprotocol/server-filesystem 2026.8.31 and mcp-server-time 2025.9.25 (Python SDK 1.x), each
    over stdio: every legacy check that applies passes; the plan is the envelope, discover and results (and
    listen, for the filesystem server's tools.listChanged)."""
    need(NODE, "Node 22 (tools/node)")
    need(FILESYSTEM, "@modelcontextprotocol/server-filesystem 2026.8.31 (tools/node)")
    need(TIME, "mcp-server-time 2025.9.25 (scripts/setup.sh)")
    rc, rep, _ = audit(["--stdio", f"{NODE} {FILESYSTEM} {tmp_path}"], tmp_path)
    assert rc == 1 and _legacy(rep) == {
        "era": "fail", "legacy.sessions": "skip", "legacy.history": "pass", "legacy.results": "pass",
        "legacy.restart": "skip", "legacy.stdio": "pass", "legacy.broken-stream": "pass"}
    assert by_status(rep, "pass")["legacy.results"]["finding"].startswith(
        "list_allowed_directories answer the same in new processes")
    assert _plan(rep) == [1, 2, 3, 6]  # it declares tools.listChanged (the SDK's default for McpServer)
    rc, rep, _ = audit(["--stdio", str(TIME), "--read-tool", CONVERT], tmp_path)
    assert rc == 1 and rep["target"]["serverInfo"]["name"] == "mcp-time"
    assert _legacy(rep) == {"era": "fail", "legacy.sessions": "skip", "legacy.history": "skip",
                            "legacy.results": "pass", "legacy.restart": "skip", "legacy.stdio": "pass",
                            "legacy.broken-stream": "pass"}
    assert by_status(rep, "skip")["legacy.history"]["finding"] == \
        "skipped: no argument-free tool the auditor may call"
    assert _plan(rep) == [1, 2, 3]


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("named", [False, True])
def test_a_2025_server_that_asks_anyway_is_declined_and_deletes_nothing(transport: str, named: bool,
                                                                       tmp_path: Path) -> None:
    """tests/audit/servers/legacy_confirm_wipe.py asks although the auditor declared no capability: `wipe`
    elicits on its call's stream, `tidy_up` samples through the session (the GET stream, over HTTP). Each gets
    a refusal, so nothing is deleted; `wipe` (a deletion's name) is called only when named."""
    need(SDK1_PY, "the 2025-era SDK venv (mcp==1.30.0)")
    log, data = tmp_path / "answers.log", tmp_path / "data.txt"
    data.write_text("precious")
    server = f"{SDK1_PY} {SERVERS / 'legacy_confirm_wipe.py'}"
    args = ["--launch", f"{server} http {{port}}", "--instances", "2"] if transport == "http" \
        else ["--stdio", f"{server} stdio"]
    rc, rep, _ = audit([*args, *(["--call-tool", "wipe"] if named else [])], tmp_path,
                       {"WIPE_LOG": str(log), "WIPE_DATA": str(data)})
    assert data.read_text() == "precious"
    heard = log.read_text().splitlines()
    called = {c["name"] for c in rep["tools"]["called"]}
    answers = {a["answer"]: a["count"] for a in rep["tools"]["answers"]}
    refused = "sampling refused: declined: the mcp-stateless auditor never answers for a model"
    if named:
        assert called == {"wipe", "tidy_up"} and set(heard) == {"decline", refused}
        assert set(answers) == {"elicitation decline", "sampling refused (a JSON-RPC error)"}
    else:
        assert called == {"tidy_up"} and set(heard) == {refused}
        assert set(answers) == {"sampling refused (a JSON-RPC error)"}
        assert {"name": "wipe", "reason": "its name suggests deletion ('wipe' in 'wipe') (name it with --call-tool "
                "to call it)"} in rep["tools"]["skipped"]
    assert answers["sampling refused (a JSON-RPC error)"] == heard.count(refused)
    assert rc == 1 and _legacy(rep)["legacy.history"] == "pass"


@pytest.mark.parametrize("stateless", [False, True])
def test_the_published_mcp_proxy_over_http_keeps_sessions_unless_stateless(stateless: bool, tmp_path: Path) -> None:
    """mcp-proxy 0.8.2 (Python SDK 1.x, Starlette) serving mcp-server-time 2025.9.25 over Streamable HTTP at
    /mcp/, two instances: by default its StreamableHTTPSessionManager keeps sessions in one process; with
    --stateless it mints none, and every legacy check passes."""
    need(PROXY, "mcp-proxy 0.8.2 (scripts/setup.sh)")
    need(TIME, "mcp-server-time 2025.9.25 (scripts/setup.sh)")
    flag = " --stateless" if stateless else ""
    rc, rep, _ = audit(["--launch", f"{PROXY}{flag} --host 127.0.0.1 --port {{port}} {TIME}", "--path", "/mcp/",
                        "--instances", "2", "--read-tool", CONVERT], tmp_path)
    assert rc == 1 and rep["target"]["serverInfo"]["name"] == "mcp-time"
    results = by_status(rep, "pass")["legacy.results"]["finding"]
    assert results.startswith(f"{CONVERT.replace(' ', '').replace('=', ' ', 1)} answer the same in new sessions on "
                              "all 2 instance(s) and after a restart of every instance"), results
    if stateless:
        assert _legacy(rep) == {"era": "fail", "legacy.sessions": "pass", "legacy.history": "skip",
                                "legacy.results": "pass", "legacy.restart": "pass", "legacy.stdio": "skip",
                                "legacy.broken-stream": "pass"}
        assert _plan(rep) == [1, 2, 3]
        return
    assert _legacy(rep) == {"era": "fail", "legacy.sessions": "fail", "legacy.history": "skip",
                            "legacy.results": "pass", "legacy.restart": "fail", "legacy.stdio": "skip",
                            "legacy.broken-stream": "pass"}
    assert by_status(rep, "fail")["legacy.sessions"]["finding"].startswith(
        "a 2025 session opened on instance 1 is unknown to the others: instance 2 answers HTTP 404 without a "
        "JSON-RPC response")
    assert _plan(rep) == [1, 2, 3, 4, 7]
    assert rep["migrationPlan"][3]["checks"] == ["legacy.sessions", "legacy.restart"]


@pytest.mark.parametrize("mode", ["global", "context"])
def test_a_call_kept_in_a_process_global_answers_another_when_interleaved(mode: str, tmp_path: Path) -> None:
    """tests/audit/servers/legacy_current_call.py: `red` and `blue` answer the name of the call being served,
    kept in a module global (two interleaved calls on one process answer each other's) or, the clean
    counterpart, in a context variable."""
    rc, rep, _ = audit(["--stdio", f"{sys.executable} {SERVERS / 'legacy_current_call.py'} {mode}"], tmp_path)
    assert rc == 1
    status = _legacy(rep)
    assert {k: status[k] for k in ("legacy.history", "legacy.results", "legacy.broken-stream")} == {
        "legacy.history": "pass", "legacy.results": "pass", "legacy.broken-stream": "pass"}
    if mode == "context":
        assert status["legacy.stdio"] == "pass"
        assert by_status(rep, "pass")["legacy.stdio"]["finding"] == \
            "4 requests interleaved on one process answered as when sent alone"
        assert _plan(rep) == [1, 2, 3]
        return
    assert status["legacy.stdio"] == "fail"
    assert by_status(rep, "fail")["legacy.stdio"]["finding"].startswith(
        "requests interleaved on one process were not answered as when sent alone: red: alone red, interleaved "
        "blue")
    assert _plan(rep) == [1, 2, 3, 4] and rep["migrationPlan"][3]["checks"] == ["legacy.stdio"]


@pytest.mark.parametrize("mode", ["leaky", "tidy"])
def test_a_session_left_busy_by_a_dropped_stream_fails_broken_stream(mode: str, tmp_path: Path) -> None:
    """tests/audit/servers/legacy_busy_session.py serves one request at a time per session; in `leaky` mode a
    dropped response stream leaves the session marked busy, so its next request is refused (409)."""
    need(SDK1_PY, "the 2025-era SDK venv (mcp==1.30.0, for its uvicorn)")
    rc, rep, _ = audit(["--launch", f"{SDK1_PY} {SERVERS / 'legacy_busy_session.py'} {mode} {{port}}",
                        "--instances", "2"], tmp_path)
    assert rc == 1
    if mode == "tidy":
        assert _legacy(rep)["legacy.broken-stream"] == "pass"
        assert 8 not in _plan(rep)
        return
    assert _legacy(rep)["legacy.broken-stream"] == "fail"
    assert by_status(rep, "fail")["legacy.broken-stream"]["finding"] == (
        "after a dropped response stream, the session's next request got error -32000 'session busy' (HTTP 409)")
    assert _plan(rep) == [1, 2, 3, 4, 7, 8]
    assert rep["migrationPlan"][-1] == {
        "step": 8, "title": "Revisit failure behaviour", "checks": ["legacy.broken-stream"],
        "why": ["legacy.broken-stream: after a dropped response stream, the session's next request got error "
                "-32000 'session busy' (HTTP 409)"]}
