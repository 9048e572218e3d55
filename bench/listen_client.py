"""Many idle `subscriptions/listen` streams on one server, then the fan-out time of one change event.

    python bench/listen_client.py --port P --streams 10000 --pid SERVER_PID [--idle 5]

Opens the streams (bounded concurrency), waits for every acknowledgement, lets them sit idle for
--idle seconds while reading the server's CPU time and RSS, then calls the `touch` tool (which
publishes tools/list_changed) and records when the notification has reached every stream.
Prints one JSON object. Every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from typing import Any

import wire
from loadgen import cpu_seconds, rss_kb


class Stream(asyncio.Protocol):
    __slots__ = ("acked", "buf", "changed", "state", "transport")

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state
        self.buf = b""
        self.acked = False
        self.changed = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.write(self.state["request"])

    def data_received(self, data: bytes) -> None:
        st = self.state
        self.buf += data
        if not self.acked and b"notifications/subscriptions/acknowledged" in self.buf:
            self.acked = True
            st["acked"] += 1
            if st["acked"] >= st["want"]:
                st["all_acked"].set()
            self.buf = b""
        if self.acked and not self.changed and b"notifications/tools/list_changed" in self.buf:
            self.changed = True
            st["changed"] += 1
            st["last_change"] = time.perf_counter()
            if st["changed"] >= st["want"]:
                st["all_changed"].set()
            self.buf = b""
        if len(self.buf) > 65536:
            self.buf = self.buf[-4096:]

    def connection_lost(self, exc: Exception | None) -> None:
        self.state["lost"] += 1


async def main_async(port: int, n: int, pid: int, idle: float, concurrency: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    payload = wire.body("", {"toolsListChanged": True}, rid=1, method="subscriptions/listen")
    state: dict[str, Any] = {
        "request": wire.http_request(port, payload, method="subscriptions/listen", name=None),
        "acked": 0, "changed": 0, "lost": 0, "want": n, "last_change": 0.0,
        "all_acked": asyncio.Event(), "all_changed": asyncio.Event(),
    }
    rss0 = rss_kb(pid)
    streams: list[Stream] = []
    sem = asyncio.Semaphore(concurrency)
    t_open = time.perf_counter()

    async def open_one() -> None:
        async with sem:
            for _attempt in range(5):
                try:
                    _tr, proto = await loop.create_connection(lambda: Stream(state), "127.0.0.1", port)
                    streams.append(proto)
                    return
                except OSError:
                    await asyncio.sleep(0.1)

    await asyncio.wait_for(asyncio.gather(*(open_one() for _ in range(n))), 240)
    opened = len(streams)
    state["want"] = opened
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(state["all_acked"].wait(), 120)
    open_s = time.perf_counter() - t_open
    await asyncio.sleep(1.0)
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    await asyncio.sleep(idle)
    cpu1, t1 = cpu_seconds(pid), time.perf_counter()
    rss = rss_kb(pid)

    # one change event: tools/call touch on its own connection
    call = wire.http_request(port, wire.body("touch", {}, rid=2), name="touch")
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    t_fire = time.perf_counter()
    writer.write(call)
    await writer.drain()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(state["all_changed"].wait(), 30)
    fanout = (state["last_change"] or time.perf_counter()) - t_fire
    writer.close()
    for s in streams:
        if s.transport is not None:
            s.transport.close()
    return {
        "requested": n, "opened": opened, "acked": state["acked"], "open_s": open_s,
        "rss_before_kb": rss0, "rss_kb": rss, "rss_per_stream_kb": (rss - rss0) / max(1, opened),
        "idle_cpu_pct": (cpu1 - cpu0) / (t1 - t0) * 100, "fanout_s": fanout, "delivered": state["changed"],
        "lost_before_close": state["lost"],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--streams", type=int, default=10_000)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--idle", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=256)
    a = p.parse_args()
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        import uvloop

        res = uvloop.run(main_async(a.port, a.streams, a.pid, a.idle, a.concurrency))
    except ImportError:
        res = asyncio.run(main_async(a.port, a.streams, a.pid, a.idle, a.concurrency))
    json.dump(res, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
