"""In-process cost of our HTTP hot path, without a socket or uvicorn: `python bench/hotpath.py [--profile]`.

Drives `HttpTransport` directly with ASGI receive/send callables, 16 requests concurrently on one
loop, and prints µs per request (and with --profile the top of a cProfile run). Compare with the bare
ASGI app (`--target bare`), which parses the body and answers a fixed result.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import targets
import wire


def scope_and_body(progress: bool) -> tuple[dict[str, Any], bytes]:
    raw = wire.echo_requests(8000, progress=progress)[0]
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    headers = []
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        headers.append((k.strip().lower(), v.strip()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
             "headers": headers, "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5555)}
    return scope, body


async def drive(app: Any, n: int, conc: int, progress: bool) -> float:
    scope, body = scope_and_body(progress)
    sent = 0

    async def one() -> None:
        nonlocal sent
        done = asyncio.Event()
        msgs = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            if msgs:
                return msgs.pop()
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal sent
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                sent += 1

        await app(dict(scope), receive, send)
        done.set()

    async def worker(k: int) -> None:
        for _ in range(k):
            await one()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(n // conc) for _ in range(conc)))
    dt = time.perf_counter() - t0
    assert sent == (n // conc) * conc, sent
    return dt / sent * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--target", default="ours", choices=("ours", "ours_legacy", "ours_sync", "bare"))
    p.add_argument("-n", type=int, default=40_000)
    p.add_argument("--conc", type=int, default=16)
    p.add_argument("--sse", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--uvloop", action="store_true")
    a = p.parse_args()
    app = targets.asgi_app(a.target)
    run: Any = asyncio.run
    if a.uvloop:
        import uvloop

        run = uvloop.run
    run(drive(app, 2000, a.conc, a.sse))  # warm up
    if a.profile:
        prof = cProfile.Profile()
        prof.enable()
        us = run(drive(app, a.n, a.conc, a.sse))
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    else:
        us = min(run(drive(app, a.n, a.conc, a.sse)) for _ in range(3))
    print(f"{a.target}{' sse' if a.sse else ''}: {us:.1f} µs/request in process")


if __name__ == "__main__":
    main()
