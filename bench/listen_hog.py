"""One client holds many `subscriptions/listen` streams; meanwhile other clients' `tools/call`s: what each gets.

    python bench/listen_hog.py --port P [--streams 1000] [--calls 200]

The hog opens `--streams` connections from 127.0.0.1 (anonymous: one peer address), each a listen request, and
keeps every one open; the status of each answer is counted (200: an acknowledged stream; 429: refused past the
per-caller bound; 503: refused past the connection cap; "none": no answer within 10 s). Then `--calls`
`tools/call echo` requests, each on a fresh connection (another client), are timed while the streams stay
open. Prints one JSON object. Every wait is bounded; every connection is closed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from collections import Counter
from typing import Any

import wire


async def _status(reader: asyncio.StreamReader, timeout: float) -> str:
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    except (TimeoutError, ConnectionError):
        return "none"
    parts = line.split()
    return parts[1].decode() if len(parts) > 1 else "closed"


async def hog(port: int, n: int) -> tuple[Counter[str], list[asyncio.StreamWriter]]:
    request = wire.http_request(port, wire.body("", {"toolsListChanged": True}, rid=1,
                                                method="subscriptions/listen"),
                                method="subscriptions/listen", name=None)
    sem = asyncio.Semaphore(64)
    writers: list[asyncio.StreamWriter] = []
    statuses: Counter[str] = Counter()

    async def one() -> None:
        async with sem:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                statuses["refused-connect"] += 1
                return
            writers.append(writer)
            writer.write(request)
            statuses[await _status(reader, 10.0)] += 1

    await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n))), 300)
    return statuses, writers


async def calls(port: int, n: int) -> dict[str, Any]:
    request = wire.http_request(port, wire.body("echo", {"text": "hi"}, rid=2))
    took: list[float] = []
    statuses: Counter[str] = Counter()
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
        except (OSError, TimeoutError):
            statuses["refused-connect"] += 1
            continue
        writer.write(request)
        statuses[await _status(reader, 10.0)] += 1
        took.append((time.perf_counter() - t0) * 1000)
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    took.sort()
    return {"statuses": dict(statuses), "p50_ms": round(statistics.median(took), 2) if took else None,
            "p99_ms": round(took[max(0, int(len(took) * 0.99) - 1)], 2) if took else None}


async def main_async(port: int, streams: int, n_calls: int) -> dict[str, Any]:
    before = await calls(port, min(50, n_calls))
    held, writers = await hog(port, streams)
    during = await calls(port, n_calls)
    for w in writers:
        w.close()
    return {"streams_requested": streams, "stream_answers": dict(held), "calls_before": before,
            "calls_while_held": during}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--calls", type=int, default=200)
    a = p.parse_args()
    print(json.dumps(asyncio.run(main_async(a.port, a.streams, a.calls))))


if __name__ == "__main__":
    main()
