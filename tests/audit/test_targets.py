"""What the auditor keeps of a target's answers stays bounded (a real HTTP server that floods an SSE response
with notifications before, or instead of, the response; an endless body; a stdio server flooding progress), and a
target it cannot audit (a command that exits at once, or does not exist) fails with the reason."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import pytest

from mcp_stateless.audit.targets import BODY_MAX, MESSAGES_MAX, HttpTarget, StdioTarget
from mcp_stateless.audit.wire import modern


async def test_a_flood_of_notifications_is_kept_bounded_and_the_response_still_found() -> None:
    async def flood(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        head = await r.readuntil(b"\r\n\r\n")
        length = next(int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length"))
        req = orjson.loads(await r.readexactly(length))
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        note = b"data: " + orjson.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                                         "params": {"level": "info", "data": "x"}}) + b"\n\n"
        for _ in range(5 * MESSAGES_MAX):
            w.write(note)
            await w.drain()
        w.write(b"data: " + orjson.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {"tools": []}}) + b"\n\n")
        await w.drain()
        w.close()

    server = await asyncio.start_server(flood, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    target = HttpTarget([f"http://127.0.0.1:{port}/mcp"])
    try:
        ex = await target.send(modern("tools/list"), timeout=20)
    finally:
        await target.aclose()
        server.close()
        await server.wait_closed()
    assert len(ex.messages) == MESSAGES_MAX
    assert ex.response is not None and ex.response["result"] == {"tools": []}


# --------------------------------------------------------------------- an audit that could not audit fails


def _audit_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcp_stateless.cli", "audit", "--quiet", *args],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.slow
@pytest.mark.parametrize("code", ["pass", "import sys; sys.exit(3)"])
def test_audit_of_a_stdio_command_that_exits_at_once_fails_with_the_reason(code: str) -> None:
    """It exited 0 with one warning (the era check crashed on ServerLost), so a CI gate passed it."""
    done = _audit_cli("--stdio", f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}", "--json", "-")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    rep = json.loads(done.stdout)
    era = next(c for c in rep["checks"] if c["id"] == "era")
    assert era["status"] == "fail"
    assert era["finding"].startswith("neither era answered: server/discover gave no response: the server process")
    assert rep["summary"]["ok"] is False and rep["summary"]["warn"] == 0


@pytest.mark.slow
def test_audit_of_a_stdio_command_that_does_not_exist_fails_with_the_reason_and_no_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-server"
    done = _audit_cli("--stdio", str(missing))
    assert done.returncode == 2
    assert done.stderr.strip() == f"mcp-stateless: error: cannot start {str(missing)!r}: No such file or directory"


# ------------------------------------------------------------------------------------- bounded reads


async def _serve_once(handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
                      ) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"


async def _read_head(r: asyncio.StreamReader) -> None:
    head = await r.readuntil(b"\r\n\r\n")
    length = next(int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length"))
    await r.readexactly(length)


@pytest.mark.parametrize("kind", ["json", "sse"])
async def test_an_endless_response_body_is_read_only_up_to_the_bound(kind: str) -> None:
    """A 4 GiB body (JSON) or an SSE stream that never ends one event: the auditor stops at BODY_MAX bytes, says
    so, and keeps that much at most (it read the whole body into memory, or until the timeout)."""
    sent = 0

    async def endless(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        nonlocal sent
        await _read_head(r)
        ctype = b"application/json" if kind == "json" else b"text/event-stream"
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: " + ctype + b"\r\ncontent-length: " + str(4 << 30).encode() +
                b"\r\n\r\n" + (b'{"jsonrpc": "2.0", "id": 1, "result": {"x": "' if kind == "json" else b"data: "))
        chunk = b"x" * 65536
        try:
            while sent < 4 * BODY_MAX:  # bounded: the auditor must have hung up long before
                w.write(chunk)
                await w.drain()
                sent += len(chunk)
        except ConnectionError:
            pass
        w.close()

    server, url = await _serve_once(endless)
    target = HttpTarget([url])
    try:
        ex = await target.send(modern("tools/list"), timeout=60)
    finally:
        await target.aclose()
        server.close()
        await server.wait_closed()
    assert ex.failure == "the response went past 16 MiB: the auditor stopped reading it"
    assert ex.response is None and len(ex.body) == 0
    assert sent < 2 * BODY_MAX


@pytest.mark.slow
async def test_a_stdio_server_flooding_progress_is_kept_bounded_and_the_response_still_found() -> None:
    """A request carrying a progress token (a flow's call may) and a server that floods progress for it: the
    exchange kept every message (5001) before."""
    code = textwrap.dedent(f"""
        import json, sys
        req = json.loads(sys.stdin.readline())
        token = req["params"]["_meta"]["progressToken"]
        note = json.dumps({{"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {{"progressToken": token, "progress": 1}}}})
        for _ in range({5 * MESSAGES_MAX}):
            sys.stdout.write(note + "\\n")
        sys.stdout.write(json.dumps({{"jsonrpc": "2.0", "id": req["id"], "result": {{"tools": []}}}}) + "\\n")
        sys.stdout.flush()
        sys.stdin.read()
    """)
    target = StdioTarget(f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}")
    request = modern("tools/list")
    request["params"]["_meta"]["progressToken"] = "p-1"
    try:
        await target.start()
        ex = await target.send(request, timeout=30)
    finally:
        await target.aclose()
    assert len(ex.messages) == MESSAGES_MAX
    assert ex.messages[0]["method"] == "notifications/progress"
    assert ex.response is not None and ex.response["result"] == {"tools": []}
