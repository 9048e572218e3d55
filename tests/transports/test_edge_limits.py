"""The edge limits of `mcp-stateless serve --http` (and the head and body budgets of `mcp-stateless bridge
--http`, wired from its own flags) for real: the real CLI subprocess, raw loopback sockets,
slow and idle clients, exact statuses and JSON-RPC codes, and a legitimate request served while attackers
hold connections. Every loop here is bounded in count and time."""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from cli.test_serve import PV, ROOT, body, http_server, post
from services import need, unavailable

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

# Three distinct budgets, far enough apart that a cut-off by the wrong one falls outside every window below.
IDLE, HEAD, BODY = 1.0, 1.5, 4.0
FAST = ("--idle-timeout", str(IDLE), "--header-timeout", str(HEAD), "--body-timeout", str(BODY),
        "--max-connections", "40")


def port_of(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


def request_bytes(port: int, msg: dict[str, Any] | None = None, *, length: int | None = None) -> tuple[bytes, bytes]:
    """(head, body) of a valid MCP POST; `length` overrides Content-Length."""
    msg = msg or body(1, "server/discover")
    data = orjson.dumps(msg)
    head = (f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            f"accept: application/json, text/event-stream\r\nmcp-protocol-version: {PV}\r\n"
            f"mcp-method: {msg['method']}\r\ncontent-length: {length if length is not None else len(data)}\r\n\r\n")
    return head.encode(), data


def read_until_closed(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took (bounded)."""
    start = time.monotonic()
    sock.settimeout(limit)
    got = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            got += chunk
    return got, time.monotonic() - start


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def assert_408(reply: bytes, what: str) -> None:
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), reply[:200]
    assert b"connection: close" in head.lower()
    err = orjson.loads(payload)["error"]
    assert err["code"] == -32600 and what in err["message"], err


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with http_server(*FAST) as (url, _proc):
        yield url


TIME_PYTHON = ROOT / ".cache" / "venv-mcp-server-time-2025.9.25" / "bin" / "python"


@pytest.fixture(scope="module")
def bridged() -> Iterator[str]:
    """`mcp-stateless bridge` in front of the published mcp-server-time, with the same three budgets: the
    bridge builds its edge limits from its own flags, so their wiring is tested apart from serve's."""
    need(TIME_PYTHON, "mcp-server-time 2025.9.25 (scripts/setup.sh)")
    upstream = f"{TIME_PYTHON} -m mcp_server_time --local-timezone UTC"
    with http_server(*FAST, command=["bridge", "--upstream", upstream]) as (url, _proc):
        yield url


@pytest.fixture(params=["serve", "bridge"])
def edge(request: pytest.FixtureRequest) -> str:
    """The head and body budgets on both commands that serve HTTP."""
    url: str = request.getfixturevalue("server" if request.param == "serve" else "bridged")
    return url


def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(server: str) -> None:
    with connect(port_of(server)) as s:
        got, took = read_until_closed(s, 10)
    assert got == b"" and IDLE * 0.8 <= took < IDLE + 2.5, took


def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(server: str) -> None:
    port = port_of(server)
    with connect(port) as s:
        head, data = request_bytes(port)
        s.sendall(head + data)
        s.settimeout(5)
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")
        _got, took = read_until_closed(s, 10)
    assert IDLE * 0.8 <= took < IDLE + 2.5, took


def test_a_head_sent_at_one_byte_per_tick_is_cut_off_with_408(edge: str) -> None:
    port = port_of(edge)
    head, _ = request_bytes(port)
    start = time.monotonic()
    with connect(port) as s:
        sent = 0
        with contextlib.suppress(OSError):  # the server may close while we still trickle
            for byte in head[:60]:  # 60 ticks of 0.1 s: longer than the head budget and the body budget
                s.sendall(bytes([byte]))
                sent += 1
                time.sleep(0.1)
        got, _ = read_until_closed(s, 10)
    took = time.monotonic() - start
    assert sent < 60
    assert_408(got, "Request head not received within 1.5 s")
    assert HEAD * 0.8 <= took < BODY * 0.75, took


def test_a_body_sent_at_one_byte_per_tick_is_cut_off_with_408(edge: str) -> None:
    port = port_of(edge)
    head, data = request_bytes(port)
    start = time.monotonic()
    with connect(port) as s:
        s.sendall(head)
        assert len(data) > 60
        with contextlib.suppress(OSError):
            for byte in data[:60]:  # 6 s of trickle: past the body budget, and past the head budget too
                s.sendall(bytes([byte]))
                time.sleep(0.1)
        got, _ = read_until_closed(s, 10)
    took = time.monotonic() - start
    assert_408(got, "Request body not received within 4 s")
    assert BODY * 0.8 <= took < BODY + 1.9, took


def test_a_body_shorter_than_its_content_length_is_answered_within_the_body_timeout(edge: str) -> None:
    port = port_of(edge)
    head, data = request_bytes(port, length=10_000)
    with connect(port) as s:
        s.sendall(head + data)  # far fewer than 10,000 bytes, then silence
        got, took = read_until_closed(s, 10)
    assert_408(got, "Request body not received within 4 s")
    assert BODY * 0.8 <= took < BODY + 2.5, took


def test_fast_requests_on_the_same_server_are_untouched(server: str) -> None:
    for i in range(20):
        r = post(server, body(i, "tools/call", {"name": "echo", "arguments": {"text": f"t{i}"}}))
        assert r.status_code == 200 and r.json()["result"]["content"] == [{"type": "text", "text": f"t{i}"}]


def test_at_the_cap_idle_connections_make_room_for_a_real_request(server: str) -> None:
    port = port_of(server)
    idle = [connect(port) for _ in range(120)]  # three times the cap of 40, all idle
    try:
        time.sleep(0.2)
        r = post(server, body(7, "server/discover"))
        assert r.status_code == 200 and r.json()["id"] == 7
        # the cap held: most idle sockets were closed by the server (recv sees EOF at once)
        closed = 0
        for s in idle:
            s.settimeout(0.05)
            with contextlib.suppress(TimeoutError, OSError):
                if s.recv(1) == b"":
                    closed += 1
        assert closed >= 120 - 40, closed
    finally:
        for s in idle:
            s.close()


def test_at_the_cap_with_every_connection_busy_a_newcomer_gets_503(server: str) -> None:
    port = port_of(server)
    head, _ = request_bytes(port, length=100)
    busy = []
    try:
        for _ in range(40):  # fill the cap with connections in the middle of a body (not evictable)
            s = connect(port)
            s.sendall(head + b"{")
            busy.append(s)
        time.sleep(0.3)
        with connect(port) as s:
            got, took = read_until_closed(s, 5)
        status, _, rest = got.partition(b"\r\n")
        assert status == b"HTTP/1.1 503 Service Unavailable", got[:200]
        assert orjson.loads(rest.partition(b"\r\n\r\n")[2])["error"]["code"] == -32600
        assert took < 1.0
    finally:
        for s in busy:
            s.close()
    # the busy ones time out and the server is usable again
    time.sleep(BODY + 0.5)
    assert post(server, body(8, "server/discover")).status_code == 200


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_under_a_low_open_file_limit_many_idle_connections_do_not_lock_out_a_real_client() -> None:
    """ulimit -n 256 and the default cap: the cap is lowered to fit, so 400 idle connections (with a
    long idle timeout, so only the cap can help) still leave room for a real request."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 600 <= hard or hard == resource.RLIM_INFINITY:
        # The soft limit is the shell's default, not a wall: raise it for this process.
        resource.setrlimit(resource.RLIMIT_NOFILE, (600 if hard == resource.RLIM_INFINITY else min(hard, 4096), hard))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 600:
        unavailable(f"this test process needs 600 descriptors (ulimit -n {soft}, hard {hard})")
    with http_server("--idle-timeout", "60", preexec_fn=_low_fd_limit) as (url, proc):
        port = port_of(url)
        idle = []
        try:
            for _ in range(400):
                idle.append(connect(port))
            time.sleep(0.3)
            for i in range(3):
                r = post(url, body(i, "server/discover"))
                assert r.status_code == 200, r.text
        finally:
            for s in idle:
                s.close()
        assert proc.poll() is None


# -- the request head's size (431, as nginx and h11 refuse an oversized head) ------------------------------

def assert_431(reply: bytes, what: str) -> None:
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), reply[:200]
    assert b"connection: close" in head.lower()
    err = orjson.loads(payload)["error"]
    assert err == {"code": -32600, "message": what}, err


def send_quietly(sock: socket.socket, data: bytes, chunk: int = 65536) -> int:
    """Send `data` in chunks until the server closes on us; how many bytes went out."""
    sent = 0
    with contextlib.suppress(OSError):
        for i in range(0, len(data), chunk):
            sock.sendall(data[i:i + chunk])
            sent += chunk
    return sent


def test_a_two_mebibyte_header_value_is_refused_with_431_and_the_server_keeps_serving(server: str) -> None:
    port = port_of(server)
    head, data = request_bytes(port)
    huge = head.replace(b"\r\n\r\n", b"\r\nx-big: " + b"a" * (2 << 20) + b"\r\n\r\n")
    start = time.monotonic()
    with connect(port) as s:
        send_quietly(s, huge + data)
        got, _ = read_until_closed(s, 10)
    assert_431(got, "Request head larger than 65536 bytes")
    assert time.monotonic() - start < 2.0
    assert post(server, body(9, "server/discover")).json()["id"] == 9


def test_two_hundred_thousand_header_lines_are_refused_with_431(server: str) -> None:
    port = port_of(server)
    head, data = request_bytes(port)
    many = head.replace(b"\r\n\r\n", b"\r\n" + b"x: y\r\n" * 200_000 + b"\r\n")
    with connect(port) as s:
        send_quietly(s, many + data)
        got, _ = read_until_closed(s, 10)
    assert_431(got, "More than 100 request header fields")


def test_a_hundred_and_one_small_header_fields_are_refused_a_hundred_are_served(server: str) -> None:
    port = port_of(server)
    head, data = request_bytes(port)
    base = head.count(b"\r\n") - 2  # the request's own header fields
    for extra, refused in ((100 - base, False), (101 - base, True)):
        fields = b"".join(b"x-%d: y\r\n" % i for i in range(extra))
        with connect(port) as s:
            s.sendall(head.replace(b"\r\n\r\n", b"\r\n" + fields + b"\r\n") + data)
            s.settimeout(5)
            got = s.recv(65536)
        if refused:
            assert_431(got, "More than 100 request header fields")
        else:
            assert got.startswith(b"HTTP/1.1 200 "), got[:200]


def test_a_head_just_under_the_cap_and_a_large_body_in_the_same_read_are_served(server: str) -> None:
    """The cap counts the head only: a body that arrives in the same read is not part of it."""
    port = port_of(server)
    msg = body(3, "tools/call", {"name": "echo", "arguments": {"text": "b" * 150_000}})
    head, data = request_bytes(port, msg)
    head = head.replace(b"\r\n\r\n", b"\r\nmcp-name: echo\r\n\r\n")
    pad = 65536 - len(head) - len(b"x-pad: \r\n")
    head = head.replace(b"\r\n\r\n", b"\r\nx-pad: " + b"p" * pad + b"\r\n\r\n")
    assert len(head) == 65536
    with connect(port) as s:
        s.sendall(head + data)
        s.settimeout(5)
        got = s.recv(65536)
        got += s.recv(65536)
    assert got.startswith(b"HTTP/1.1 200 "), got[:400]


def test_other_clients_stay_responsive_while_a_huge_head_arrives(server: str) -> None:
    """A 64 MiB header value took the loop for seconds (quadratic joins in the parser); now it is cut off
    at the cap and a concurrent client's requests stay fast."""
    import threading
    port = port_of(server)
    head, _ = request_bytes(port)
    results: list[bytes] = []

    def attack() -> None:
        with connect(port) as s:
            s.sendall(head[:-2])
            send_quietly(s, b"x-big: " + b"a" * (64 << 20), chunk=1 << 20)
            results.append(read_until_closed(s, 10)[0])

    t = threading.Thread(target=attack)
    t.start()
    worst = 0.0
    for i in range(10):
        start = time.monotonic()
        assert post(server, body(i, "server/discover")).status_code == 200
        worst = max(worst, time.monotonic() - start)
    t.join(20)
    assert not t.is_alive()
    assert_431(results[0], "Request head larger than 65536 bytes")
    assert worst < 2.0, worst  # a loaded 2-core CI box; the old code stalled ~3 s on an idle one
