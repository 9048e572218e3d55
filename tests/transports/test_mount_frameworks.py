"""`app.asgi()` inside FastAPI and Starlette, written the way their users write it: the endpoint answers at
the mount point (no 404), the exact-path route answers without a redirect, the app's lifespan runs with
the host's (or on the first request when the host does not forward it), and the state is opened."""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.routing import Mount, Route

from mcp_stateless import App, Client, Context, Handle, open_state
from mcp_stateless.client.errors import HttpStatusError

ROOT = Path(__file__).resolve().parents[2]
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def call(name: str, arguments: dict[str, Any], rid: int = 1) -> tuple[dict[str, Any], dict[str, str]]:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": name}
    msg = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
           "params": {"name": name, "arguments": arguments, "_meta": META}}
    return msg, headers


class Note(Handle, prefix="note", ttl=600, noun="note", issued_by="note"):
    """A note kept in the app's state store."""


def notes_app(events: list[str]) -> App:
    @asynccontextmanager
    async def lifespan(app: App) -> AsyncIterator[str]:
        events.append("enter")
        yield "db-1"
        events.append("exit")

    app = App("notes", lifespan=lifespan, state=open_state("memory://"))

    @app.tool()
    async def note(ctx: Context, text: str) -> str:
        handle = await Note.mint(ctx, {"text": text})
        return f"{ctx.lifespan}:{handle.id}"

    return app


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("mounted_fastapi", ROOT / "examples" / "mounted_fastapi.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mounted_fastapi"] = module
    spec.loader.exec_module(module)
    return module


async def test_the_fastapi_example_serves_both_paths_without_a_redirect_and_runs_the_lifespan() -> None:
    example = load_example()
    async with example.api.router.lifespan_context(example.api):  # what uvicorn runs around the host app
        assert example.notes.lifespan.value == {"greeting": "Hello"}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=example.api),
                                     base_url="http://127.0.0.1") as client:
            for path in ("/mcp", "/mcp/"):
                msg, headers = call("greet", {"name": "Ada"})
                r = await client.post(path, json=msg, headers=headers)
                assert r.status_code == 200, (path, r.status_code, r.headers.get("location"))
                assert r.json()["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
            assert (await client.get("/hello")).json() == {"message": "a plain FastAPI route"}
            assert (await client.post("/mcp/elsewhere", json=msg, headers=headers)).status_code == 404
    assert example.notes.lifespan.value is None  # exited with the host


async def test_fastapi_mount_alone_answers_at_the_mount_point_and_starts_on_the_first_request() -> None:
    events: list[str] = []
    notes = notes_app(events)
    api = FastAPI()  # no lifespan handed over: FastAPI does not forward it to mounted apps
    api.mount("/mcp", notes.asgi())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://127.0.0.1") as client:
        msg, headers = call("note", {"text": "hi"})
        r = await client.post("/mcp/", json=msg, headers=headers)
        assert r.status_code == 200
        text = r.json()["result"]["content"][0]["text"]
        assert text.startswith("db-1:")  # the lifespan ran on the first request
        assert notes.state is not None
        assert notes.handle_store is notes.state.handles  # minted in the state the app opened
        assert text.split(":", 1)[1].startswith("note_")
        # The bare prefix is Starlette's redirect to the mount (307 keeps the POST); followed, it answers.
        r = await client.post("/mcp", json=msg, headers=headers)
        assert (r.status_code, r.headers["location"]) == (307, "http://127.0.0.1/mcp/")
        r = await client.post("/mcp", json=msg, headers=headers, follow_redirects=True)
        assert r.status_code == 200 and r.json()["result"]["content"][0]["text"].startswith("db-1:")
    assert events == ["enter"]  # once, however many requests


async def test_starlette_route_and_mount_with_the_host_lifespan() -> None:
    events: list[str] = []
    notes = notes_app(events)
    mcp = notes.asgi()
    web = Starlette(routes=[Route("/tools/mcp", mcp), Mount("/v2", mcp)], lifespan=mcp.lifespan)
    async with web.router.lifespan_context(web):
        assert events == ["enter"]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=web), base_url="http://127.0.0.1") as client:
            for path in ("/tools/mcp", "/v2", "/v2/"):
                msg, headers = call("note", {"text": path})
                r = await client.post(path, json=msg, headers=headers, follow_redirects=path == "/v2")
                assert r.status_code == 200, path
                assert r.json()["result"]["content"][0]["text"].startswith("db-1:")
    assert events == ["enter", "exit"]


async def serve_in_loop(asgi: Any) -> tuple[uvicorn.Server, asyncio.Task[None], socket.socket]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", lifespan="on"))
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    for _ in range(200):
        if server.started:
            break
        await asyncio.sleep(0.05)
    assert server.started
    return server, task, sock


async def test_our_client_talks_to_the_mounted_endpoint_over_a_real_socket() -> None:
    example = load_example()
    server, task, sock = await serve_in_loop(example.api)
    try:
        async with Client(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp") as client:
            assert (await client.call_tool("greet", {"name": "Bob"}))["content"][0]["text"] == "Hello, Bob!"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)
        sock.close()


async def test_our_client_follows_the_mounts_redirect_once_and_stays(caplog: Any) -> None:
    events: list[str] = []
    notes = notes_app(events)
    api = FastAPI()
    api.mount("/mcp", notes.asgi())  # only the mount: /mcp is Starlette's 307 to /mcp/
    server, task, sock = await serve_in_loop(api)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    try:
        caplog.set_level("INFO", logger="mcp_stateless.client")
        async with Client(url) as client:
            for text in ("a", "b", "c"):
                assert (await client.call_tool("note", {"text": text}))["content"][0]["text"].startswith("db-1:")
        redirects = [r.getMessage() for r in caplog.records if r.getMessage().startswith("HTTP 307")]
        assert redirects == [f"HTTP 307 from {url} to /mcp/: using that URL"]  # once, then the new URL
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)
        sock.close()


async def test_a_redirect_to_another_origin_is_not_followed() -> None:
    seen: list[str] = []

    async def elsewhere(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        seen.append(scope["path"])
        await send({"type": "http.response.start", "status": 307,
                    "headers": [(b"location", b"http://198.51.100.7/mcp"), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    server, task, sock = await serve_in_loop(elsewhere)
    try:
        with pytest.raises(HttpStatusError) as refused:
            async with Client(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", probe_timeout=5) as client:
                await client.list_tools()
        assert refused.value.status == 307
        assert seen and set(seen) == {"/mcp"}  # asked here only; nothing was replayed to the other origin
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)
        sock.close()


async def test_a_starlette_middleware_class_wraps_the_endpoint_through_add_middleware() -> None:
    import functools

    from starlette.middleware.cors import CORSMiddleware

    from mcp_stateless import OriginPolicy

    app = App("cors")

    @app.tool()
    async def ping() -> str:
        return "pong"

    app.add_middleware(functools.partial(CORSMiddleware, allow_origins=["https://app.example.com"],
                                         allow_methods=["POST"], allow_headers=["*"]))
    asgi = app.asgi(origin_policy=OriginPolicy.public(["https://app.example.com"]))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1") as client:
        r = await client.options("/mcp", headers={"origin": "https://app.example.com",
                                                  "access-control-request-method": "POST"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example.com"
        msg, headers = call("ping", {})
        r = await client.post("/mcp", json=msg, headers={**headers, "origin": "https://app.example.com"})
        assert r.status_code == 200 and r.json()["result"]["content"] == [{"type": "text", "text": "pong"}]
        assert r.headers["access-control-allow-origin"] == "https://app.example.com"
