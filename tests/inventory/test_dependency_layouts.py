"""The dependency-range finding in each published layout names only the imports the code has, and the list of
what mcp 2.x removed is held to the real packages (mcp 1.30.0 imports each entry, mcp 2.3.0 raises)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mcp_stateless.inventory.engine import MCP1_ONLY_MODULES, MCP1_ONLY_NAMES, _poetry_requirement, inventory
from services import need

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
SERVERS = ROOT / ".cache" / "inventory-servers"


def _messages(root: Path) -> list[tuple[str, int, str]]:
    return [(f.file, f.line, f.message) for f in inventory(root).findings if f.kind == "dependency-range"]


def test_the_message_names_only_what_the_code_imports_in_each_layout() -> None:
    python = FIXTURES / "python"
    assert _messages(python / "deps_setup_cfg") == [
        ("setup.cfg", 7, "`mcp>=1.0` admits mcp 2.x, but the code imports 1.x-only modules "
                         "(mcp.shared.exceptions.McpError in server.py)")]
    assert _messages(python / "deps_poetry") == [
        ("pyproject.toml", 7, "`mcp>=1.2.0` admits mcp 2.x, but the code imports 1.x-only modules "
                              "(mcp.server.fastmcp in server.py)")]
    assert _messages(python / "deps_uv_lock") == [
        ("uv.lock", 6, "the lock installs `mcp==2.3.0`, but the code imports 1.x-only modules "
                       "(mcp.server.fastmcp in server.py)"),
        ("uv.lock", 18, "`mcp>=1.2.0` (as locked) admits mcp 2.x, but the code imports 1.x-only modules "
                        "(mcp.server.fastmcp in server.py)")]
    assert _messages(FIXTURES / "typescript" / "deps_workspaces") == [
        ("packages/server/package.json", 6, "`@modelcontextprotocol/sdk` `latest` in dependencies admits a 2.x or "
         "later SDK, but the code imports the 1.x package (@modelcontextprotocol/sdk/server/mcp.js in "
         "packages/server/src/index.ts)")]


def test_the_published_time_server_message_names_its_one_removed_import() -> None:
    root = SERVERS / "mcp-server-time-2026.7.10"
    need(root, "the published Python servers (scripts/inventory-servers.sh)")
    assert _messages(root) == [
        ("mcp_server_time-2026.7.10.dist-info/METADATA", 16, "`mcp>=1.23.0` admits mcp 2.x, but the code imports "
         "1.x-only modules (mcp.shared.exceptions.McpError in mcp_server_time/server.py)")]


@pytest.mark.parametrize(("poetry", "pep440"), [
    ("^1.9", "<2"), ("^0.3", "<0.4"), ("~1.26", "<1.27"), ("1.26.0", "==1.26.0"), ("*", ""), (">=1.2.0", ">=1.2.0"),
    (">=1.2,<2", ">=1.2,<2"), ("^1.9 || >=3", ">=3"), ({"version": "^1.2", "extras": ["cli"]}, "<2"),
    ({"path": "../mcp"}, None), ({"git": "https://example.invalid/mcp.git"}, None)])
def test_poetry_constraints_are_read_as_pip_reads_their_meaning(poetry: object, pep440: str | None) -> None:
    assert _poetry_requirement(poetry) == pep440


# Run in the venv under test: prints each entry that is not there. A module counts as there when it imports (or,
# with FOUND, when it is found: mcp.client.websocket needs an extra to run; mcp 2.x keeps a mcp.server.fastmcp that
# raises on import, found but not there); a name when it imports from its module.
_PROBE = """
import importlib, importlib.util, json, sys
modules, names, found = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3] == "FOUND"
for entry in modules:
    try:
        there = importlib.util.find_spec(entry) is not None if found else bool(importlib.import_module(entry))
    except Exception:
        there = False
    if not there:
        print(entry)
for entry in names:
    module, _, name = entry.rpartition(".")
    try:
        getattr(importlib.import_module(module), name)
    except Exception:
        print(entry)
"""


def _missing(python: Path, *, found_is_enough: bool) -> list[str]:
    done = subprocess.run([str(python), "-c", _PROBE, json.dumps(MCP1_ONLY_MODULES), json.dumps(MCP1_ONLY_NAMES),
                           "FOUND" if found_is_enough else "IMPORT"], capture_output=True, text=True, timeout=120,
                          check=True)
    return done.stdout.split()


@pytest.mark.slow
def test_every_1x_only_entry_imports_under_mcp_1_and_raises_under_mcp_2() -> None:
    mcp1, mcp2 = (ROOT / ".cache" / f"venv-mcp-{v}" / "bin" / "python" for v in ("1.30.0", "2.3.0"))
    need(mcp1, "mcp 1.30.0 (.cache/venv-mcp-1.30.0)")
    need(mcp2, "mcp 2.3.0 (.cache/venv-mcp-2.3.0)")
    assert _missing(mcp1, found_is_enough=True) == []
    assert sorted(_missing(mcp2, found_is_enough=False)) == sorted((*MCP1_ONLY_MODULES, *MCP1_ONLY_NAMES))
