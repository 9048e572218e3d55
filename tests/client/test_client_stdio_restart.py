"""The stdio channel restarts a server that died mid-request and re-issues the request when it is safe to repeat."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcp_stateless import Client
from mcp_stateless.client import ServerLost

pytestmark = pytest.mark.slow  # every test here starts a stdio server process

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "mcp_stateless.cli", "serve", str(ROOT / "tests" / "apps" / "crash_app.py") + ":app",
         "--stdio"]


def text(result: dict[str, object]) -> str:
    content = result["content"]
    assert isinstance(content, list)
    return str(content[0]["text"])


async def test_crash_restart_and_reissue_when_safe(tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    async with Client(stdio=SERVE, version="2026-07-28") as c:
        first_pid = int(text(await c.call_tool("pid", {})))
        r = await c.call_tool("crash_once", {"marker": str(marker)}, safe=True)
        crashed_pid = int(marker.read_text())
        assert crashed_pid == first_pid  # the first process ran the call and died with it
        new_pid = int(text(await c.call_tool("pid", {})))
        assert new_pid != first_pid
        assert text(r) == f"answered by {new_pid} after {first_pid} crashed"  # the re-issued request, new server
        assert c.channel.restarts == 1


async def test_crash_not_reissued_unless_safe_then_restarts(tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    async with Client(stdio=SERVE, version="2026-07-28") as c:
        first_pid = int(text(await c.call_tool("pid", {})))
        with pytest.raises(ServerLost) as e:
            await c.call_tool("crash_once", {"marker": str(marker)})
        assert "exited (status 17)" in str(e.value) and "not re-issued" in str(e.value)
        assert c.channel.restarts == 0
        # the next request starts a fresh server; the crashed call was not repeated behind our back
        new_pid = int(text(await c.call_tool("pid", {})))
        assert new_pid != first_pid and c.channel.restarts == 1
        assert text(await c.call_tool("crash_once", {"marker": str(marker)})) == \
            f"answered by {new_pid} after {first_pid} crashed"


async def test_restarts_are_bounded(tmp_path: Path) -> None:
    async with Client(stdio=SERVE, version="2026-07-28") as c:
        c.channel.max_restarts = 1
        with pytest.raises(ServerLost):
            await c.call_tool("crash_once", {"marker": str(tmp_path / "a")})
        with pytest.raises(ServerLost):
            await c.call_tool("crash_once", {"marker": str(tmp_path / "b")})  # restart 1 of 1, crashes again
        with pytest.raises(ServerLost) as e:
            await c.call_tool("pid", {}, safe=True)
        assert "not restarting again (1 restarts)" in str(e.value)
