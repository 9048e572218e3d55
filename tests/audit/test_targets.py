"""What the auditor keeps of a target's answers stays bounded: a real HTTP server that floods an SSE
response with notifications before (or instead of) the response."""

from __future__ import annotations

import asyncio

import orjson

from mcp_stateless.audit.targets import MESSAGES_MAX, HttpTarget
from mcp_stateless.audit.wire import modern


async def test_a_flood_of_notifications_is_kept_bounded_and_the_response_still_found() -> None:
    async def flood(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        head = await r.readuntil(b"\r\n\r\n")
        length = next(int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length"))
        req = orjson.loads(await r.readexactly(length))
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        note = b"data: " + orjson.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                                         "params": {"level": "info", "data": "x"}}) + b"\n\n"
        for _ in range(5 * MESSAGES_MAX):
            w.write(note)
            await w.drain()
        w.write(b"data: " + orjson.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {"tools": []}}) + b"\n\n")
        await w.drain()
        w.close()

    server = await asyncio.start_server(flood, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    target = HttpTarget([f"http://127.0.0.1:{port}/mcp"])
    try:
        ex = await target.send(modern("tools/list"), timeout=20)
    finally:
        await target.aclose()
        server.close()
        await server.wait_closed()
    assert len(ex.messages) == MESSAGES_MAX
    assert ex.response is not None and ex.response["result"] == {"tools": []}
