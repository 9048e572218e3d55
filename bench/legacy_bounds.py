"""What one hostile 2025 client costs the others: `python bench/legacy_bounds.py [--python PY]`.

Serves bench/legacy_bounds_app.py with `mcp-stateless serve --legacy-sse` (memory state, one process,
run by PY, default this interpreter; point PYTHONPATH at another checkout's src/ to measure it) and prints
one JSON object:

* `inflight`: one principal starts 200 sync calls of 2 s on one session and drops them; how long another
  principal's quick sync tool then takes, and how many of the 200 were refused (429).
* `sse_rss_mb`: the server's RSS before and after a 2024-11-05 client that never reads its stream is sent
  200 responses of 256 KiB.
* `subscribe_ms`: the latency of the first and last of 20 subscriptions of 256 KiB URIs on one session
  (and whether they were refused), then a ping of another session.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
V = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def _server(python: str) -> Iterator[tuple[str, int]]:
    port = _free_port()
    argv = [python, "-m", "mcp_stateless.cli", "serve", "bench/legacy_bounds_app.py:app", "--http",
            f"127.0.0.1:{port}", "--legacy-sse", "--state", "memory://", "--log-level", "error"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        for _ in range(300):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            time.sleep(0.1)
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return -1.0


def _open(url: str, user: str) -> dict[str, str]:
    r = httpx.post(url, headers={"accept": ACCEPT, "x-user": user}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
    return {"accept": ACCEPT, "x-user": user, "mcp-session-id": r.headers["mcp-session-id"],
            "mcp-protocol-version": V}


def _call(url: str, headers: dict[str, str], tool: str, id_: int, timeout: float = 30) -> int:
    try:
        return httpx.post(url, headers=headers, timeout=timeout, json={
            "jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": tool, "arguments": {}}}).status_code
    except httpx.TimeoutException:
        return 0  # dropped by us


def inflight(url: str) -> dict[str, Any]:
    mallory = _open(url, "mallory")
    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        statuses = list(pool.map(lambda i: _call(url, mallory, "hold", 100 + i, timeout=0.5), range(200)))
    alice = _open(url, "alice")
    started = time.monotonic()
    _call(url, alice, "quick", 1)
    return {"other_principal_quick_ms": round((time.monotonic() - started) * 1000, 1),
            "refused_429": statuses.count(429), "dropped_or_answered": len(statuses) - statuses.count(429)}


def sse_rss(url: str, pid: int) -> dict[str, Any]:
    before = _rss_mb(pid)
    port = int(url.split(":")[2].split("/")[0])
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        head = b""
        while b"data: /mcp?" not in head or not head.endswith(b"\n\n"):
            head += sock.recv(1)
        post = f"http://127.0.0.1:{port}" + head.split(b"data: ", 1)[1].split(b"\n", 1)[0].decode()
        httpx.post(post, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}}})
        closed_after = None
        for i in range(200):
            status = httpx.post(post, json={"jsonrpc": "2.0", "id": 1 + i, "method": "tools/call",
                                            "params": {"name": "big", "arguments": {}}}).status_code
            if status == 404 and closed_after is None:
                closed_after = i
        time.sleep(1.0)
        return {"before": before, "after": _rss_mb(pid), "stream_closed_after_calls": closed_after}
    finally:
        sock.close()


def subscribe(url: str) -> dict[str, Any]:
    s = _open(url, "sub")
    times, refused = [], 0
    with httpx.Client(timeout=60) as client:
        for i in range(20):
            started = time.monotonic()
            r = client.post(url, headers=s, json={"jsonrpc": "2.0", "id": i, "method": "resources/subscribe",
                                                  "params": {"uri": f"test://{i:03d}" + "u" * (256 * 1024)}})
            times.append((time.monotonic() - started) * 1000)
            refused += "error" in r.json()
        other = _open(url, "other")
        started = time.monotonic()
        client.post(url, headers=other, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        ping = (time.monotonic() - started) * 1000
    return {"first_ms": round(times[0], 1), "last_ms": round(times[-1], 1), "refused": refused,
            "other_ping_ms": round(ping, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    out: dict[str, Any] = {"src": os.environ.get("PYTHONPATH", "installed")}
    with _server(args.python) as (url, pid):
        out["subscribe_ms"] = subscribe(url)
        out["sse_rss_mb"] = sse_rss(url, pid)
        out["inflight"] = inflight(url)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
