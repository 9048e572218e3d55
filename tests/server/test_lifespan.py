"""`App(lifespan=...)` in process: entered once however many users start the app, exited by the last one,
what it yields reaching tool handlers (synchronous and as durable tasks) through `ctx.lifespan`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from mcp_stateless import App, Client, Context, TaskRuntime


def counting_app(events: list[str], **kw: Any) -> App:
    @asynccontextmanager
    async def lifespan(app: App) -> AsyncIterator[dict[str, Any]]:
        events.append(f"enter {app.name}")
        await asyncio.sleep(0.01)  # a real open takes a while: concurrent starts must wait for it
        try:
            yield {"db": "connection-1"}
        finally:
            events.append("exit")

    app = App("life", lifespan=lifespan, **kw)

    @app.tool()
    async def db(ctx: Context) -> str:
        return str(ctx.lifespan["db"])

    @app.tool()
    def db_sync(ctx: Context) -> str:
        return str(ctx.lifespan["db"])

    return app


async def test_client_app_enters_once_and_handlers_see_what_it_yielded() -> None:
    events: list[str] = []
    app = counting_app(events)
    async with Client(app) as client:
        assert events == ["enter life"]
        for tool in ("db", "db_sync", "db"):
            assert (await client.call_tool(tool, {}))["content"] == [{"type": "text", "text": "connection-1"}]
        assert events == ["enter life"]
    assert events == ["enter life", "exit"]
    assert app.lifespan.value is None and not app.lifespan.running


async def test_concurrent_clients_share_one_lifespan_closed_by_the_last() -> None:
    events: list[str] = []
    app = counting_app(events)
    first, second = Client(app), Client(app)
    await asyncio.gather(first.__aenter__(), second.__aenter__())
    assert events == ["enter life"]
    assert (await second.call_tool("db", {}))["content"][0]["text"] == "connection-1"
    await first.__aexit__(None, None, None)
    assert events == ["enter life"]  # the second client still uses it
    assert (await second.call_tool("db", {}))["content"][0]["text"] == "connection-1"
    await second.__aexit__(None, None, None)
    assert events == ["enter life", "exit"]


async def test_a_durable_task_sees_the_lifespan_too() -> None:
    events: list[str] = []
    app = counting_app(events, tasks=TaskRuntime())

    @app.tool(task="required")
    async def job(ctx: Context) -> str:
        return "task saw " + str(ctx.lifespan["db"])

    async with Client(app, tasks=True) as client:
        handle = await client.start_tool("job", {})
        result = await asyncio.wait_for(handle, 10)
        assert result["content"] == [{"type": "text", "text": "task saw connection-1"}]
    assert events == ["enter life", "exit"]


async def test_a_failing_lifespan_fails_the_start_and_counts_nobody() -> None:
    @asynccontextmanager
    async def lifespan(app: App) -> AsyncIterator[None]:
        raise ConnectionRefusedError("database at 127.0.0.1:1 refused")
        yield

    app = App("broken", lifespan=lifespan)
    with pytest.raises(ConnectionRefusedError, match=r"^database at 127\.0\.0\.1:1 refused$"):
        await app.startup()
    assert app.lifespan.users == 0 and not app.lifespan.running
    assert await app.readiness() == ["not started"]


async def test_without_a_lifespan_ctx_lifespan_is_none() -> None:
    app = App("plain")

    @app.tool()
    async def what(ctx: Context) -> str:
        return repr(ctx.lifespan)

    async with Client(app) as client:
        assert (await client.call_tool("what", {}))["content"][0]["text"] == "None"
