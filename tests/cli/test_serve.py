"""`mcp-stateless serve` for real: subprocesses, real sockets, real requests, exact errors and exit codes."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from services import CLI, free_port

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PV = "2026-07-28"
KEY = "k1:" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "MCP_STATELESS_KEYS"}
    return {**e, "PYTHONUNBUFFERED": "1", **extra}


def run_cli(*args: str, timeout: float = 20, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=kw.pop("env", env()), **kw)


def body(rid: int, method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] | None = None) -> dict:
    p = dict(params or {})
    p["_meta"] = {"io.modelcontextprotocol/protocolVersion": PV,
                  "io.modelcontextprotocol/clientCapabilities": caps or {}}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": p}


def post(url: str, msg: dict[str, Any], **headers: str) -> httpx.Response:
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "MCP-Protocol-Version": PV, "Mcp-Method": msg["method"]}
    name = msg["params"].get("name")
    if name is not None:
        h["Mcp-Name"] = name
    h.update(headers)
    return httpx.post(url, content=orjson.dumps(msg), headers=h, timeout=10)


@contextlib.contextmanager
def http_server(*args: str, app: str = "examples/echo.py:app", command: Sequence[str] | None = None,
                **kw: Any) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`mcp-stateless serve APP --http` on a free port, up once it answers server/discover; `command`
    replaces `serve APP` (e.g. `bridge --upstream CMD`, which serves on the same edge)."""
    port = free_port()
    proc = subprocess.Popen([CLI, *(command or ["serve", app]), "--http", f"127.0.0.1:{port}", *args], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=kw.pop("env", env()), **kw)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if post(url, body(0, "server/discover")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.1)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


# ---------------------------------------------------------------------------------------------- help
def test_help_explains_both_transports() -> None:
    r = run_cli("--help")
    assert r.returncode == 0 and "serve" in r.stdout
    r = run_cli("serve", "--help")
    assert r.returncode == 0
    for needle in ("--stdio", "--http HOST:PORT", "--workers", "--allowed-origin", "--allowed-host",
                   "--max-body", "--log-level", "path/to/file.py:attr", "--idle-timeout", "--header-timeout",
                   "--body-timeout", "--max-connections", "--tool-threads", "examples/echo.py:app --stdio",
                   "examples/echo.py:app --http 127.0.0.1:8000", "MCP_STATELESS_KEYS"):
        assert needle in r.stdout, needle


def test_no_command_prints_help_and_fails() -> None:
    r = run_cli()
    assert r.returncode == 2 and "serve" in r.stdout


# ---------------------------------------------------------------------------------------------- errors
LOAD = "mcp-stateless: error: cannot load "


@pytest.mark.parametrize(("app", "expected"), [
    ("nope/missing.py:app", LOAD + "'nope/missing.py:app': file nope/missing.py does not exist"),
    ("no_such_module_xyz:app", LOAD + "'no_such_module_xyz:app': no module named 'no_such_module_xyz' on the "
     "import path. Give a file path (path/to/app.py:app), run from the directory that contains the module, or "
     "add that directory to PYTHONPATH."),
    ("examples/echo.py:nothing", LOAD + "'examples/echo.py:nothing': examples/echo.py has no attribute 'nothing'"),
    ("examples/echo.py:__doc__", LOAD + "'examples/echo.py:__doc__': __doc__ is a str, not an mcp_stateless.App"),
    ("examples/echo.py:echo", LOAD + "'examples/echo.py:echo': calling echo() to build "
     "the app raised TypeError: echo() missing 1 required positional argument: 'text'"),
    (":app", "mcp-stateless: error: invalid APP ':app': expected module:attr or path/to/file.py:attr"),
])
@pytest.mark.parametrize("mode", [["--stdio"], ["--http", "127.0.0.1:0"]])
def test_bad_app_is_one_clear_line(app: str, expected: str, mode: list[str]) -> None:
    assert one_error_line(run_cli("serve", app, *mode)) == expected


def test_app_that_fails_to_import_shows_its_traceback_then_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.py"
    bad.write_text("import os\nraise RuntimeError('no config')\n")
    r = run_cli("serve", f"{bad}:app", "--stdio")
    assert (r.returncode, r.stdout) == (2, "")
    lines = r.stderr.strip().splitlines()
    assert lines[:2] == ["Traceback (most recent call last):", f'  File "{bad}", line 2, in <module>']
    assert lines[-1].endswith("importing it raised RuntimeError: no config")
    bad.write_text("def f(:\n")
    line = one_error_line(run_cli("serve", f"{bad}:app", "--stdio"))
    assert "syntax error in" in line and "line 1" in line


def test_port_in_use_is_one_clear_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        line = one_error_line(run_cli("serve", "examples/echo.py:app", "--http", f"127.0.0.1:{port}"))
    assert line == f"mcp-stateless: error: cannot listen on 127.0.0.1:{port}: Address already in use"


@pytest.mark.parametrize(("args", "fragment"), [
    (["--http", "localhost"], "--http expects HOST:PORT (e.g. 127.0.0.1:8000), got 'localhost'"),
    (["--http", "127.0.0.1:99999"], "--http expects HOST:PORT"),
    (["--http", "127.0.0.1:8000", "--workers", "0"], "--workers must be at least 1"),
    (["--http", "127.0.0.1:8000", "--workers", "two"], "argument --workers: invalid int value: 'two'"),
    (["--http", "127.0.0.1:8000", "--max-body", "0"], "--max-body must be positive"),
    (["--http", "127.0.0.1:8000", "--log-level", "loud"], "argument --log-level: invalid choice: 'loud'"),
    (["--http", "127.0.0.1:8000", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    ([], "one of the arguments --stdio --http is required"),
    (["--stdio", "--http", "127.0.0.1:8000"], "not allowed with argument"),
])
def test_bad_option_is_one_clear_line(args: list[str], fragment: str) -> None:
    line = one_error_line(run_cli("serve", "examples/echo.py:app", *args))
    assert line.startswith("mcp-stateless")
    assert fragment in line


@pytest.mark.parametrize(("args", "line"), [
    (["--upstream", "true", "--http", "127.0.0.1:8000", "--forward-authorization"],
     "--forward-authorization needs --upstream-url (a stdio upstream takes no credentials)"),
    (["--upstream-url", "http://127.0.0.1:9/mcp", "--stdio", "--forward-authorization"],
     "--forward-authorization needs an --http front (a stdio client sends no Authorization)"),
    (["--upstream-url", "http://127.0.0.1:9/mcp", "--http", "127.0.0.1:8000", "--upstream-watches", "0"],
     "--upstream-watches must be at least 1"),
])
def test_bridge_refuses_credentials_it_could_not_forward(args: list[str], line: str) -> None:
    assert one_error_line(run_cli("bridge", *args)) == f"mcp-stateless: error: {line}"


def test_workers_need_a_shared_key() -> None:
    line = one_error_line(run_cli("serve", "examples/echo.py:app", "--http", f"127.0.0.1:{free_port()}",
                                  "--workers", "2"))
    assert line == ("mcp-stateless: error: 2 workers need a shared MRTR key: set MCP_STATELESS_KEYS=kid:base64secret "
                    "(the same on every instance)")
    line = one_error_line(run_cli("serve", "examples/echo.py:app", "--http", f"127.0.0.1:{free_port()}",
                                  "--workers", "2", env=env(MCP_STATELESS_KEYS="k1")))
    assert line.startswith("mcp-stateless: error: MCP_STATELESS_KEYS: ")


# ---------------------------------------------------------------------------------------------- serving
def test_serve_http_answers_and_stops_on_sigterm() -> None:
    with http_server("--log-level", "warning") as (url, proc):
        r = post(url, body(1, "tools/call", {"name": "echo", "arguments": {"text": "hi ✓"}}))
        assert r.status_code == 200
        assert r.json()["result"]["content"] == [{"type": "text", "text": "hi ✓"}]
        r = post(url, body(2, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))
        assert r.json()["result"]["content"] == [{"type": "text", "text": "5"}]
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has shut down
        assert time.monotonic() - t0 < 5


def test_serve_module_attr_form() -> None:
    with http_server(app="echo:app", env=env(PYTHONPATH=str(ROOT / "examples"))) as (url, _proc):
        r = post(url, body(1, "tools/call", {"name": "add", "arguments": {"a": 40, "b": 2}}))
        assert r.json()["result"]["content"] == [{"type": "text", "text": "42"}]


def test_max_body_and_origin_and_host_options() -> None:
    with http_server("--max-body", "600", "--allowed-origin", "https://app.example.com",
                     "--allowed-host", "mcp.example.com") as (url, _proc):
        ok = body(1, "tools/call", {"name": "echo", "arguments": {"text": "x" * 100}})
        assert post(url, ok).status_code == 200
        big = body(2, "tools/call", {"name": "echo", "arguments": {"text": "x" * 1000}})
        assert post(url, big).status_code == 413
        assert post(url, ok, Origin="https://evil.example.net").status_code == 403
        assert post(url, ok, Origin="https://app.example.com").status_code == 200
        assert post(url, ok, Host="mcp.example.com").status_code == 200
        assert post(url, ok, Host="other.example.com").status_code in (403, 421)


def test_loopback_default_refuses_foreign_origin() -> None:
    with http_server() as (url, _proc):
        ok = body(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
        assert post(url, ok, Origin="https://evil.example.net").status_code == 403


def test_two_workers_share_the_key_and_answer_mrtr_anywhere() -> None:
    with http_server("--workers", "2", "--log-level", "info", app="tests/apps/stdio_app.py:app",
                     env=env(MCP_STATELESS_KEYS=KEY)) as (url, proc):
        caps = {"elicitation": {}}
        pids: set[str] = set()
        for i in range(12):  # bounded: rounds go to whichever worker accepts the connection
            first = post(url, body(10 + i, "tools/call", {"name": "greet", "arguments": {}}, caps)).json()
            state = first["result"]["requestState"]
            retry = body(100 + i, "tools/call", {
                "name": "greet", "arguments": {}, "requestState": state,
                "inputResponses": {"name": {"action": "accept", "content": {"name": f"W{i}"}}}}, caps)
            r = post(url, retry)
            assert r.json()["result"]["content"] == [{"type": "text", "text": f"Hello, W{i}!"}]
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=20)
        assert proc.returncode in (0, -signal.SIGTERM)
        for line in err.splitlines():
            if "Started server process" in line:
                pids.add(line.split("[")[-1].rstrip("]"))
        assert len(pids) == 2, err


def test_serve_stdio_round_trip() -> None:
    msgs = [body(1, "tools/call", {"name": "echo", "arguments": {"text": "over stdio"}}),
            body(2, "tools/list")]
    r = subprocess.run([CLI, "serve", "examples/echo.py:app", "--stdio"], cwd=ROOT, capture_output=True,
                       timeout=20, env=env(), input=b"".join(orjson.dumps(m) + b"\n" for m in msgs))
    assert r.returncode == 0
    out = sorted((orjson.loads(line) for line in r.stdout.splitlines()), key=lambda m: m["id"])
    assert out[0]["result"]["content"] == [{"type": "text", "text": "over stdio"}]
    assert [t["name"] for t in out[1]["result"]["tools"]] == ["echo", "add"]


def test_serve_stdio_ends_on_sigterm_like_on_eof(tmp_path: Path) -> None:
    """A stdio host stops its server with SIGTERM (the SDKs' clients do, after closing stdin, or at once): the
    server ends as on EOF — its lifespan's exit runs, the status is 0 — instead of dying mid-flight."""
    log = tmp_path / "lifespan.log"
    proc = subprocess.Popen([CLI, "serve", "tests/apps/lifespan_app.py:app", "--stdio"], cwd=ROOT,
                            env={**env(), "LIFESPAN_LOG": str(log)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(orjson.dumps(body(1, "tools/call", {"name": "whoami", "arguments": {}})) + b"\n")
        proc.stdin.flush()
        reply = orjson.loads(proc.stdout.readline())
        assert reply["result"]["content"] == [{"type": "text", "text": f"{proc.pid}:1"}]
        proc.send_signal(signal.SIGTERM)  # stdin still open
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert log.read_text().splitlines() == [f"enter {proc.pid}", f"exit {proc.pid}"]


def test_serve_stdio_reads_requests_from_a_file(tmp_path: Path) -> None:
    f = tmp_path / "requests.jsonl"
    f.write_bytes(orjson.dumps(body(1, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})) + b"\n")
    with f.open("rb") as stdin:
        r = subprocess.run([CLI, "serve", "examples/echo.py:app", "--stdio"], cwd=ROOT, capture_output=True,
                           timeout=20, env=env(), stdin=stdin)
    assert r.returncode == 0
    assert orjson.loads(r.stdout)["result"]["content"] == [{"type": "text", "text": "2"}]
