"""One request-id rule on every transport: `notifications/cancelled` with `requestId: true` (or `1.0`)
names no request, so request `1` runs to its answer; `requestId: 1` does cancel it. In process: modern
stdio and 2025 stdio (`StdioServer` over a captured stdout), the memory channel, and 2025 Streamable HTTP
(`HttpTransport` with the legacy branch, through httpx's ASGI transport)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from mcp_stateless import App
from mcp_stateless.client.memory import MemoryChannel
from mcp_stateless.protocol.encoding import decode_exact, encode_message
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.transports.http import HttpTransport
from mcp_stateless.transports.stdio import StdioServer

PV = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
NOT_IDS = [True, 1.0]


def make_app() -> App:
    app = App("request-ids", "1.0.0")

    @app.tool()
    async def wait(ms: int) -> str:
        """Sleeps `ms` milliseconds."""
        await asyncio.sleep(ms / 1000)
        return f"waited {ms}"

    return app


def call(rid: Any, ms: int, modern: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "wait", "arguments": {"ms": ms}}
    if modern:
        params["_meta"] = META
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def cancel(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}


class Stdout:
    """What `StdioServer` writes, one parsed message per line."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def write(self, data: bytes) -> None:
        for line in data.splitlines():
            self.messages.put_nowait(decode_exact(line))  # exact past 64 bits

    async def quiet(self, seconds: float) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while (left := end - loop.time()) > 0:
            try:
                got.append(await asyncio.wait_for(self.messages.get(), left))
            except TimeoutError:
                break
        return got


@pytest.fixture(params=["modern", "legacy"])
async def stdio(request: pytest.FixtureRequest) -> AsyncIterator[tuple[StdioServer, Stdout, bool]]:
    app = make_app()
    modern = request.param == "modern"
    server = StdioServer(app, legacy=None if modern else LegacyServer(app))
    out = Stdout()
    server.attach_stdout(out)  # type: ignore[arg-type]  # a WriteTransport's two methods the server uses
    assert await server.authenticate() is None
    await app.startup()
    if not modern:
        server.handle_line(orjson.dumps(INIT))
        assert (await out.messages.get())["id"] == 0
        server.handle_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    try:
        yield server, out, modern
    finally:
        await server.shutdown()


@pytest.mark.parametrize("not_an_id", NOT_IDS)
async def test_stdio_cancel_with_a_non_id_cancels_nothing(stdio: tuple[StdioServer, Stdout, bool],
                                                          not_an_id: Any) -> None:
    server, out, modern = stdio
    server.handle_line(orjson.dumps(call(1, 150, modern)))
    server.handle_line(orjson.dumps(cancel(not_an_id)))
    got = await out.quiet(0.4)
    assert got == [{"jsonrpc": "2.0", "id": 1, "result": got[0]["result"]}], got
    assert got[0]["result"]["content"] == [{"type": "text", "text": "waited 150"}]


async def test_stdio_cancel_with_the_id_cancels_it(stdio: tuple[StdioServer, Stdout, bool]) -> None:
    server, out, modern = stdio
    server.handle_line(orjson.dumps(call(1, 150, modern)))
    server.handle_line(encode_message(call(2**64, 150, modern)))
    server.handle_line(orjson.dumps(cancel(1)))
    got = await out.quiet(0.4)
    assert [m["id"] for m in got] == [2**64]  # 1 gets nothing more; the big id stays exact


@pytest.mark.parametrize("not_an_id", NOT_IDS)
async def test_memory_cancel_with_a_non_id_cancels_nothing(not_an_id: Any) -> None:
    channel = MemoryChannel(make_app())
    try:
        ex = await channel.exchange(call(1, 150, True))
        assert await channel.send(cancel(not_an_id)) == 202
        got = [m async for m in ex]
        assert [m["result"]["content"][0]["text"] for m in got] == ["waited 150"]
        # the id names it: the exchange ends with no response
        ex = await channel.exchange(call(1, 5000, True))
        await asyncio.sleep(0.05)
        assert await channel.send(cancel(1)) == 202
        assert [m async for m in ex] == []
    finally:
        await channel.aclose()


@pytest.mark.parametrize("not_an_id", NOT_IDS)
async def test_legacy_http_cancel_with_a_non_id_cancels_nothing(not_an_id: Any) -> None:
    app = make_app()
    asgi = HttpTransport(app, legacy=LegacyServer(app))
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1") as http:
        r = await http.post("/mcp", content=orjson.dumps(INIT), headers=headers)
        assert r.status_code == 200
        session = {**headers, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}

        async def after(seconds: float, rid: Any) -> int:
            await asyncio.sleep(seconds)
            sent = await http.post("/mcp", content=orjson.dumps(cancel(rid)), headers=session)
            return sent.status_code

        calling = http.post("/mcp", content=orjson.dumps(call(1, 300, False)), headers=session)
        answer, status = await asyncio.gather(calling, after(0.1, not_an_id))
        assert status == 202
        events = [orjson.loads(line[5:]) for line in answer.text.splitlines()
                  if line.startswith("data:") and line[5:].strip()]
        body = events[-1] if events else answer.json()
        assert body["id"] == 1 and body["result"]["content"] == [{"type": "text", "text": "waited 300"}]
        # the id names it: the call ends without a response
        calling = http.post("/mcp", content=orjson.dumps(call(2, 2000, False)), headers=session)
        answer, status = await asyncio.gather(calling, after(0.1, 2))
        assert status == 202
        assert '"result"' not in answer.text


async def test_legacy_http_cancels_a_request_with_a_2_64_id() -> None:
    """The cancellation travels the bus to whichever instance runs the call: exact past 64 bits."""
    app = make_app()
    asgi = HttpTransport(app, legacy=LegacyServer(app))
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    big = 2**64
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1") as http:
        r = await http.post("/mcp", content=orjson.dumps(INIT), headers=headers)
        session = {**headers, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}

        async def cancel_it() -> int:
            await asyncio.sleep(0.1)
            sent = await http.post("/mcp", content=encode_message(cancel(big)), headers=session)
            return sent.status_code

        calling = http.post("/mcp", content=encode_message(call(big, 2000, False)), headers=session)
        answer, status = await asyncio.wait_for(asyncio.gather(calling, cancel_it()), 5)
        assert status == 202
        assert '"result"' not in answer.text  # cancelled: the stream ends without a response
