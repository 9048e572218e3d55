"""stdio throughput: spawn a server, keep N requests in flight, count answered calls per second.

    python bench/stdio_client.py --inflight 16 --duration 5 --warmup 1 -- CMD ARGS...

Each request is a 2026-07-28 tools/call of echo (no initialize: every request carries its _meta).
Bounded by --duration and --max-requests; the server is stopped (stdin closed, then SIGTERM/SIGKILL
by pid). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any

from loadgen import cpu_seconds, rss_kb

_HEAD = b'{"jsonrpc":"2.0","id":'
_TAIL = json.dumps({
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1.0.0"}}},
}, separators=(",", ":")).encode()[1:] + b"\n"


def request_line(i: int) -> bytes:
    """The echo call with id `i` (ids cycle; only the 16 in flight must differ)."""
    return _HEAD + str(i % 1_000_000).encode() + b"," + _TAIL


async def run(cmd: list[str], inflight: int, duration: float, warmup: float, max_requests: int) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        limit=1 << 24)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        # one request first: the server is up once it answers
        proc.stdin.write(request_line(0))
        first = await asyncio.wait_for(proc.stdout.readline(), 30)
        if b'"hi"' not in first:
            return {"error": f"unexpected first answer: {first[:300]!r}"}
        next_id = 1
        for _ in range(inflight):
            proc.stdin.write(request_line(next_id))
            next_id += 1
        done = errors = 0
        recording = False
        t_warm = time.perf_counter() + warmup
        t0 = cpu0 = 0.0
        deadline = t_warm + duration
        tail = b""
        while True:
            chunk = await asyncio.wait_for(proc.stdout.read(1 << 16), 10)
            if not chunk:
                return {"error": "server closed stdout"}
            data = tail + chunk
            n = data.count(b"\n")
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            now = time.perf_counter()
            if recording:
                done += n
                errors += data.count(b'"error":{', 0, cut)
            elif now >= t_warm:
                recording, t0, cpu0 = True, now, cpu_seconds(proc.pid)
            if recording and (now >= deadline or done >= max_requests):
                break
            proc.stdin.write(b"".join(request_line(next_id + k) for k in range(n)))
            next_id += n
            await proc.stdin.drain()
        elapsed = time.perf_counter() - t0
        cpu = cpu_seconds(proc.pid) - cpu0
        return {"requests": done, "errors": errors, "seconds": elapsed, "rps": done / elapsed,
                "cpu_us_per_call": cpu / done * 1e6, "rss_kb": rss_kb(proc.pid)}
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 3)
        except TimeoutError:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 3)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--inflight", type=int, default=16)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--max-requests", type=int, default=10**9)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    res = asyncio.run(run(cmd, a.inflight, a.duration, a.warmup, a.max_requests))
    json.dump(res, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
