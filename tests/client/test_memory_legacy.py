"""`MemoryChannel(app, legacy=LegacyServer(app))`: the 2025 era in process, no socket, no subprocess.

A client pinned to a 2025 revision initialises one session, lists and calls tools, gets progress, answers
a server->client elicitation through its handler, sees list changes, and cancels by id under the one id
rule: the same behaviour the 2025 stdio transport has, tested without starting a process."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_stateless import App, Client, Context
from mcp_stateless.client.memory import MemoryChannel
from mcp_stateless.server.legacy import LegacyServer

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def make_app() -> App:
    app = App("memory-legacy", "1.0.0")

    @app.tool()
    def greet(name: str) -> str:
        """Greets"""
        return f"Hello, {name}!"

    @app.tool()
    def ask_name(ctx: Context) -> str:
        """Asks the user's name"""
        answer = ctx.elicit("What is your name?", NAME_FORM, key="name")
        return f"Hello, {(answer.content or {}).get('name', '?')} ({answer.action})"

    @app.tool()
    async def count(ctx: Context, n: int) -> str:
        """Reports progress n times"""
        for i in range(1, n + 1):
            ctx.report_progress(i, n)
            await asyncio.sleep(0)
        return f"counted {n}"

    @app.tool()
    async def wait(ms: int) -> str:
        """Sleeps"""
        await asyncio.sleep(ms / 1000)
        return f"waited {ms}"

    return app


def text(result: dict[str, Any]) -> str:
    return "".join(c["text"] for c in result["content"] if c["type"] == "text")


async def test_a_2025_client_in_memory() -> None:
    app = make_app()
    asked: list[dict[str, Any]] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Ada"}}

    channel = MemoryChannel(app, legacy=LegacyServer(app))
    async with Client(channel=channel, version="2025-06-18", elicitation=elicit) as c:
        names = {t["name"] for t in await c.list_tools()}
        assert c.era == "legacy" and names == {"greet", "ask_name", "count", "wait"}
        assert text(await c.call_tool("greet", {"name": "Bo"})) == "Hello, Bo!"
        # a real server->client request: elicitation/create inside the call, answered by the handler
        assert text(await c.call_tool("ask_name", {})) == "Hello, Ada (accept)"
        assert asked and asked[0]["message"] == "What is your name?"
        seen: list[float] = []
        assert text(await c.call_tool("count", {"n": 5}, progress=lambda p: seen.append(p["progress"]))) == "counted 5"
        assert seen == [1, 2, 3, 4, 5]


async def test_2025_cancellation_in_memory_follows_the_one_id_rule() -> None:
    app = make_app()
    channel = MemoryChannel(app, legacy=LegacyServer(app))
    try:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        first = [m async for m in await channel.exchange(init)]
        assert first[0]["result"]["protocolVersion"] == "2025-06-18"
        await channel.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "wait", "arguments": {"ms": 100}}}
        ex = await channel.exchange(call)
        await channel.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": True}})
        got = [m async for m in ex]
        assert [text(m["result"]) for m in got] == ["waited 100"]
        # the id itself cancels: nothing more arrives for it
        slow = {**call, "id": 2, "params": {"name": "wait", "arguments": {"ms": 5000}}}
        ex = await channel.exchange(slow)
        await asyncio.sleep(0.05)
        await channel.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        await asyncio.sleep(0.05)
        assert 2 in channel._by_id  # the exchange still waits: the client closes it
        await ex.aclose()
        assert not channel._by_id
    finally:
        await channel.aclose()
