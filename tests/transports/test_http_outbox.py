"""The per-request notification outbox is bounded: a progress flood and a log flood to an HTTP client that
does not read keep the real server's memory flat (progress coalesces; logs beyond the bound are dropped,
counted and reported), and the answer still arrives. Real `mcp-stateless serve`, raw loopback sockets."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import orjson
import pytest

from cli.test_serve import PV, body, http_server
from transports.test_stdio_limits import rss_kb

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

FLOOD = "tests/transports/apps/flood_app.py:app"


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, int]]:
    with http_server(app=FLOOD) as (url, proc):
        yield int(url.split(":")[2].split("/")[0]), proc.pid


def flood(port: int, pid: int, tool: str, meta: dict[str, object], seconds: float) -> tuple[float, bytes]:
    """Call `tool` for `seconds`, reading nothing while it runs; (MB the server grew, what then arrives)."""
    msg = body(1, "tools/call", {"name": tool, "arguments": {"seconds": seconds, "size": 2000}})
    msg["params"]["_meta"].update(meta)
    data = orjson.dumps(msg)
    head = (f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            f"accept: application/json, text/event-stream\r\nmcp-protocol-version: {PV}\r\n"
            f"mcp-method: tools/call\r\nmcp-name: {tool}\r\ncontent-length: {len(data)}\r\n"
            "connection: close\r\n\r\n").encode()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    s.settimeout(30)
    try:
        s.connect(("127.0.0.1", port))
        base = rss_kb(pid)
        s.sendall(head + data)
        peak = base
        end = time.monotonic() + seconds + 1
        while time.monotonic() < end:  # the handler floods while nobody reads
            time.sleep(0.1)
            peak = max(peak, rss_kb(pid))
        got = b""
        while chunk := s.recv(1 << 20):
            got += chunk
    finally:
        s.close()
    return (peak - base) / 1024, got


def dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2:]
    return out


def events(raw: bytes) -> list[dict[str, object]]:
    head, _, stream = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    stream = dechunk(stream)
    out = []
    for line in stream.split(b"\n"):
        if line.startswith(b"data: "):
            out.append(orjson.loads(line[6:]))
    return out


def test_a_progress_flood_to_a_client_that_does_not_read_stays_flat(server: tuple[int, int]) -> None:
    port, pid = server
    grown, raw = flood(port, pid, "progress_flood", {"progressToken": "p"}, 4)
    assert grown < 40, f"server grew by {grown:.0f} MB"
    got = events(raw)
    final = got[-1]
    assert final["id"] == 1 and str(final["result"]["content"][0]["text"]).startswith("reported ")  # type: ignore[index]
    progress = [e["params"]["progress"] for e in got[:-1]]  # type: ignore[index]
    assert progress and progress == sorted(progress) and len(set(progress)) == len(progress)
    reported = int(str(final["result"]["content"][0]["text"]).split()[1])  # type: ignore[index]
    assert len(progress) < reported  # coalesced: fewer were written than reported


def test_a_log_flood_to_a_client_that_does_not_read_stays_flat(server: tuple[int, int]) -> None:
    port, pid = server
    grown, raw = flood(port, pid, "log_flood", {"io.modelcontextprotocol/logLevel": "info"}, 4)
    assert grown < 40, f"server grew by {grown:.0f} MB"
    got = events(raw)
    assert got[-1]["id"] == 1 and "result" in got[-1]
    notices = [e for e in got if e.get("method") == "notifications/message"
               and "log messages dropped" in str(e["params"]["data"])]  # type: ignore[index]
    assert notices, "dropped logs must be reported"
    assert all(n["params"]["level"] == "warning" for n in notices)  # type: ignore[index]
