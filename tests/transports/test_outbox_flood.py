"""One bound and one drop policy for a request's notifications, on every transport (protocol/outbox.py).

The same handler floods (10,000 progress notifications, or 1,000 log messages, without an await in
between) over modern HTTP (SSE, in process through httpx's ASGI transport), modern stdio, 2025 stdio
and the memory channel; every one delivers exactly the same messages: the first 31 progress values and
the last (coalesced once 32 wait), or the first 256 logs and one warning counting the 744 dropped,
then the response. A handler that awaits between messages gets every one of them."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from mcp_stateless import App, Context
from mcp_stateless.client.memory import MemoryChannel
from mcp_stateless.protocol.outbox import COALESCE_AT, MAX_PENDING
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.transports.http import HttpTransport
from mcp_stateless.transports.stdio import StdioServer
from transports.test_request_ids import INIT, META, Stdout

PROGRESS, LOGS = 10_000, 1_000
TRANSPORTS = ["http", "stdio", "legacy-stdio", "memory"]


def make_app() -> App:
    app = App("flood", "1.0.0")

    @app.tool()
    async def flood(ctx: Context, kind: str, n: int, pause: bool = False) -> str:
        """Emits `n` notifications of `kind` (progress or log)."""
        for i in range(1, n + 1):
            if kind == "progress":
                ctx.report_progress(i, n)
            else:
                ctx.log("info", f"line {i}")
            if pause:
                await asyncio.sleep(0)
        return f"sent {n}"

    return app


def call(kind: str, n: int, modern: bool, pause: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {**META} if modern else {}
    if kind == "progress":
        meta["progressToken"] = "tok"
    elif modern:
        meta["io.modelcontextprotocol/logLevel"] = "debug"
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "flood", "arguments": {"kind": kind, "n": n, "pause": pause}, "_meta": meta}}


async def over_http(message: dict[str, Any]) -> list[dict[str, Any]]:
    app = make_app()
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "flood"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=HttpTransport(app)),
                                 base_url="http://127.0.0.1") as http:
        r = await http.post("/mcp", content=orjson.dumps(message), headers=headers)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    return [orjson.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]


async def over_stdio(message: dict[str, Any], legacy: bool) -> list[dict[str, Any]]:
    app = make_app()
    server = StdioServer(app, legacy=LegacyServer(app) if legacy else None)
    out = Stdout()
    server.attach_stdout(out)  # type: ignore[arg-type]
    assert await server.authenticate() is None
    await app.startup()
    try:
        if legacy:
            server.handle_line(orjson.dumps(INIT))
            await out.messages.get()
            server.handle_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
            server.handle_line(b'{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"debug"}}')
            assert (await out.messages.get())["id"] == "lvl"
        server.handle_line(orjson.dumps(message))
        got: list[dict[str, Any]] = []
        while not got or got[-1].get("id") != 1:
            got.append(await asyncio.wait_for(out.messages.get(), 10))
        return got
    finally:
        await server.shutdown()


async def over_memory(message: dict[str, Any]) -> list[dict[str, Any]]:
    channel = MemoryChannel(make_app())
    try:
        return [m async for m in await channel.exchange(message)]
    finally:
        await channel.aclose()


async def run(transport: str, kind: str, n: int, pause: bool = False) -> list[dict[str, Any]]:
    message = call(kind, n, transport != "legacy-stdio", pause)
    if transport == "http":
        return await over_http(message)
    if transport == "memory":
        return await over_memory(message)
    return await over_stdio(message, transport == "legacy-stdio")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_progress_flood_is_coalesced_the_same_everywhere(transport: str) -> None:
    got = await run(transport, "progress", PROGRESS)
    *notes, reply = got
    assert reply["id"] == 1 and reply["result"]["content"] == [{"type": "text", "text": f"sent {PROGRESS}"}]
    assert [m["method"] for m in notes] == ["notifications/progress"] * COALESCE_AT
    values = [m["params"]["progress"] for m in notes]
    assert values == [*range(1, COALESCE_AT), PROGRESS]  # the latest replaces the one still waiting
    assert all(m["params"]["progressToken"] == "tok" for m in notes)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_log_flood_is_cut_and_counted_the_same_everywhere(transport: str) -> None:
    got = await run(transport, "log", LOGS)
    *notes, warning, reply = got
    assert reply["id"] == 1 and reply["result"]["content"] == [{"type": "text", "text": f"sent {LOGS}"}]
    assert [m["params"]["data"] for m in notes] == [f"line {i}" for i in range(1, MAX_PENDING + 1)]
    assert warning == {"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "warning", "logger": "mcp_stateless",
        "data": f"{LOGS - MAX_PENDING} log messages dropped: the client read slower than they were sent"}}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_handler_that_awaits_gets_every_progress(transport: str) -> None:
    got = await run(transport, "progress", 500, pause=True)
    assert [m["params"]["progress"] for m in got[:-1]] == list(range(1, 501))


async def test_stdio_holds_notifications_while_stdout_is_full() -> None:
    """A client that does not read (stdout over its high-water mark): a handler that awaits between its
    2,000 progress notifications gets them held in its bounded outbox, not queued in the pipe's buffer;
    the response then follows the 32 that waited."""
    app = make_app()
    server = StdioServer(app)
    out = Stdout()
    server.attach_stdout(out)  # type: ignore[arg-type]
    await server.authenticate()
    await app.startup()
    try:
        server._writable.clear()  # what the pipe's pause_writing() does
        server.handle_line(orjson.dumps(call("progress", 2000, True, pause=True)))
        await asyncio.sleep(0.3)  # the call runs to its end meanwhile; its response is never held
    finally:
        await server.shutdown()
    got = [out.messages.get_nowait() for _ in range(out.messages.qsize())]
    assert got[-1]["id"] == 1
    values = [m["params"]["progress"] for m in got[:-1]]
    assert len(values) == COALESCE_AT and values[-1] == 2000
