"""`mcp-stateless install HOST APP`: the exact config shape each host documents, merged without clobbering,
and a written stdio entry that really launches a server."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from mcp_stateless.cli.install import default_path
from services import CLI

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PYTHON = Path(CLI).read_text().splitlines()[0][2:].strip()  # the interpreter the command runs under: what it writes
ECHO = str(ROOT / "examples" / "echo.py")
STDIO = [PYTHON, "-m", "mcp_stateless.cli", "serve", ECHO + ":app", "--stdio"]
URL = "http://127.0.0.1:8000/mcp"


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("host", "expected"), [
    ("claude-desktop", {"mcpServers": {"echo": {"command": PYTHON, "args": STDIO[1:]}}}),
    ("claude-code", {"mcpServers": {"echo": {"type": "stdio", "command": PYTHON, "args": STDIO[1:]}}}),
    ("cursor", {"mcpServers": {"echo": {"command": PYTHON, "args": STDIO[1:]}}}),
    ("vscode", {"servers": {"echo": {"type": "stdio", "command": PYTHON, "args": STDIO[1:]}}}),
    ("mcp-json", {"mcpServers": {"echo": {"command": PYTHON, "args": STDIO[1:]}}}),
])
def test_stdio_entry_per_host(tmp_path: Path, host: str, expected: dict[str, object]) -> None:
    path = tmp_path / "cfg.json"
    r = cli("install", host, "examples/echo.py:app", "--config", str(path))
    assert (r.returncode, r.stdout, r.stderr) == (0, f"echo: written to {path}" + (
        " (restart Claude Desktop)" if host == "claude-desktop" else "") + "\n", "")
    assert json.loads(path.read_text()) == expected
    assert path.read_text().startswith('{\n  "')  # indented by two, as people keep these files


@pytest.mark.parametrize(("host", "expected"), [
    # Claude Desktop's file starts local processes only: the documented bridge is mcp-remote over stdio.
    ("claude-desktop", {"mcpServers": {"notes": {"command": "npx", "args": ["-y", "mcp-remote", URL]}}}),
    ("claude-code", {"mcpServers": {"notes": {"type": "http", "url": URL}}}),
    ("cursor", {"mcpServers": {"notes": {"url": URL}}}),
    ("vscode", {"servers": {"notes": {"type": "http", "url": URL}}}),
    ("mcp-json", {"mcpServers": {"notes": {"url": URL}}}),
])
def test_http_entry_per_host(tmp_path: Path, host: str, expected: dict[str, object]) -> None:
    path = tmp_path / "cfg.json"
    r = cli("install", host, "examples/echo.py", "--http", URL, "--name", "notes", "--config", str(path))
    assert r.returncode == 0, r.stderr
    assert json.loads(path.read_text()) == expected


def test_merge_keeps_other_servers_and_settings(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    other = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
    path.write_text(json.dumps({"inputs": [{"id": "k"}], "servers": {"memory": other}}))
    assert cli("install", "vscode", "examples/echo.py", "--config", str(path)).returncode == 0
    doc = json.loads(path.read_text())
    assert doc["inputs"] == [{"id": "k"}]
    assert list(doc["servers"]) == ["memory", "echo"]
    assert doc["servers"]["memory"] == other
    # the same entry again: nothing to do, the file is not rewritten
    before = path.stat().st_mtime_ns
    r = cli("install", "vscode", "examples/echo.py", "--config", str(path))
    assert (r.returncode, r.stdout) == (0, f"echo: already in {path}, unchanged\n")
    assert path.stat().st_mtime_ns == before


def test_same_name_differing_needs_force(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    assert cli("install", "cursor", "examples/echo.py", "--config", str(path)).returncode == 0
    first = path.read_text()
    r = cli("install", "cursor", "examples/echo.py", "--http", URL, "--config", str(path))
    assert r.returncode == 2
    assert r.stderr == (f"mcp-stateless: error: {path}: a server named 'echo' is already configured differently: "
                        "pass --force to replace it, or --name to add this one under another name\n")
    assert path.read_text() == first
    assert cli("install", "cursor", "examples/echo.py", "--http", URL, "--force",
               "--config", str(path)).returncode == 0
    assert json.loads(path.read_text()) == {"mcpServers": {"echo": {"url": URL}}}


@pytest.mark.parametrize(("content", "reason"), [
    ("{not json", "cannot read {path}: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
                  " (nothing was changed)"),
    ("[1, 2]", "{path} holds a JSON list, not an object (nothing was changed)"),
    ('{"mcpServers": []}', "{path}: its 'mcpServers' is a list, not an object: fix the file first"),
])
def test_unreadable_file_is_left_alone(tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(content)
    r = cli("install", "mcp-json", "examples/echo.py", "--config", str(path))
    assert (r.returncode, r.stderr) == (2, "mcp-stateless: error: " + reason.format(path=path) + "\n")
    assert path.read_text() == content


def test_env_and_serve_args(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    r = cli("install", "claude-code", "examples/echo.py", "--env", "MCP_STATELESS_STATE=memory://",
            "--serve-arg=--log-level=debug", "--config", str(path))
    assert r.returncode == 0, r.stderr
    assert json.loads(path.read_text())["mcpServers"]["echo"] == {
        "type": "stdio", "command": PYTHON,
        "args": ["-m", "mcp_stateless.cli", "serve", ECHO, "--stdio", "--log-level=debug"],
        "env": {"MCP_STATELESS_STATE": "memory://"}}


@pytest.mark.parametrize(("args", "err"), [
    (["cursor", "nope.py"], "cannot install 'nope.py': file nope.py does not exist"),
    (["cursor", "examples/echo.py", "--env", "X"], "--env expects KEY=VALUE, got 'X'"),
    (["cursor", "examples/echo.py", "--http", "127.0.0.1:8000"],
     "--http expects a URL such as http://127.0.0.1:8000/mcp, got '127.0.0.1:8000'"),
    (["vscode", "examples/echo.py", "--http", URL, "--env", "A=b"],
     "--env is for a launched server; with --http the host launches nothing"),
])
def test_usage_mistakes(tmp_path: Path, args: list[str], err: str) -> None:
    r = cli("install", *args, "--config", str(tmp_path / "x.json"))
    assert (r.returncode, r.stderr) == (2, f"mcp-stateless: error: {err}\n")
    assert not (tmp_path / "x.json").exists()


def test_print_forms() -> None:
    r = cli("install", "claude-code", "examples/echo.py:app", "--print")
    assert r.returncode == 0, r.stderr
    argv = shlex.split(r.stdout)
    assert argv[:4] == ["claude", "mcp", "add-json", "echo"] and len(argv) == 5
    assert json.loads(argv[4]) == {"type": "stdio", "command": PYTHON, "args": STDIO[1:]}
    r = cli("install", "vscode", "examples/echo.py:app", "--http", URL, "--print")
    assert json.loads(r.stdout) == {"servers": {"echo": {"type": "http", "url": URL}}}
    assert not (ROOT / ".vscode" / "mcp.json").exists() or "echo" not in (ROOT / ".vscode" / "mcp.json").read_text()


def test_default_paths(tmp_path: Path) -> None:
    env = {"HOME": "/home/u", "APPDATA": "C:/Users/u/AppData/Roaming"}
    assert default_path("claude-desktop", platform="darwin", environ=env) == Path(
        "/home/u/Library/Application Support/Claude/claude_desktop_config.json")
    assert default_path("claude-desktop", platform="win32", environ=env) == Path(
        "C:/Users/u/AppData/Roaming/Claude/claude_desktop_config.json")
    assert default_path("claude-desktop", platform="linux", environ=env) == Path(
        "/home/u/.config/Claude/claude_desktop_config.json")
    assert [default_path(h, cwd=tmp_path).relative_to(tmp_path).as_posix()
            for h in ("claude-code", "cursor", "vscode", "mcp-json")] == [
        ".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json", "mcp.json"]
    # without --config, the project files land in the working directory
    r = cli("install", "cursor", ECHO, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]["echo"]["args"][3] == ECHO


async def test_written_stdio_entry_serves(tmp_path: Path) -> None:
    """What a host would do: launch the entry's command from another directory and call a tool."""
    from mcp_stateless.client import Client

    path = tmp_path / "mcp.json"
    assert cli("install", "mcp-json", "examples/echo.py:app", "--env", "MCP_STATELESS_STATE=memory://",
               "--config", str(path)).returncode == 0
    entry = json.loads(path.read_text())["mcpServers"]["echo"]
    async with Client(stdio=[entry["command"], *entry["args"]], env=entry["env"], cwd=str(tmp_path)) as c:
        result = await c.call_tool("add", {"a": 2, "b": 3})
    assert result["content"] == [{"type": "text", "text": "5"}]
