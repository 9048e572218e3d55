"""How `http11` reads a chunked body from a server that writes raw bytes (an asyncio server in process): a
chunk is yielded in pieces of at most 64 KiB, so `bounded` refuses a chunk declared as 200 MiB after about
its limit, with the rest never read; a chunk not followed by CRLF is a malformed body (issue 27, item 18)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from mcp_stateless.client.http11 import BodyTooLarge, HttpError, HttpUrl, Pool, Response, bounded

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
Body = Callable[[asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def answering(body: Body) -> AsyncIterator[Response]:
    """A GET to a server that answers with HEAD and then whatever `body` writes."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD)
        try:
            await body(writer)
            await writer.drain()
            await asyncio.sleep(5)  # keep the connection open: the client decides when it is done
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = Pool(max_idle=0)
    try:
        resp = await pool.request("GET", HttpUrl.parse(f"http://127.0.0.1:{port}/"), {}, timeout=5)
        try:
            yield resp
        finally:
            await resp.aclose()
    finally:
        await pool.aclose()
        server.close()
        await server.wait_closed()


async def test_a_chunk_declared_as_200_mib_is_refused_after_the_limit_in_pieces() -> None:
    sent = 0

    async def huge(w: asyncio.StreamWriter) -> None:
        nonlocal sent
        w.write(b"%x\r\n" % (200 << 20))
        piece = b" " * (1 << 20)
        for _ in range(8):  # 8 MiB of the 200 declared, then silence: the old reader waited for all of it
            w.write(piece)
            sent += len(piece)
            await w.drain()

    async with answering(huge) as resp:
        pieces: list[int] = []
        with pytest.raises(BodyTooLarge, match=r"^past 1 MiB$"):
            async with asyncio.timeout(5):
                async for chunk in bounded(resp.iter_bytes(), 1 << 20, "past 1 MiB"):
                    pieces.append(len(chunk))
    assert max(pieces) <= 64 * 1024
    assert sum(pieces) <= 1 << 20


async def test_a_chunked_body_split_anywhere_reads_back_whole() -> None:
    async def two_chunks(w: asyncio.StreamWriter) -> None:
        for part in (b"5\r\nhel", b"lo\r\n", b"6\r\n world\r\n0\r\n\r\n"):
            w.write(part)
            await w.drain()
            await asyncio.sleep(0.01)

    async with answering(two_chunks) as resp:
        assert await resp.read() == b"hello world"


async def test_a_chunk_without_its_crlf_is_a_malformed_body() -> None:
    async def no_crlf(w: asyncio.StreamWriter) -> None:
        w.write(b"5\r\nhelloXY0\r\n\r\n")

    async with answering(no_crlf) as resp:
        with pytest.raises(HttpError, match=r"^malformed chunked body: no CRLF after a chunk$"):
            await resp.read()


async def test_a_body_nobody_reads_is_not_buffered_past_a_bound() -> None:
    """Reading pauses while the decoded body waits for its reader: a server that streams 16 MiB to a reader
    that reads nothing leaves at most a few hundred KiB in the client (the rest stays in socket buffers or
    unsent), and reading on gets every byte in order."""
    piece = bytes(range(256)) * 4096  # 1 MiB

    async def flood(w: asyncio.StreamWriter) -> None:
        for _ in range(16):
            w.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await w.drain()
        w.write(b"0\r\n\r\n")

    async with answering(flood) as resp:
        await asyncio.sleep(0.5)
        conn = resp._conn
        assert conn is not None and conn.paused
        assert len(conn.body) + len(conn.buf) < 1 << 20
        got = await resp.read()
    assert len(got) == 16 << 20 and got == piece * 16
