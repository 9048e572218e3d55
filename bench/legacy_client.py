"""2025-era session traffic against one server: `python bench/legacy_client.py --port P [--pid SERVER_PID]`.

Mode `traffic` (default): N connections, each runs sessions back to back, one request in flight per
connection: `initialize` (2025-11-25), `notifications/initialized`, `tools/list`, `tools/call echo`,
`DELETE`, every request after the first carrying the session id and `MCP-Protocol-Version`, with
`Accept: application/json, text/event-stream` as real clients send. Every answer is checked (status,
the session id, the echoed text); a session counts when all five exchanges succeeded.

Mode `idle`: opens `--sessions` sessions (initialize + initialized, then left alone) and reports the
server's RSS before and after, i.e. the memory an idle session costs (measured by RSS delta / N).

Prints one JSON object. Bounded: stops at --duration seconds; every read has a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from loadgen import cpu_seconds, percentile, rss_kb

VERSION = "2025-11-25"
READ_TIMEOUT_S = 30.0


def _request(port: int, method: str, body: bytes | None, session: str | None) -> bytes:
    lines = [f"{method} /mcp HTTP/1.1", f"Host: 127.0.0.1:{port}", "Accept: application/json, text/event-stream"]
    if session is not None:
        lines += [f"Mcp-Session-Id: {session}", f"MCP-Protocol-Version: {VERSION}"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def _rpc(rid: int | None, method: str, params: dict[str, Any]) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if rid is not None:
        msg["id"] = rid
    return json.dumps(msg, separators=(",", ":")).encode()


INITIALIZE = _rpc(1, "initialize", {"protocolVersion": VERSION, "capabilities": {},
                                    "clientInfo": {"name": "bench-legacy", "version": "1.0.0"}})
INITIALIZED = _rpc(None, "notifications/initialized", {})
LIST = _rpc(2, "tools/list", {})
CALL = _rpc(3, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})


async def _response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        n = int(headers["content-length"])
        body = await asyncio.wait_for(reader.readexactly(n), READ_TIMEOUT_S) if n else b""
    elif headers.get("transfer-encoding") == "chunked":
        parts = []
        while True:
            size = int((await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)).strip(), 16)
            chunk = await asyncio.wait_for(reader.readexactly(size + 2), READ_TIMEOUT_S)
            if size == 0:
                break
            parts.append(chunk[:-2])
        body = b"".join(parts)
    else:
        body = b""
    return status, headers, body


class Failure(Exception):
    pass


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes,
                    want: int, marker: bytes | None = None) -> tuple[dict[str, str], bytes]:
    writer.write(raw)
    status, headers, body = await _response(reader)
    if status != want or (marker is not None and marker not in body):
        raise Failure(f"HTTP {status} (wanted {want}): {body[:300]!r}")
    return headers, body


async def _open_session(port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
    headers, _ = await _exchange(reader, writer, _request(port, "POST", INITIALIZE, None), 200, b'"protocolVersion"')
    sid = headers.get("mcp-session-id")
    if not sid:
        raise Failure("initialize answered without Mcp-Session-Id")
    await _exchange(reader, writer, _request(port, "POST", INITIALIZED, sid), 202)
    return sid


class Stats:
    def __init__(self) -> None:
        self.recording = False
        self.sessions = 0
        self.requests = 0
        self.errors = 0
        self.first_error = ""
        self.lat: list[float] = []
        self.stop = False


async def _worker(port: int, st: Stats) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while not st.stop:
            t0 = time.perf_counter()
            try:
                sid = await _open_session(port, reader, writer)
                await _exchange(reader, writer, _request(port, "POST", LIST, sid), 200, b'"echo"')
                await _exchange(reader, writer, _request(port, "POST", CALL, sid), 200, b'"hi"')
                await _exchange(reader, writer, _request(port, "DELETE", None, sid), 200)
            except (TimeoutError, Failure, OSError, asyncio.IncompleteReadError, ValueError) as e:
                if st.recording:
                    st.errors += 1
                st.first_error = st.first_error or f"{type(e).__name__}: {e}"
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                continue
            if st.recording:
                st.sessions += 1
                st.requests += 5
                st.lat.append(time.perf_counter() - t0)
    finally:
        writer.close()


async def traffic(port: int, conns: int, duration: float, warmup: float, pid: int | None) -> dict[str, Any]:
    st = Stats()
    workers = [asyncio.ensure_future(_worker(port, st)) for _ in range(conns)]
    await asyncio.sleep(warmup)
    cpu0 = cpu_seconds(pid) if pid else 0.0
    t0 = time.perf_counter()
    st.recording = True
    await asyncio.sleep(duration)
    st.recording = False
    elapsed = time.perf_counter() - t0
    cpu1 = cpu_seconds(pid) if pid else 0.0
    st.stop = True
    await asyncio.wait(workers, timeout=READ_TIMEOUT_S + 5)
    for w in workers:
        w.cancel()
    lat = sorted(st.lat)
    out: dict[str, Any] = {
        "sessions": st.sessions, "requests": st.requests, "errors": st.errors, "seconds": elapsed,
        "sessions_per_s": st.sessions / elapsed, "rps": st.requests / elapsed,
        "session_p50_ms": percentile(lat, 0.5) * 1e3, "session_p99_ms": percentile(lat, 0.99) * 1e3,
    }
    if pid:
        out["cpu_us_per_request"] = (cpu1 - cpu0) / st.requests * 1e6 if st.requests else float("nan")
        out["rss_kb"] = rss_kb(pid)
    if st.first_error:
        out["first_error"] = st.first_error[:500]
    return out


async def idle(port: int, sessions: int, conns: int, pid: int) -> dict[str, Any]:
    """Open `sessions` sessions over `conns` connections and leave them; the server's RSS per session."""
    # One session first, so that whatever a first session initialises lazily is not counted per session.
    r, w = await asyncio.open_connection("127.0.0.1", port)
    await _open_session(port, r, w)
    w.close()
    await asyncio.sleep(1.0)
    before = rss_kb(pid)
    per = -(-sessions // conns)
    opened = 0

    async def open_some(n: int) -> None:
        nonlocal opened
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for _ in range(n):
                await _open_session(port, reader, writer)
                opened += 1
        finally:
            writer.close()

    await asyncio.gather(*(open_some(min(per, sessions - i * per)) for i in range(conns) if sessions - i * per > 0))
    await asyncio.sleep(2.0)  # let the server settle (freed request buffers, finished tasks)
    after = rss_kb(pid)
    return {"sessions": opened, "rss_before_kb": before, "rss_after_kb": after,
            "kb_per_session": (after - before) / opened if opened else float("nan")}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int)
    p.add_argument("--mode", choices=("traffic", "idle"), default="traffic")
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--sessions", type=int, default=2000)
    a = p.parse_args()
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    if a.mode == "idle":
        if not a.pid:
            p.error("--mode idle needs --pid")
        res = runner(idle(a.port, a.sessions, a.conns, a.pid))
    else:
        res = runner(traffic(a.port, a.conns, a.duration, a.warmup, a.pid))
    json.dump(res, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
