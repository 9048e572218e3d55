"""`Client(app)`: the client drives an `App` in the same process through `MemoryChannel`, with no socket and
no subprocess (socket creation fails inside these tests), exactly as it would over HTTP or stdio."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_stateless import App, Client, Context, McpError, TaskRuntime
from mcp_stateless.client import (
    Acknowledged,
    AuthenticationError,
    ListenEnded,
    MemoryChannel,
    ToolsListChanged,
)
from mcp_stateless.protocol.principal import Challenge, Credentials, Principal


class NoSockets(socket.socket):
    """Network sockets fail; the event loop's own AF_UNIX self-pipe is still allowed."""

    def __init__(self, family: int = -1, *args: Any, **kwargs: Any) -> None:
        if family in (-1, socket.AF_INET, socket.AF_INET6):
            raise AssertionError("a socket was opened")
        super().__init__(family, *args, **kwargs)


@pytest.fixture(autouse=True)
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket, "socket", NoSockets)
    yield


def make_app() -> App:
    app = App("memory-test", instructions="in memory", tasks=TaskRuntime(poll_interval_ms=20))

    @app.tool()
    def add(a: int, b: int) -> str:
        """Adds two integers"""
        return str(a + b)

    @app.tool()
    async def ask_name(ctx: Context) -> str:
        answer = ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"Hello, {(answer.content or {}).get('name')}!"

    @app.tool()
    async def steps(ctx: Context) -> str:
        for i in (1, 2, 3):
            ctx.report_progress(i, 3)
            await asyncio.sleep(0)
        return "stepped"

    @app.tool()
    async def toggle() -> str:
        if not app.remove_tool("extra"):
            app.tool(name="extra")(lambda: "extra")
        return "toggled"

    @app.tool(task="optional")
    async def slow(seconds: float, ctx: Context) -> str:
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @app.tool(task="optional")
    def confirm(filename: str, ctx: Context) -> str:
        answer = ctx.elicit(f"Delete {filename}?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return f"deleted {filename}" if answer.accepted and (answer.content or {}).get("ok") else "kept"

    @app.prompt()
    def greet(name: str) -> str:
        return f"Hi {name}"

    @app.resource("test://info")
    def info() -> str:
        return "info text"

    return app


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


async def accept(params: dict[str, Any]) -> dict[str, Any]:
    props = (params.get("requestedSchema") or {}).get("properties") or {}
    return {"action": "accept", "content": {k: (True if v.get("type") == "boolean" else "Ada")
                                            for k, v in props.items()}}


async def test_the_guard_bites() -> None:
    c = Client("http://127.0.0.1:9/mcp", version="2026-07-28")
    with pytest.raises(AssertionError, match="a socket was opened"):
        await c.list_tools()
    await c.aclose()


async def test_discover_list_call_prompt_resource() -> None:
    async with Client(make_app()) as c:
        assert isinstance(c.channel, MemoryChannel)
        d = await c.discover()
        assert c.era == "modern" and c.version == "2026-07-28"
        assert d["supportedVersions"] == ["2026-07-28"] and c.instructions == "in memory"
        assert (c.server_info or {}).get("name") == "memory-test"
        assert {t["name"] for t in await c.list_tools()} == {"add", "ask_name", "steps", "toggle", "slow", "confirm"}
        assert text(await c.call_tool("add", {"a": 2, "b": 3})) == "5"
        prompt = await c.get_prompt("greet", {"name": "Bo"})
        assert prompt["messages"][0]["content"]["text"] == "Hi Bo"
        assert (await c.read_resource("test://info"))["contents"][0]["text"] == "info text"
        with pytest.raises(McpError) as e:
            await c.call_tool("nope", {})
        assert e.value.code == -32602


async def test_the_envelope_ladder_runs_as_on_a_transport() -> None:
    async with Client(make_app(), version="2026-07-28") as c:
        with pytest.raises(McpError) as e:
            await c.request("no/such/method", {})
        assert e.value.code == -32601


async def test_mrtr_elicitation_and_a_missing_capability() -> None:
    async with Client(make_app(), elicitation=accept) as c:
        assert text(await c.call_tool("ask_name", {})) == "Hello, Ada!"
    async with Client(make_app()) as c:
        with pytest.raises(McpError) as e:
            await c.call_tool("ask_name", {})
        assert e.value.code == -32021


async def test_progress_notifications_reach_the_callback_before_the_result() -> None:
    seen: list[float] = []
    async with Client(make_app()) as c:
        assert text(await c.call_tool("steps", {}, progress=lambda p: seen.append(p["progress"]))) == "stepped"
    assert seen == [1, 2, 3]


async def test_listen_receives_list_changed_and_ends_when_the_client_closes() -> None:
    app = make_app()
    async with Client(app) as c:
        await c.list_tools()
        assert c.cache.get("tools/list", "") is not None
        async with c.listen(tools=True) as sub:
            ack = await asyncio.wait_for(sub.__anext__(), 5)
            assert isinstance(ack, Acknowledged) and ack.honoured == {"toolsListChanged": True}
            assert text(await c.call_tool("toggle", {})) == "toggled"
            ev = await asyncio.wait_for(sub.__anext__(), 5)
            assert isinstance(ev, ToolsListChanged) and ev.method == "notifications/tools/list_changed"
        assert c.cache.get("tools/list", "") is None  # the event made the cached list stale
        assert "extra" in {t["name"] for t in await c.list_tools()}


async def test_closing_the_app_ends_the_listen_stream_gracefully() -> None:
    app = make_app()
    async with Client(app) as c, c.listen(tools=True) as sub:
        assert isinstance(await asyncio.wait_for(sub.__anext__(), 5), Acknowledged)
        await app.aclose()
        end = await asyncio.wait_for(sub.__anext__(), 5)
        assert isinstance(end, ListenEnded) and end.method == "subscriptions/listen"


async def test_tasks_start_tool_then_await_and_task_input() -> None:
    async with Client(make_app(), tasks=True, elicitation=accept) as c:
        handle = await c.start_tool("slow", {"seconds": 0.05})
        assert handle.task_id is not None and handle.task_id.startswith("tsk_") and handle.status == "working"
        assert text(await handle) == "slept 0.05"
        assert handle.status == "completed"
        assert text(await c.call_tool("confirm", {"filename": "a.txt"})) == "deleted a.txt"
    async with Client(make_app()) as c:  # without the extension the same tool answers synchronously
        handle = await c.start_tool("slow", {"seconds": 0})
        assert handle.task_id is None and text(await handle) == "slept 0.0"


class TokenAuth:
    async def authenticate(self, credentials: Credentials) -> Principal | Challenge:
        token = credentials.headers.get("authorization")
        if token == "Bearer ok":
            return Principal("alice", frozenset({"tools"}))
        return Challenge(401, 'Bearer error="invalid_token"', "no token")


async def test_the_apps_authenticator_decides_who_calls() -> None:
    app = App("auth", authenticator=TokenAuth())

    @app.tool()
    def whoami(ctx: Context) -> str:
        return ctx.principal.id

    async with Client(app, headers={"Authorization": "Bearer ok"}) as c:
        assert text(await c.call_tool("whoami", {})) == "alice"
        assert isinstance(c.channel, MemoryChannel) and c.channel.principal == Principal("alice", frozenset({"tools"}))
    with pytest.raises(AuthenticationError) as e:
        async with Client(app):
            pass
    assert e.value.status == 401 and e.value.www_authenticate == 'Bearer error="invalid_token"'
    async with Client(channel=MemoryChannel(app, principal=Principal("bob"))) as c:
        assert text(await c.call_tool("whoami", {})) == "bob"


async def test_the_default_client_info_carries_the_package_version() -> None:
    import mcp_stateless

    seen: list[Any] = []
    app = App("who")

    @app.tool()
    def who(ctx: Context) -> str:
        seen.append(ctx.client_info)
        return "ok"

    async with Client(app) as c:
        await c.call_tool("who", {})
    assert seen == [{"name": "mcp-stateless-client", "version": mcp_stateless.__version__}]
