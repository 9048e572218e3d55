"""Client side of the Tasks extension against our conformance server (real subprocess, HTTP and stdio)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_stateless import McpError
from mcp_stateless.client import Client, TaskCancelled

from .conftest import STDIO_CONFORMANCE

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow


async def accept_all(params: dict[str, Any]) -> dict[str, Any]:
    props = (params.get("requestedSchema") or {}).get("properties") or {}
    content = {k: (True if v.get("type") == "boolean" else "Ada") for k, v in props.items()}
    return {"action": "accept", "content": content}


def clients(url: str) -> list[Client]:
    return [Client(url, tasks=True, elicitation=accept_all),
            Client(stdio=STDIO_CONFORMANCE, tasks=True, elicitation=accept_all)]


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_call_tool_waits_for_a_task_and_returns_its_result(conformance_url: str, transport: str) -> None:
    client = clients(conformance_url)[0 if transport == "http" else 1]
    async with client:
        handle = await client.start_tool("slow_compute", {"seconds": 0.3, "label": "job"})
        assert handle.task_id is not None and handle.task_id.startswith("tsk_")
        assert handle.status == "working"
        result = await handle
        assert result["content"] == [{"type": "text", "text": "job: done after 0.3s"}]
        # call_tool hides the task entirely
        again = await client.call_tool("slow_compute", {"seconds": 0.1, "label": "plain"})
        assert again["content"][0]["text"] == "plain: done after 0.1s"


async def test_task_input_is_answered_through_the_elicitation_handler(conformance_url: str) -> None:
    async with Client(conformance_url, tasks=True, elicitation=accept_all) as client:
        result = await client.call_tool("confirm_delete", {"filename": "a.txt"})
        assert result["content"][0]["text"] == "Deleted a.txt"
        multi = await client.call_tool("multi_input", {})
        assert multi["content"][0]["text"] == "name=Ada confirm=True"


async def test_mrtr_then_task(conformance_url: str) -> None:
    async with Client(conformance_url, tasks=True, elicitation=accept_all) as client:
        result = await client.call_tool("test_tool_with_task", {})
        assert result["content"][0]["text"] == "Hello, Ada! (finished as a task)"


async def test_cancel_failed_and_tool_error(conformance_url: str) -> None:
    async with Client(conformance_url, tasks=True, elicitation=accept_all) as client:
        handle = await client.start_tool("slow_compute", {"seconds": 30})
        await asyncio.sleep(0.2)
        await handle.cancel()
        with pytest.raises(TaskCancelled):
            await handle.wait(timeout=5)
        assert handle.status == "cancelled"
        with pytest.raises(McpError) as exc:
            await client.call_tool("protocol_error_job", {})
        assert exc.value.code == -32603 and exc.value.message == "Simulated protocol error in a task"
        failed = await client.call_tool("failing_job", {})
        assert failed["isError"] is True
        assert failed["content"][0]["text"] == "The job failed: simulated tool error"


async def test_without_tasks_optional_tools_are_synchronous_and_required_ones_refused(conformance_url: str) -> None:
    async with Client(conformance_url, elicitation=accept_all) as client:
        handle = await client.start_tool("slow_compute", {"seconds": 0, "label": "sync"})
        assert handle.task_id is None
        assert (await handle)["content"][0]["text"] == "sync: done after 0s"
        with pytest.raises(McpError) as exc:
            await client.call_tool("failing_job", {})
        assert exc.value.code == -32021
