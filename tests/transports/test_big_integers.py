"""Integers past 64 bits are JSON numbers like any other: a tool result holding 2**64 (or -2**64 - 1), an
argument of that size and a request id of that size are answered exactly on every wire: modern HTTP (JSON and
SSE), 2025 Streamable HTTP (JSON and SSE), the 2024-11-05 HTTP+SSE channel, and stdio in both eras. orjson
(the encoder and decoder of the hot path) stops at 64 bits: it raises on encoding and turns such a number into
a float on decoding, so every one of these wires must fall back exactly."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_stateless import App, Context
from mcp_stateless.server.legacy import LegacyServer
from sse_stream import sse

BIG, NEG = 2**64, -(2**64) - 1
PV, LEGACY = "2026-07-28", "2025-11-25"
ACCEPT = "application/json, text/event-stream"
META = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}
ROOT = Path(__file__).resolve().parents[2]
APP_SOURCE = '''
from mcp_stateless import App, Context
app = App("big-integers")

@app.tool()
async def double(n: int, ctx: Context, progress: bool = False) -> dict[str, int]:
    if progress:
        await ctx.report_progress(1, 2)
    return {"twice": 2 * n, "negative": -2 * n - 1}
'''


def make_app() -> App:
    app = App("big-integers")

    @app.tool()
    async def double(n: int, ctx: Context, progress: bool = False) -> dict[str, int]:
        if progress:  # a progress notification first makes the answer an SSE stream
            await ctx.report_progress(1, 2)
        return {"twice": 2 * n, "negative": -2 * n - 1}

    return app


def call(rid: Any, *, progress: bool = False, modern: bool = True) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "double", "arguments": {"n": 2**63, "progress": progress}}
    if modern:
        params["_meta"] = {**META, **({"progressToken": "p"} if progress else {})}
    elif progress:
        params["_meta"] = {"progressToken": "p"}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def assert_exact(answer: dict[str, Any], rid: Any) -> None:
    assert answer["id"] == rid and type(answer["id"]) is type(rid)
    structured = answer["result"]["structuredContent"]
    assert structured == {"twice": BIG, "negative": NEG}
    assert all(type(v) is int for v in structured.values()), structured
    assert json.loads(answer["result"]["content"][0]["text"]) == {"twice": BIG, "negative": NEG}


def messages(r: httpx.Response) -> list[dict[str, Any]]:
    if r.headers["content-type"].startswith("application/json"):
        return [json.loads(r.content)]
    return [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]


def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    # the body is written by the standard library, so the big numbers go out exactly as typed
    return httpx.post(url, content=json.dumps(body), headers={"content-type": "application/json",
                                                              "accept": ACCEPT, **headers}, timeout=15)


@pytest.mark.parametrize("progress", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("rid", [7, BIG], ids=["small-id", "big-id"])
def test_modern_http(served: Callable[..., Any], progress: bool, rid: int) -> None:
    s = served(make_app())
    r = post(s.url, call(rid, progress=progress), {"mcp-protocol-version": PV, "mcp-method": "tools/call",
                                                   "mcp-name": "double"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream" if progress else "application/json")
    assert_exact(messages(r)[-1], rid)


@pytest.mark.parametrize("progress", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("rid", [7, BIG], ids=["small-id", "big-id"])
def test_2025_streamable_http(served: Callable[..., Any], progress: bool, rid: int) -> None:
    app = make_app()
    s = served(app, legacy=LegacyServer(app))
    init = post(s.url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}, {})
    assert init.status_code == 200, init.text
    session = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}
    assert post(s.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session).status_code == 202
    r = post(s.url, call(rid, progress=progress, modern=False), session)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream" if progress else "application/json")
    assert_exact(messages(r)[-1], rid)


def test_2024_http_sse_channel(served: Callable[..., Any]) -> None:
    app = make_app()
    s = served(app, legacy=LegacyServer(app), legacy_sse=True)
    with sse(s.url) as stream:
        endpoint = stream.post_url()
        init = post(endpoint, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}, {})
        assert init.status_code == 202
        stream.message(lambda m: m.get("id") == 0)
        assert post(endpoint, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {}).status_code == 202
        for rid in (8, BIG):
            assert post(endpoint, call(rid, progress=True, modern=False), {}).status_code == 202
            assert_exact(stream.message(lambda m, rid=rid: m.get("id") == rid), rid)


@pytest.mark.slow
@pytest.mark.parametrize("era", ["modern", "2025"])
def test_stdio(tmp_path: Path, era: str) -> None:
    source = tmp_path / "big_app.py"
    source.write_text(APP_SOURCE)
    cli = str(Path(sys.executable).parent / "mcp-stateless")
    lines = []
    if era == "2025":
        lines += [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [call(9, modern=era == "modern"), call(BIG, modern=era == "modern")]
    proc = subprocess.Popen([cli, "serve", f"{source}:app", "--stdio", "--log-level", "error"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    deadline = threading.Timer(30, proc.kill)  # a hung server closes stdout, and the read below fails
    deadline.start()
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in lines))
        proc.stdin.flush()  # kept open until both answers are in: an end of input ends a 2025 session
        answers: dict[Any, dict[str, Any]] = {}
        while not {9, BIG} <= answers.keys():
            line = proc.stdout.readline()
            assert line, f"the server closed stdout; answers so far: {answers}"
            m = json.loads(line)
            if "id" in m:
                answers[m["id"]] = m
    finally:
        deadline.cancel()
        proc.kill()
        proc.wait(10)
    assert_exact(answers[9], 9)
    assert_exact(answers[BIG], BIG)
