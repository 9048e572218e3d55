"""The middleware hook at the endpoint seam (`App(request_middleware=...)`, `app.add_request_middleware`), and what the
observability layer costs when its extras are absent or unused."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless import App, Client, McpError
from mcp_stateless.protocol.endpoint import Call, Handler, ListenItem, Lister, Reply
from mcp_stateless.protocol.envelope import Request

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def handle(self, req: Request, call: Call, call_next: Handler) -> Reply:
        self.log.append(f"{self.name} > {req.method} {call.transport}")
        reply = await call_next(req, call)
        self.log.append(f"{self.name} < {req.method} {reply.error_code}")
        return reply

    async def listen(self, req: Request, call: Call, call_next: Lister) -> AsyncGenerator[ListenItem, None]:
        self.log.append(f"{self.name} listen open")
        stream = call_next(req, call)
        try:
            async for item in stream:
                yield item
        finally:
            self.log.append(f"{self.name} listen closed")
            await stream.aclose()


def small_app(**kw: Any) -> App:
    app = App("mw", **kw)

    @app.tool()
    async def echo(text: str) -> str:
        return text

    return app


async def test_middleware_wraps_every_request_first_given_outermost() -> None:
    log: list[str] = []
    app = small_app(request_middleware=[Recorder("outer", log)])
    app.add_request_middleware(Recorder("inner", log))
    async with Client(app) as c:
        await c.call_tool("echo", {"text": "x"})
    calls = [e for e in log if "tools/call" in e]
    assert calls == ["outer > tools/call memory", "inner > tools/call memory", "inner < tools/call None",
                     "outer < tools/call None"]


async def test_middleware_sees_listen_streams_open_and_close() -> None:
    log: list[str] = []
    app = small_app(request_middleware=[Recorder("m", log)])
    async with Client(app) as c:
        sub = c.listen(tools=True)
        ack = await asyncio.wait_for(anext(sub), 10)
        assert ack.method == "notifications/subscriptions/acknowledged"
        assert [e for e in log if "listen" in e] == ["m listen open"]
        app.declare("tools")
        app.remove_tool("echo")  # publishes tools/list_changed
        event = await asyncio.wait_for(anext(sub), 10)
        assert event.method == "notifications/tools/list_changed"
        await sub.aclose()
    assert log.count("m listen open") == 1 and log.count("m listen closed") == 1


async def test_a_middleware_may_answer_itself() -> None:
    class Refuse:
        async def handle(self, req: Request, call: Call, call_next: Handler) -> Reply:
            if req.method == "tools/call":
                return Reply.error(req.id, McpError(-32001, "maintenance"))
            return await call_next(req, call)

        def listen(self, req: Request, call: Call, call_next: Lister) -> AsyncGenerator[ListenItem, None]:
            return call_next(req, call)

    app = small_app(request_middleware=[Refuse()])
    async with Client(app) as c:
        with pytest.raises(McpError) as refused:
            await c.call_tool("echo", {"text": "x"})
    assert (refused.value.code, refused.value.message) == (-32001, "maintenance")


def probe(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_the_extras_are_not_imported_until_asked_for() -> None:
    code = ("import sys\n"
            "import mcp_stateless.observability as o\n"
            "from mcp_stateless import App, Client\n"
            "app = App('x')\n"
            "o.instrument(app, metrics=False, tracing=False)\n"
            "print(sorted(m.split('.')[0] for m in sys.modules if m.startswith(('prometheus_client', "
            "'opentelemetry'))) [:1])\n")
    assert probe(code) == "[]"


@pytest.mark.slow
def test_without_opentelemetry_nothing_traces_and_clients_still_work() -> None:
    """opentelemetry made unimportable, as when the extra is not installed."""
    code = ("import sys, asyncio\n"
            "sys.modules['opentelemetry'] = None\n"
            "from mcp_stateless import App, Client\n"
            "from mcp_stateless.observability import instrument, otel_installed\n"
            "app = App('x')\n"
            "@app.tool()\n"
            "async def echo(text: str) -> str:\n"
            "    return text\n"
            "assert not otel_installed()\n"
            "instrument(app)\n"
            "async def main():\n"
            "    async with Client(app) as c:\n"
            "        return (await c.call_tool('echo', {'text': 'fine'}))['content'][0]['text']\n"
            "print(asyncio.run(main()), len(app.request_middleware))\n")
    assert probe(code) == "fine 0"
