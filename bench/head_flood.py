"""One client sends a request head with a huge header value; meanwhile another client's calls: how long they wait.

    python bench/head_flood.py --port P [--mib 64] [--calls 100]

The flooding client writes `POST /mcp` with one `X-Big` header of `--mib` MiB (sent as fast as the socket takes
it, then the rest of a valid request) and reads the status it gets back. While it writes, another client sends
`tools/call echo` requests one after another, each on a fresh connection, and records each one's latency.
Prints one JSON object: the flood's status and time, and the other client's call count, max and p99 latency.
Every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from typing import Any

import wire


async def flood(port: int, mib: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    status = "none"
    try:
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Big: " % port)
        chunk = b"a" * (1 << 20)
        for _ in range(mib):
            writer.write(chunk)
            await writer.drain()
        request = wire.http_request(port, wire.body("echo", {"text": "hi"}))
        writer.write(b"\r\n" + request.split(b"\r\n", 1)[1])
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 30)
        status = line.split()[1].decode() if len(line.split()) > 1 else "closed"
    except (ConnectionError, TimeoutError):
        status = "closed" if status == "none" else status
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    return {"status": status, "seconds": round(time.perf_counter() - t0, 3)}


async def other_client(port: int, stop: asyncio.Event, most: int) -> list[float]:
    request = wire.http_request(port, wire.body("echo", {"text": "hi"}, rid=2))
    took: list[float] = []
    while not stop.is_set() and len(took) < most:
        t0 = time.perf_counter()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30)
            writer.write(request)
            await asyncio.wait_for(reader.readline(), 30)
            writer.close()
        except (OSError, TimeoutError):
            pass
        took.append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(0.02)
    return took


async def main_async(port: int, mib: int, calls: int) -> dict[str, Any]:
    stop = asyncio.Event()
    other = asyncio.create_task(other_client(port, stop, calls))
    await asyncio.sleep(0.2)
    result = await flood(port, mib)
    await asyncio.sleep(0.5)
    stop.set()
    took = sorted(await other)
    return {"flood": result, "other_calls": len(took), "other_max_ms": round(took[-1], 1) if took else None,
            "other_p99_ms": round(took[max(0, int(len(took) * 0.99) - 1)], 1) if took else None}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--calls", type=int, default=1000)
    a = p.parse_args()
    print(json.dumps(asyncio.run(main_async(a.port, a.mib, a.calls))))


if __name__ == "__main__":
    main()
