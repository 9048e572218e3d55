"""`@app.tool(blocking=False)`: a quick sync tool runs on the event loop thread; the default stays off it."""

from __future__ import annotations

import threading

from helpers import Driver, text_of
from mcp_stateless import App, Context

app = App("blocking")
ran_on: dict[str, threading.Thread] = {}


@app.tool()
def threaded(text: str) -> str:
    ran_on["threaded"] = threading.current_thread()
    return text


@app.tool(blocking=False)
def inline(text: str, ctx: Context) -> str:
    ran_on["inline"] = threading.current_thread()
    ctx.report_progress(1, 1)
    return text.upper()


@app.tool(blocking=False)
def inline_fails(text: str) -> str:
    raise ValueError("nope")


async def test_default_sync_tool_runs_in_a_worker_thread_and_non_blocking_one_on_the_loop() -> None:
    loop_thread = threading.current_thread()
    async with Driver(app) as d:
        r = await d.call("tools/call", {"name": "threaded", "arguments": {"text": "a"}})
        assert r.status == 200 and text_of(r.result) == "a"
        r = await d.call("tools/call", {"name": "inline", "arguments": {"text": "b"}}, progressToken="t1")
        assert r.status == 200 and r.sse
        assert [m["method"] for m in r.messages[:-1]] == ["notifications/progress"]
        assert text_of(r.result) == "B"
    assert ran_on["threaded"] is not loop_thread
    assert ran_on["inline"] is loop_thread


async def test_non_blocking_tool_failure_is_an_is_error_result() -> None:
    async with Driver(app) as d:
        r = await d.call("tools/call", {"name": "inline_fails", "arguments": {"text": "x"}})
    assert r.status == 200
    assert r.result["isError"] is True
    assert text_of(r.result) == "Tool inline_fails failed: ValueError: nope"
