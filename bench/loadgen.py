"""A lean HTTP/1.1 keep-alive load generator: N connections, one request in flight on each, raw sockets.

    python bench/loadgen.py --port P --conns 16 --duration 5 --warmup 1 [--pid SERVER_PID] [--requests FILE]

Requests are complete raw HTTP/1.1 messages (built by `bench.wire`), sent round-robin. A response is
complete at Content-Length, or at the last chunk of a chunked body (SSE responses). Each response is
checked: status 200 and the expected marker in its body, else it counts as an error. With --pid the
server's CPU time (utime+stime from /proc/PID/stat, all threads) is read at the start and end of the
measured window. Prints one JSON object. Bounded: stops at --duration seconds or --max-requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from array import array
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    # after the ")" the fields start at state (field 3); utime=14, stime=15
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1])
    return 0


class Stats:
    def __init__(self) -> None:
        self.recording = False
        self.done = 0
        self.errors = 0
        self.lat = array("d")
        self.first_error: bytes | None = None
        self.stop = False
        self.reconnects = 0
        self.peer: tuple[str, int] = ("127.0.0.1", 0)


class Conn(asyncio.Protocol):
    __slots__ = ("buf", "expect", "gen", "i", "need", "reqs", "sent_at", "stats", "transport", "waiter")

    def __init__(self, reqs: list[bytes], offset: int, stats: Stats, expect: bytes, waiter: asyncio.Future[None]):
        self.reqs = reqs
        self.i = offset
        self.stats = stats
        self.expect = expect
        self.buf = bytearray()
        self.need = -1  # -1: headers not parsed; -2: chunked; >=0: total bytes needed
        self.waiter = waiter
        self.transport: asyncio.Transport | None = None
        self.sent_at = 0.0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.send()

    def send(self) -> None:
        reqs = self.reqs
        req = reqs[self.i % len(reqs)]
        self.i += 1
        self.sent_at = time.perf_counter()
        assert self.transport is not None
        self.transport.write(req)

    def data_received(self, data: bytes) -> None:
        # Fast path: the whole response in one read (the usual case for small JSON answers).
        if self.need == -1 and not self.buf:
            buf: bytes | bytearray = data
        else:
            self.buf += data
            buf = self.buf
        if self.need == -1:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if buf is data:
                    self.buf += data
                return
            head = buf[:end + 2]
            cl = head.find(b"\ncontent-length:")
            if cl < 0:
                head = bytes(head).lower()
                cl = head.find(b"\ncontent-length:")
            if cl >= 0:
                stop = head.find(b"\r\n", cl)
                self.need = end + 4 + int(head[cl + 16 : stop])
            elif b"transfer-encoding: chunked" in bytes(head).lower():
                self.need = -2
            else:
                self.need = 1 << 62  # read to close: not expected from any target
        if self.need == -2:
            if not buf.endswith(b"\r\n0\r\n\r\n"):
                if buf is data:
                    self.buf += data
                return
        elif len(buf) < self.need:
            if buf is data:
                self.buf += data
            return
        self.finish(buf)

    def finish(self, buf: bytes | bytearray) -> None:
        now = time.perf_counter()
        st = self.stats
        ok = buf.startswith(b"HTTP/1.1 200") and self.expect in buf
        if st.recording:
            st.done += 1
            st.lat.append(now - self.sent_at)
            if not ok:
                st.errors += 1
        if not ok and st.first_error is None:
            st.first_error = bytes(buf[:600])
        if self.buf:
            self.buf = bytearray()
        self.need = -1
        if st.stop:
            if not self.waiter.done():
                self.waiter.set_result(None)
            return
        self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        st = self.stats
        if st.stop:
            if not self.waiter.done():
                self.waiter.set_result(None)
            return
        if exc is None and not self.buf and self.need == -1 and st.reconnects < 100_000:
            # A clean close between responses (e.g. nginx's keepalive_requests limit, or
            # "Connection: close"): the call in flight was re-sent on a fresh connection.
            st.reconnects += 1
            asyncio.get_running_loop().create_task(self._reconnect())
            return
        st.errors += 1
        st.first_error = st.first_error or f"connection lost: {exc}".encode()
        if not self.waiter.done():
            self.waiter.set_result(None)

    async def _reconnect(self) -> None:
        peer = self.stats.peer
        try:
            await asyncio.get_running_loop().create_connection(
                lambda: Conn(self.reqs, self.i, self.stats, self.expect, self.waiter), *peer)
        except OSError as e:
            self.stats.errors += 1
            self.stats.first_error = self.stats.first_error or f"reconnect failed: {e}".encode()
            if not self.waiter.done():
                self.waiter.set_result(None)


def percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, round(q * (len(sorted_vals) - 1))))
    return sorted_vals[k]


async def run(host: str, port: int, reqs: list[bytes], conns: int, duration: float, warmup: float,
              max_requests: int, expect: bytes, pid: int | None,
              extra_pids: list[int] | None = None) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    stats = Stats()
    stats.peer = (host, port)
    waiters: list[asyncio.Future[None]] = []
    transports = []
    for c in range(conns):
        w: asyncio.Future[None] = loop.create_future()
        waiters.append(w)
        tr, _ = await loop.create_connection(
            lambda c=c, w=w: Conn(reqs, c * 7919, stats, expect, w), host, port)  # type: ignore[misc]
        transports.append(tr)
    await asyncio.sleep(warmup)
    cpu0 = cpu_seconds(pid) if pid else 0.0
    extra0 = [cpu_seconds(x) for x in extra_pids or ()]
    t0 = time.perf_counter()
    stats.recording = True
    deadline = t0 + duration
    while time.perf_counter() < deadline and stats.done < max_requests:
        await asyncio.sleep(min(0.05, max(0.0, deadline - time.perf_counter())))
    stats.recording = False
    elapsed = time.perf_counter() - t0
    cpu1 = cpu_seconds(pid) if pid else 0.0
    extra1 = [cpu_seconds(x) for x in extra_pids or ()]
    done = stats.done
    stats.stop = True
    await asyncio.wait(waiters, timeout=5)
    for tr in transports:
        tr.close()
    lat = sorted(stats.lat)
    out: dict[str, Any] = {
        "requests": done,
        "errors": stats.errors,
        "seconds": elapsed,
        "rps": done / elapsed if elapsed else 0.0,
        "p50_ms": percentile(lat, 0.50) * 1e3,
        "p99_ms": percentile(lat, 0.99) * 1e3,
        "reconnects": stats.reconnects,
    }
    if pid:
        out["server_cpu_s"] = cpu1 - cpu0
        out["cpu_us_per_call"] = (cpu1 - cpu0) / done * 1e6 if done else float("nan")
        out["rss_kb"] = rss_kb(pid)
    if extra_pids:
        # Processes behind the server (a bridge's upstream): their CPU per call in the same window.
        out["extra_cpu_us_per_call"] = {str(x): (b - a) / done * 1e6 if done else float("nan")
                                        for x, a, b in zip(extra_pids, extra0, extra1, strict=True)}
    if stats.first_error is not None:
        out["first_error"] = stats.first_error.decode("latin-1")
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--requests", required=True, help="file of raw requests, each prefixed by its 8-digit length")
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--max-requests", type=int, default=10**9)
    p.add_argument("--expect", default='"hi"')
    p.add_argument("--pid", type=int)
    p.add_argument("--extra-pid", type=int, action="append", default=[],
                   help="another process whose CPU per call to report too (repeatable)")
    a = p.parse_args()
    reqs = read_requests(a.requests)
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    res = runner(run(a.host, a.port, reqs, a.conns, a.duration, a.warmup, a.max_requests,
                     a.expect.encode(), a.pid, a.extra_pid))
    json.dump(res, sys.stdout)
    sys.stdout.write("\n")


def write_requests(path: str, reqs: list[bytes]) -> None:
    with open(path, "wb") as f:
        for r in reqs:
            f.write(b"%08d" % len(r))
            f.write(r)


def read_requests(path: str) -> list[bytes]:
    out = []
    with open(path, "rb") as f:
        data = f.read()
    i = 0
    while i < len(data):
        n = int(data[i : i + 8])
        out.append(data[i + 8 : i + 8 + n])
        i += 8 + n
    return out


if __name__ == "__main__":
    main()
