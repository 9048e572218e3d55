"""The inventory on four published Python servers, pinned and unpacked by scripts/inventory-servers.sh.

The expected findings were checked by reading each server's code; each is true, and the set is exact so a
change in what the analyzer reports is a deliberate one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_stateless.inventory.engine import inventory
from services import need

SERVERS = Path(__file__).resolve().parents[2] / ".cache" / "inventory-servers"

_OFFICE_PRINTS = [("word_document_server/core/protection.py", n) for n in (82, 89)] + [
    ("word_document_server/core/tables.py", n)
    for n in (196, 219, 257, 283, 324, 406, 432, 454, 513, 553, 610, 652, 738, 772, 835, 865)] + [
    ("word_document_server/main.py", n) for n in (12, 48, 52, 79, 709, 717, 741, 743)]

EXPECTED: dict[str, set[tuple[str, int, str]]] = {
    # list_roots while handling a call (its answer stays local to the call: no client-answer-kept)
    "mcp-server-git-2026.7.10": {("mcp_server_git/server.py", 468, "server-request")},
    # the in-process insights list on the db object shared by every call, the unsolicited resources/updated, and
    # the database file on this instance's disk that the tools query and write (its path from the command line)
    "mcp-server-sqlite-2025.4.25": {("mcp_server_sqlite/server.py", 334, "module-state"),
                                    ("mcp_server_sqlite/server.py", 143, "local-file-state"),
                                    ("mcp_server_sqlite/server.py", 338, "unsolicited-notification")},
    # `mcp>=1.23.0` while server.py imports `McpError` from mcp.shared.exceptions, which mcp 2.x removed
    "mcp-server-time-2026.7.10": {("mcp_server_time-2026.7.10.dist-info/METADATA", 16, "dependency-range")},
    # banners and error prints on stdout of a stdio server (the prints of main.py's HTTP and SSE branches are not:
    # stdout is not the protocol channel there), the SSE transport, and the Streamable HTTP transport in FastMCP's
    # default stateful mode (`FastMCP("Word Document Server")` has no stateless_http=True)
    "office-word-mcp-server-1.1.11": {(f, n, "stdout-write") for f, n in _OFFICE_PRINTS}
                                     | {("word_document_server/main.py", 733, "get-stream"),
                                        ("word_document_server/main.py", 723, "session-id-read")},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_published_server_findings(name: str) -> None:
    root = SERVERS / name
    need(root, "the published Python servers (scripts/inventory-servers.sh)")
    assert {(f.file, f.line, f.kind) for f in inventory(root).findings} == EXPECTED[name]
