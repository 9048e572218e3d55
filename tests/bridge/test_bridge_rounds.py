"""Several MRTR rounds of one bridged call: each round's requestState is its own, and a state of a round that was
answered cannot answer the next one (the upstream waits for the second question's answer, not a replay of the
first). The upstream is our conformance app served as a 2025 stdio server, whose multi-round tool asks two
elicitations in turn."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless.bridge import Bridge
from mcp_stateless.client.channels import StdioChannel
from mcp_stateless.endpoint import Call, Reply, Request

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CAPS = {"elicitation": {"form": {}}}
TOOL = "test_input_required_result_multi_round"


@pytest.fixture
async def bridge() -> AsyncIterator[Bridge]:
    argv = [sys.executable, "-m", "mcp_stateless.cli", "serve", str(ROOT / "examples" / "conformance_server.py") +
            ":app", "--stdio", "--log-level", "warning"]
    b = Bridge(lambda: StdioChannel(argv, cwd=str(ROOT)))
    await b.startup()
    try:
        yield b
    finally:
        await b.aclose()


async def call(bridge: Bridge, extra: dict[str, Any] | None = None, id_: int = 1) -> Reply:
    params = {"name": TOOL, "arguments": {}, **(extra or {})}
    return await bridge.handle(Request(id_, "tools/call", params, "2026-07-28", CAPS, None, None, None), Call())


async def test_each_round_has_its_own_state_and_an_answered_rounds_state_is_refused(bridge: Bridge) -> None:
    first = (await call(bridge)).message["result"]
    assert first["resultType"] == "input_required"
    [(k1, q1)] = first["inputRequests"].items()
    assert q1["params"]["message"] == "Step 1: What is your name?"
    second = (await call(bridge, {"inputResponses": {k1: {"action": "accept", "content": {"name": "Ada"}}},
                                  "requestState": first["requestState"]})).message["result"]
    assert second["resultType"] == "input_required"
    [(k2, q2)] = second["inputRequests"].items()
    assert q2["params"]["message"] == "Step 2: What is your favorite color?"
    assert k2 != k1 and second["requestState"] != first["requestState"]
    # The first round's state again, answering the question now asked: refused, the call still waits.
    replay = await call(bridge, {"inputResponses": {k2: {"action": "accept", "content": {"color": "red"}}},
                                 "requestState": first["requestState"]})
    assert replay.error_code == -32602
    assert replay.message["error"]["message"] == "this round was answered already"
    done = (await call(bridge, {"inputResponses": {k2: {"action": "accept", "content": {"color": "blue"}}},
                                "requestState": second["requestState"]})).message["result"]
    assert done["resultType"] == "complete"
    assert done["content"] == [{"type": "text", "text": "Ada likes blue"}]
    assert bridge.pending == {}
