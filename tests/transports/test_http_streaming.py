"""Real uvicorn server: SSE streamed as it happens, disconnect = cancellation, subscriptions/listen."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest

from helpers import SUB_ID_KEY, headers_for, rpc, validate_message
from mcp_stateless import App, Context

TIMEOUT = httpx.Timeout(10.0)


class Probe:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.cancelled = threading.Event()
        self.started = threading.Event()


def streaming_app(probe: Probe, **kw: Any) -> App:
    app = App("stream", **kw)

    @app.tool()
    async def gated(ctx: Context) -> str:
        await ctx.report_progress(1, 2, "first")
        while not probe.release.is_set():
            await asyncio.sleep(0.01)
        await ctx.report_progress(2, 2, "second")
        return "released"

    @app.tool()
    async def forever(ctx: Context) -> str:
        probe.started.set()
        await ctx.report_progress(1)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            probe.cancelled.set()
            raise
        return "never"

    @app.tool()
    async def add_tool() -> str:
        app.add_tool(
            __import__("mcp_stateless.server.registry", fromlist=["Tool"]).Tool.build(
                lambda: "new", name=f"dyn{len(app.catalog.tools)}"
            )
        )
        return "added"

    @app.resource("mem://cfg", description="config")
    def cfg() -> str:
        return "cfg"

    return app


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any] | str]:
    """Yield each JSON message (and each comment line, as a str) of an SSE stream as it arrives."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield json.loads("\n".join(data))
                data = []
        elif line.startswith(":"):
            yield line
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        else:
            assert line.startswith("event:"), f"unexpected SSE line {line!r}"


def post_stream(client: httpx.Client, url: str, msg: dict[str, Any], **hdr: str | None) -> Any:
    return client.stream("POST", url, content=orjson.dumps(msg), headers=headers_for(msg, **hdr))


def test_progress_is_streamed_before_the_handler_finishes(served: Callable[..., Any]) -> None:
    probe = Probe()
    s = served(streaming_app(probe))
    msg = rpc("tools/call", {"name": "gated"}, progressToken="g")
    with httpx.Client(timeout=TIMEOUT) as c, post_stream(c, s.url, msg) as r:
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream"
        assert r.headers["x-accel-buffering"] == "no" and r.headers["cache-control"] == "no-cache"
        events = sse_events(r.iter_lines())
        first = next(events)
        assert isinstance(first, dict)
        validate_message(first)
        assert first["params"] == {"progressToken": "g", "progress": 1, "total": 2, "message": "first"}
        probe.release.set()  # the handler is still running: only now may it finish
        rest = [e for e in events if isinstance(e, dict)]
    for m in rest:
        validate_message(m, "tools/call")
    assert rest[0]["params"]["progress"] == 2
    assert rest[-1]["id"] == 1 and rest[-1]["result"]["content"] == [{"type": "text", "text": "released"}]
    assert len(rest) == 2


def test_client_disconnect_cancels_the_handler(served: Callable[..., Any]) -> None:
    probe = Probe()
    s = served(streaming_app(probe))
    msg = rpc("tools/call", {"name": "forever"}, progressToken=1)
    with httpx.Client(timeout=TIMEOUT) as c, post_stream(c, s.url, msg) as r:
        first = next(sse_events(r.iter_lines()))
        assert isinstance(first, dict) and first["method"] == "notifications/progress"
    # leaving the block closes the stream
    assert probe.cancelled.wait(5), "the handler never saw CancelledError"


def test_disconnect_before_any_output_cancels_too(served: Callable[..., Any]) -> None:
    probe = Probe()
    s = served(streaming_app(probe))
    msg = rpc("tools/call", {"name": "forever"})  # no progress token: a JSON response would follow
    body = orjson.dumps(msg)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers_for(msg).items())
    with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:
        start = f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{s.port}\r\ncontent-length: {len(body)}\r\n"
        sock.sendall((start + head + "\r\n").encode() + body)
        assert probe.started.wait(5)
    assert probe.cancelled.wait(5), "the handler never saw CancelledError"


# --------------------------------------------------------------------------- listen
def listen_msg(id_: Any, **notifications: Any) -> dict[str, Any]:
    return rpc("subscriptions/listen", {"notifications": notifications}, id=id_)


def open_listen(c: httpx.Client, url: str, msg: dict[str, Any]) -> Any:
    return c.stream("POST", url, content=orjson.dumps(msg), headers=headers_for(msg))


def call(c: httpx.Client, url: str, name: str) -> dict[str, Any]:
    msg = rpc("tools/call", {"name": name}, id="x")
    r = c.post(url, content=orjson.dumps(msg), headers=headers_for(msg))
    out: dict[str, Any] = r.json()
    return out


def next_message(events: Iterator[dict[str, Any] | str]) -> dict[str, Any]:
    for e in events:
        if isinstance(e, dict):
            return e
    raise AssertionError("stream ended")


@pytest.mark.parametrize("sid", ["L1", 7])
def test_listen_ack_first_then_requested_events_only(served: Callable[..., Any], sid: Any) -> None:
    probe = Probe()
    app = streaming_app(probe, listen_keepalive_s=30)
    s = served(app)
    msg = listen_msg(sid, toolsListChanged=True, resourceSubscriptions=["mem://cfg"], unknownKind=True)
    with (
        httpx.Client(timeout=TIMEOUT) as c,
        httpx.Client(timeout=TIMEOUT) as other,
        open_listen(c, s.url, msg) as r,
    ):
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        assert r.headers["x-accel-buffering"] == "no"
        events = sse_events(r.iter_lines())
        ack = next_message(events)
        validate_message(ack)
        assert ack == {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {
                "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["mem://cfg"]},
                "_meta": {SUB_ID_KEY: sid},
            },
        }
        assert type(ack["params"]["_meta"][SUB_ID_KEY]) is type(sid)
        # not subscribed: prompts/resources list changes and other URIs never arrive
        s.run(app.notify_prompts_changed())
        s.run(app.notify_resources_changed())
        s.run(app.notify_resource_updated("mem://other"))
        s.run(app.notify_resource_updated("mem://cfgX"))
        assert call(other, s.url, "add_tool")["result"]["content"][0]["text"] == "added"
        ev = next_message(events)
        validate_message(ev)
        assert ev == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {SUB_ID_KEY: sid}},
        }
        s.run(app.notify_resource_updated("mem://cfg/sub"))
        s.run(app.notify_resource_updated("mem://cfg"))
        for uri in ("mem://cfg/sub", "mem://cfg"):
            ev = next_message(events)
            validate_message(ev)
            assert ev == {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": uri, "_meta": {SUB_ID_KEY: sid}},
            }
            assert type(ev["params"]["_meta"][SUB_ID_KEY]) is type(sid)


def test_listen_honours_only_what_the_server_supports(served: Callable[..., Any]) -> None:
    app = App("tools-only")

    @app.tool()
    def t() -> str:
        return "t"

    s = served(app)
    msg = listen_msg(
        "L",
        toolsListChanged=True,
        promptsListChanged=True,
        resourcesListChanged=True,
        resourceSubscriptions=["mem://x"],
    )
    with httpx.Client(timeout=TIMEOUT) as c, open_listen(c, s.url, msg) as r:
        ack = next_message(sse_events(r.iter_lines()))
    assert ack["params"]["notifications"] == {"toolsListChanged": True}


def test_listen_keepalive_comment_and_graceful_end(served: Callable[..., Any]) -> None:
    app = streaming_app(Probe(), listen_keepalive_s=0.1)
    s = served(app)
    with httpx.Client(timeout=TIMEOUT) as c, open_listen(c, s.url, listen_msg(3, toolsListChanged=True)) as r:
        events = sse_events(r.iter_lines())
        assert isinstance(next(events), dict)  # ack
        t0 = time.monotonic()
        comment = next(events)
        assert comment == ": keep-alive" and time.monotonic() - t0 < 3
        s.run(app.aclose())
        rest = list(events)  # the stream must end by itself
    final = [e for e in rest if isinstance(e, dict)]
    assert final == [
        {"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete", "_meta": {SUB_ID_KEY: 3}}}
    ]
    validate_message(final[0], "subscriptions/listen")


def test_listen_errors(served: Callable[..., Any]) -> None:
    s = served(streaming_app(Probe()))
    with httpx.Client(timeout=TIMEOUT) as c:
        bad = rpc("subscriptions/listen", {"notifications": {"toolsListChanged": "yes"}}, id="b")
        r = c.post(s.url, content=orjson.dumps(bad), headers=headers_for(bad))
        assert (r.status_code, r.json()["id"], r.json()["error"]["code"]) == (400, "b", -32602)
        missing = rpc("subscriptions/listen", {}, id="m")
        r = c.post(s.url, content=orjson.dumps(missing), headers=headers_for(missing))
        assert (r.status_code, r.json()["error"]["code"]) == (400, -32602)
        validate_message(r.json())
    no_caps = App("nothing")
    s2 = served(no_caps)
    with httpx.Client(timeout=TIMEOUT) as c:
        msg = listen_msg(1, toolsListChanged=True)
        r = c.post(s2.url, content=orjson.dumps(msg), headers=headers_for(msg))
        assert (r.status_code, r.json()["error"]["code"]) == (404, -32601)


def test_listen_disconnect_releases_the_subscription(served: Callable[..., Any]) -> None:
    app = streaming_app(Probe(), listen_keepalive_s=30)
    s = served(app)
    with httpx.Client(timeout=TIMEOUT) as c, open_listen(c, s.url, listen_msg(1, toolsListChanged=True)) as r:
        events = sse_events(r.iter_lines())  # keep it referenced: dropping it closes the stream
        next_message(events)
        bus = app.events
        assert bus.subscriber_count == 1  # type: ignore[attr-defined]
    deadline = time.monotonic() + 5
    while bus.subscriber_count and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.02)
    assert bus.subscriber_count == 0  # type: ignore[attr-defined]
