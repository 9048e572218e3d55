"""Fixtures: our conformance server as a real subprocess (HTTP and stdio) and a scripted raw HTTP server."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from services import http_server

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "mcp_stateless.cli"]


@pytest.fixture(scope="module")
def conformance_url() -> Iterator[str]:
    argv = [*CLI, "serve", "examples/conformance_server.py:app", "--http", "127.0.0.1:{port}", "--log-level", "warning"]
    with http_server(argv, "the conformance server", cwd=ROOT) as url:
        yield url


STDIO_CONFORMANCE = [*CLI, "serve", str(ROOT / "examples/conformance_server.py") + ":app", "--stdio"]

Reply = tuple[int, str, list[bytes]]  # status, content type, body chunks (several => chunked encoding)


@dataclass
class Scripted:
    """A raw HTTP/1.1 server on 127.0.0.1 whose replies a test scripts; it records every request."""

    handler: Callable[[dict[str, Any], dict[str, str]], Awaitable[Reply] | Reply]
    requests: list[tuple[dict[str, Any], dict[str, str]]] = field(default_factory=list)
    url: str = ""
    connections: int = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                headers = {}
                for line in lines[1:]:
                    if line:
                        k, _, v = line.partition(":")
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                msg = orjson.loads(body) if body else {"_http": lines[0]}
                self.requests.append((msg, headers))
                out = self.handler(msg, headers)
                status, ctype, chunks = await out if asyncio.iscoroutine(out) else out  # type: ignore[misc]
                if status < 0:  # "drop": send the head and the chunks, then close mid-body
                    writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n".encode())
                    for c in chunks:
                        writer.write(f"{len(c):x}\r\n".encode() + c + b"\r\n")
                    await writer.drain()
                    writer.close()
                    return
                if len(chunks) == 1:
                    writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n"
                                 f"Content-Length: {len(chunks[0])}\r\n\r\n".encode() + chunks[0])
                else:
                    writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n".encode())
                    for c in chunks:
                        writer.write(f"{len(c):x}\r\n".encode() + c + b"\r\n")
                        await writer.drain()
                    writer.write(b"0\r\n\r\n")
                await writer.drain()
        finally:
            writer.close()


@pytest.fixture
async def scripted() -> AsyncIterator[Callable[..., Awaitable[Scripted]]]:
    servers: list[asyncio.Server] = []

    async def make(handler: Callable[..., Any]) -> Scripted:
        s = Scripted(handler)
        srv = await asyncio.start_server(s._serve, "127.0.0.1", 0)
        servers.append(srv)
        s.url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/mcp"
        return s

    yield make
    for srv in servers:
        srv.close()


def ok(id_: Any, result: dict[str, Any]) -> Reply:
    return 200, "application/json", [orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": result})]


def err(status: int, id_: Any, code: int, message: str, data: Any = None) -> Reply:
    e: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        e["data"] = data
    return status, "application/json", [orjson.dumps({"jsonrpc": "2.0", "id": id_, "error": e})]
