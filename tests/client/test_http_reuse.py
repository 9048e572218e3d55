"""A Streamable HTTP exchange closed after its answer reuses the connection when the server ends the SSE stream
right after the response (the spec's SHOULD, and what the TypeScript SDK does a moment later), instead of
closing it mid-body and paying a new TCP connection per call; a stream that stays open is closed after a short
bounded wait; one closed before its answer is still cut at once.

The server is a few lines of asyncio on 127.0.0.1 that answers every POST with a chunked SSE stream and counts
the connections it accepts."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from mcp_stateless.client.channels import HttpChannel


@dataclass
class SseServer:
    port: int
    connections: int = 0
    end: str = "after"  # "after": the terminal chunk follows the response; "never": the stream stays open;
    # "signal": it is written when the test sets `release`
    release: asyncio.Event = field(default_factory=asyncio.Event)


async def _serve(srv: SseServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    srv.connections += 1
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            msg = json.loads(await reader.readexactly(length))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")

            def chunk(data: bytes) -> bytes:
                return b"%x\r\n%s\r\n" % (len(data), data)

            note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
            writer.write(chunk(b"event: message\ndata: " + json.dumps(note).encode() + b"\n\n"))
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {"ok": True}}
            writer.write(chunk(b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n"))
            await writer.drain()
            if srv.end == "after":
                await asyncio.sleep(0.001)  # the end a moment after the event, as a separate write
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            elif srv.end == "signal":
                await srv.release.wait()
                srv.release.clear()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            else:
                await asyncio.sleep(30)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


@pytest.fixture
async def server() -> AsyncIterator[SseServer]:
    srv = SseServer(0)
    tcp = await asyncio.start_server(lambda r, w: _serve(srv, r, w), "127.0.0.1", 0)
    srv.port = tcp.sockets[0].getsockname()[1]
    try:
        yield srv
    finally:
        tcp.close()


async def _call(chan: HttpChannel, n: int, *, stop_early: bool = False) -> dict[str, object] | None:
    ex = await chan.exchange({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {}})
    try:
        async for m in ex:
            if stop_early:
                return None  # closed on the first message, before the answer
            if m.get("id") == n:
                return m
    finally:
        await ex.aclose()
    return None


async def test_a_stream_ended_after_its_answer_leaves_the_connection_for_the_next_call(server: SseServer) -> None:
    chan = HttpChannel(f"http://127.0.0.1:{server.port}/mcp")
    try:
        for n in range(1, 6):
            assert await _call(chan, n) == {"jsonrpc": "2.0", "id": n, "result": {"ok": True}}
    finally:
        await chan.aclose()
    assert server.connections == 1  # it was 5: each aclose() cut the body before its terminal chunk


async def test_a_stream_left_open_after_its_answer_is_closed_within_a_bounded_wait(server: SseServer) -> None:
    server.end = "never"
    chan = HttpChannel(f"http://127.0.0.1:{server.port}/mcp")
    try:
        started = time.monotonic()
        for n in range(1, 4):
            assert (await _call(chan, n) or {}).get("result") == {"ok": True}
        assert time.monotonic() - started < 2.0  # 100 ms of waiting per call at most, not the server's 30 s
    finally:
        await chan.aclose()
    assert server.connections == 3  # nothing to reuse: each stream was cut


async def test_a_stream_closed_before_its_answer_is_cut_at_once(server: SseServer) -> None:
    chan = HttpChannel(f"http://127.0.0.1:{server.port}/mcp")
    try:
        for n in range(1, 3):
            assert await _call(chan, n, stop_early=True) is None
    finally:
        await chan.aclose()
    assert server.connections == 2  # a close before the answer never reads on (on a modern server: a cancel)


async def test_the_answer_is_returned_before_the_stream_ends_and_the_next_call_waits_for_that_connection(
        server: SseServer) -> None:
    """The caller is not held until the stream's end (read in the background), and a call made meanwhile
    takes the connection once that end comes instead of opening a second one."""
    server.end = "signal"
    chan = HttpChannel(f"http://127.0.0.1:{server.port}/mcp")
    try:
        # The server writes no end until told: had the first call waited for it, this would time out.
        first = await asyncio.wait_for(_call(chan, 1), 2)
        assert first == {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}
        second = asyncio.ensure_future(_call(chan, 2))
        await asyncio.sleep(0.02)
        assert not second.done() and server.connections == 1  # waiting for the finishing connection
        server.release.set()
        assert await asyncio.wait_for(second, 2) == {"jsonrpc": "2.0", "id": 2, "result": {"ok": True}}
        server.release.set()
    finally:
        await chan.aclose()
    assert server.connections == 1
