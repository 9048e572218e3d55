"""The era ladder (`protocol.legacy`) as pure code, and the separation of the two branches."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless.protocol import legacy
from mcp_stateless.protocol.envelope import Rejection

SRC = Path(__file__).resolve().parents[2] / "src" / "mcp_stateless"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}
SID = {"mcp-session-id": "s1.x.y.z"}


@pytest.mark.parametrize(("http", "message", "headers", "era"), [
    # the modern envelope wins, a session id on it is ignored
    ("POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}}, SID, "modern"),
    ("POST", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"_meta": MODERN_META}}, {}, "modern"),
    # initialize, responses, and anything bearing a session are legacy
    ("POST", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, {}, "legacy"),
    ("POST", {"jsonrpc": "2.0", "id": "mcps-1", "result": {}}, {}, "legacy"),
    ("POST", {"jsonrpc": "2.0", "id": "mcps-1", "error": {"code": -1, "message": "x"}}, SID, "legacy"),
    ("POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, SID, "legacy"),
    ("POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"_meta": {"progressToken": 1}}}, SID,
     "legacy"),
    ("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, SID, "legacy"),
    # claim-less without a session: modern (and the modern ladder's errors)
    ("POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {}, "modern"),
    ("POST", {"jsonrpc": "2.0", "method": "notifications/cancelled"}, {}, "modern"),
    ("POST", [{"jsonrpc": "2.0", "id": 1, "method": "initialize"}], {}, "modern"),
    ("GET", None, SID, "legacy"),
    ("DELETE", None, SID, "legacy"),
    ("GET", None, {}, "modern"),
    ("PUT", None, SID, "modern"),
])
def test_era_of(http: str, message: Any, headers: dict[str, str], era: str) -> None:
    assert legacy.era_of(http, message, headers) == era


def test_stdio_era() -> None:
    assert legacy.stdio_era({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}) == "legacy"
    assert legacy.stdio_era({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}) == "modern"
    assert legacy.stdio_era("junk") == "modern"


def test_negotiate() -> None:
    assert legacy.negotiate("2025-06-18") == "2025-06-18"
    assert legacy.negotiate("2025-03-26") == "2025-03-26"
    assert legacy.negotiate("2024-11-05") == "2025-11-25"  # HTTP+SSE only: not on this transport (yet)
    assert legacy.negotiate("2026-07-28") == "2025-11-25"
    assert legacy.negotiate(None) == "2025-11-25"


@pytest.mark.parametrize(("message", "code"), [
    ([], -32600),
    ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, -32600),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, -32600),
    ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": []}, -32600),
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, -32600),
    ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1}}, -32600),
    ({"jsonrpc": "2.0", "id": 1, "result": []}, -32600),
    ({"jsonrpc": "2.0", "id": 1, "error": {"message": "no code"}}, -32600),
])
def test_classify_rejects(message: Any, code: int) -> None:
    got = legacy.classify(message)
    assert isinstance(got, Rejection) and got.error is not None and got.error.code == code


def test_classify_kinds() -> None:
    assert isinstance(legacy.classify({"jsonrpc": "2.0", "id": 1, "method": "ping"}), legacy.LegacyRequest)
    assert isinstance(legacy.classify({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                      legacy.LegacyNotification)
    resp = legacy.classify({"jsonrpc": "2.0", "id": "mcps-a", "result": {"action": "decline"}})
    assert isinstance(resp, legacy.LegacyResponse) and resp.result == {"action": "decline"} and resp.error is None


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                name = f"{base}.{node.module}" if node.module else base
                out.update(f"{name}.{a.name}" for a in node.names) if node.module is None else out.add(name)
            else:
                out.add(node.module or "")
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_the_modern_path_never_imports_the_legacy_branch() -> None:
    """Only the one HTTP assembly (`server/compose.py`, for `legacy="serve"`), the CLI, the legacy
    package itself and its public façade (`mcp_stateless/legacy.py`) import `server.legacy`; transports
    reach it through the `LegacyEndpoint` seam."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] == "cli" or rel.parts[:2] == ("server", "legacy") or rel.parts in (
                ("server", "compose.py"), ("legacy.py",)):
            continue
        if any(name.startswith("mcp_stateless.server.legacy") for name in _imports(path)):
            offenders.append(str(rel))
    assert offenders == []
