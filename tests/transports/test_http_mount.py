"""The ASGI transport mounts inside Starlette (and so FastAPI) next to other routes."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from mcp_stateless import App, HttpTransport

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json",
           "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"}


def build() -> Starlette:
    app = App("mounted")

    @app.tool()
    def echo(text: str) -> str:
        return text

    async def health(_request: object) -> PlainTextResponse:
        return PlainTextResponse("ok")

    transport = HttpTransport(app, path=None)
    # Route for the exact path (Starlette passes an ASGI app straight through); Mount for a prefix.
    return Starlette(routes=[Route("/health", health), Route("/mcp", transport), Mount("/v2/mcp", app=transport)])


async def test_mounted_endpoint_answers_and_neighbours_still_work() -> None:
    web = build()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=web), base_url="http://127.0.0.1") as client:
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "mounted"}, "_meta": META}}
        for path in ("/mcp", "/v2/mcp/"):
            r = await client.post(path, json=body, headers=HEADERS)
            assert r.status_code == 200, path
            assert r.json()["result"]["content"] == [{"type": "text", "text": "mounted"}]
            assert r.json()["id"] == 7
        assert (await client.get("/health")).text == "ok"
        r = await client.get("/mcp", headers={"accept": "text/event-stream"})
        assert r.status_code == 405 and r.headers["allow"] == "POST"
