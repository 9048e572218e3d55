"""A result that is not JSON becomes the same internal-error response on HTTP and on stdio."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import orjson

from helpers import Driver, rpc
from mcp_stateless import App
from mcp_stateless.protocol.encoding import UNENCODABLE
from mcp_stateless.transports.stdio import StdioServer

EXPECTED = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": UNENCODABLE}}


def make_app() -> App:
    app = App("encoding")

    @app.prompt()
    def opaque() -> list[dict[str, Any]]:
        return [{"role": "user", "content": {"type": "text", "text": "hi", "_meta": {"x": object()}}}]

    return app


async def test_http_answers_an_unencodable_result_with_an_internal_error() -> None:
    async with Driver(make_app()) as d:
        r = await d.call("prompts/get", {"name": "opaque"}, id=7)
    assert r.status == 200
    assert r.body == EXPECTED


async def test_stdio_answers_an_unencodable_result_with_the_same_error() -> None:
    server = StdioServer(make_app(), environ={})
    read_fd, write_fd = os.pipe()
    server._out_fd = write_fd
    reader = asyncio.StreamReader()
    reader.feed_data(orjson.dumps(rpc("prompts/get", {"name": "opaque"}, id=7)) + b"\n")
    reader.feed_eof()
    try:
        assert await server.serve(reader)
    finally:
        os.close(write_fd)
    with os.fdopen(read_fd, "rb") as out:
        assert [orjson.loads(line) for line in out.read().splitlines()] == [EXPECTED]
