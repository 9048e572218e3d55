"""Our Client against our own conformance server, over real HTTP and real stdio subprocesses."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_stateless import Client, McpError, SyncClient
from mcp_stateless.client import Acknowledged, ToolsListChanged

from .conftest import STDIO_CONFORMANCE

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


def elicit(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Alice", "color": "blue", "ok": True}}


async def sample(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "Hi there"}, "model": "m", "stopReason": "endTurn"}


ROOTS = [{"uri": "file:///work/a", "name": "a"}, {"uri": "file:///work/b", "name": "b"}]


@pytest.fixture(params=["http", "stdio"])
def make(request: pytest.FixtureRequest, conformance_url: str) -> Any:
    def _make(**kw: Any) -> Client:
        if request.param == "http":
            return Client(conformance_url, **kw)
        return Client(stdio=STDIO_CONFORMANCE, **kw)
    return _make


async def test_discover_list_call(make: Any) -> None:
    async with make() as c:
        d = await c.discover()
        assert c.era == "modern" and d["supportedVersions"] == ["2026-07-28"]
        names = {t["name"] for t in await c.list_tools()}
        assert {"test_simple_text", "test_input_required_result_elicitation"} <= names
        r = await c.call_tool("test_simple_text", {})
        assert text(r) == "This is a simple text response for testing."


async def test_mrtr_elicitation_sampling_roots_in_one_round(make: Any) -> None:
    async with make(elicitation=elicit, sampling=sample, roots=ROOTS) as c:
        assert c.capabilities == {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
        r = await c.call_tool("test_input_required_result_multiple_inputs", {})
        assert text(r) == "Alice: Hi there (2 roots)"
        r = await c.call_tool("test_input_required_result_multi_round", {})
        assert text(r) == "Alice likes blue"
        r = await c.call_tool("test_input_required_result_list_roots", {})
        assert text(r) == "Roots: file:///work/a, file:///work/b"


async def test_capabilities_come_from_handlers_only(make: Any) -> None:
    async with make() as c:
        assert c.capabilities == {}
        with pytest.raises(McpError) as e:
            await c.call_tool("test_missing_capability", {})
        assert e.value.code == -32021


async def test_progress_notifications_reach_the_callback(make: Any) -> None:
    seen: list[float] = []
    async with make() as c:
        r = await c.call_tool("test_tool_with_progress", {}, progress=lambda p: seen.append(p["progress"]))
        assert text(r) == "Progress test completed"
        assert seen == [0, 50, 100]


async def test_listen_ack_event_and_cache_invalidation(make: Any) -> None:
    async with make() as c:
        before = {t["name"] for t in await c.list_tools()}
        assert c.cache.get("tools/list", "") is not None  # cached per ttlMs
        async with c.listen(tools=True, prompts=True) as sub:
            first = await sub.__anext__()
            assert isinstance(first, Acknowledged)
            assert first.honoured.get("toolsListChanged") is True
            await c.call_tool("test_trigger_tool_change", {})
            ev = await sub.__anext__()
            assert isinstance(ev, ToolsListChanged)
        assert c.cache.get("tools/list", "") is None  # invalidated by the change notification
        after = {t["name"] for t in await c.list_tools()}
        assert before ^ after == {"test_dynamic_tool"}
        await c.call_tool("test_trigger_tool_change", {})  # restore


async def test_resources_and_prompts(make: Any) -> None:
    async with make() as c:
        r = await c.read_resource("test://static-text")
        assert r["contents"][0]["text"] == "This is the content of the static text resource."
        p = await c.get_prompt("test_prompt_with_arguments", {"arg1": "hello", "arg2": "world"})
        assert p["messages"][0]["content"]["text"] == "Prompt with arguments: arg1='hello', arg2='world'"
        with pytest.raises(McpError) as e:
            await c.read_resource("test://nonexistent-resource-for-conformance-testing")
        assert e.value.code == -32602


def test_sync_client(conformance_url: str) -> None:
    with SyncClient(conformance_url) as c:
        assert c.discover()["supportedVersions"] == ["2026-07-28"]
        assert text(c.call_tool("test_simple_text", {})) == "This is a simple text response for testing."
        events = list(c.listen(tools=True, limit=1))
        assert isinstance(events[0], Acknowledged)
