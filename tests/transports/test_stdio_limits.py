"""stdio limits for real (the `mcp-stateless serve … --stdio` subprocess): the line after an over-long line
is answered, a client that does not read its stdout gets backpressure instead of a growing server, and a
closed stdout stops the server. Every loop is bounded in count and time."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from mcp_stateless.transports.stdio import MAX_LINE, read_lines
from transports.test_stdio import CLI, ROOT, StdioProc, call

FLOOD = "tests/transports/apps/flood_app.py:app"


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# ------------------------------------------------------------------------------- over-long lines
async def frame(chunks: list[bytes], max_line: int) -> list[bytes | None]:
    reader = asyncio.StreamReader()
    for c in chunks:
        reader.feed_data(c)
    reader.feed_eof()
    return [line async for line in read_lines(reader, max_line)]


@pytest.mark.parametrize(("chunks", "expected"), [
    ([b"a\nbb\n"], [b"a", b"bb"]),
    ([b"a", b"b\nc", b"d\n", b"e"], [b"ab", b"cd", b"e"]),
    ([b"0123456789\nok\n"], [None, b"ok"]),  # too long, newline in the same chunk
    ([b"01234", b"56789", b"abc\nok\n"], [None, b"ok"]),  # too long across chunks: reported once
    ([b"0123456789", b"0123456789", b"\n", b"ok\n"], [None, b"ok"]),  # the newline arrives alone
    ([b"12345678\n"], [b"12345678"]),  # exactly the limit
    ([b"1234", b"56789\n", b"x\n"], [None, b"x"]),  # one over the limit across a chunk edge
])
async def test_read_lines_frames_and_skips_only_the_long_line(chunks: list[bytes],
                                                              expected: list[bytes | None]) -> None:
    assert await frame(chunks, 8) == expected


@pytest.mark.slow
async def test_the_line_after_an_over_long_line_is_answered() -> None:
    s = await StdioProc.start(FLOOD)
    try:
        huge = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"pad":"' + b"x" * (MAX_LINE + 16) + b'"}}\n'
        await s.send(huge + orjson.dumps(call(2, "big", {"size": 3})) + b"\n")
        first = await s.recv(30)
        assert first["error"] == {"code": -32600, "message": "Message too large"} and first.get("id") is None
        answer, _ = await s.response(2, 30)
        assert answer["result"]["content"][0]["text"] == "xxx"
        # and once more, the long line split across many writes
        half = b"y" * (MAX_LINE // 2 + 10)
        await s.send(half, half + b"\n" + orjson.dumps(call(3, "big", {"size": 1})) + b"\n")
        assert (await s.recv(30))["error"]["message"] == "Message too large"
        assert (await s.response(3, 30))[0]["result"]["content"][0]["text"] == "x"
        assert await s.close() < 5
    finally:
        s.kill()


# ------------------------------------------------------------------------------- flow control
@pytest.mark.slow
async def test_a_client_that_does_not_read_gets_backpressure_not_a_growing_server() -> None:
    """300 requests with 1 MB results, stdout unread for 3 s: the server stops reading its stdin (the
    client's writes block) and its memory stays bounded; then every answer arrives."""
    proc = await asyncio.create_subprocess_exec(
        str(CLI), "serve", FLOOD, "--stdio", cwd=ROOT, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, limit=4 * 1024 * 1024)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = orjson.dumps(call(0, "big", {"size": 1})) + b"\n"
        proc.stdin.write(hello)
        await proc.stdin.drain()
        assert orjson.loads(await asyncio.wait_for(proc.stdout.readline(), 20))["id"] == 0
        base = rss_kb(proc.pid)
        sent = 0

        async def writer() -> None:
            nonlocal sent
            assert proc.stdin is not None
            for i in range(1, 301):
                proc.stdin.write(orjson.dumps(call(i, "big", {"size": 1_000_000})) + b"\n" + b" " * 4000 + b"\n")
                await proc.stdin.drain()
                sent += 1

        w = asyncio.get_running_loop().create_task(writer())
        peak = 0
        for _ in range(30):  # 3 s without reading stdout
            await asyncio.sleep(0.1)
            peak = max(peak, rss_kb(proc.pid))
        assert not w.done(), "the server kept reading although nothing it wrote was read"
        assert sent < 300
        grown_mb = (peak - base) / 1024
        assert grown_mb < 120, f"server grew by {grown_mb:.0f} MB for a client that does not read"
        ids = set()
        deadline = time.monotonic() + 60
        while len(ids) < 300:
            assert time.monotonic() < deadline
            msg = orjson.loads(await asyncio.wait_for(proc.stdout.readline(), 30))
            assert len(msg["result"]["content"][0]["text"]) == 1_000_000
            ids.add(msg["id"])
        assert ids == set(range(1, 301))
        await asyncio.wait_for(w, 10)
        proc.stdin.close()
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.slow
def test_a_closed_stdout_stops_the_server_quietly() -> None:
    """The client closes its end of our stdout and keeps writing requests: the server cancels its work,
    exits promptly (status 0) and logs at most one line, not a traceback per request."""
    proc = subprocess.Popen([str(CLI), "serve", FLOOD, "--stdio"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(orjson.dumps(call(0, "big", {"size": 1})) + b"\n")
        proc.stdin.flush()
        assert orjson.loads(proc.stdout.readline())["id"] == 0
        proc.stdout.close()
        t0 = time.monotonic()
        burst = b"".join(orjson.dumps(call(i, "big", {"size": 100_000})) + b"\n" for i in range(1, 2001))
        try:
            for i in range(0, len(burst), 65536):
                proc.stdin.write(burst[i:i + 65536])
                proc.stdin.flush()
                if proc.poll() is not None:
                    break
        except BrokenPipeError:
            pass  # it stopped reading: fine
        code = proc.wait(10)
        took = time.monotonic() - t0
        err = proc.stderr.read().decode()
        assert code == 0, err
        assert took < 8, took
        assert "Traceback" not in err and "never retrieved" not in err, err[-3000:]
        assert err.count("stdout was closed") <= 1, err[-3000:]  # one warning if work was lost, else none
        assert len(err.splitlines()) < 10, err[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

