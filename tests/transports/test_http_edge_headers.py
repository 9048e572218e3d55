"""Header rules at the HTTP edge, over raw sockets against the real `mcp-stateless serve` (repeated header
lines cannot be sent through an HTTP client library's header dict): repeated Host/Origin/routing headers,
Accept q-values, and the Origin check on a non-loopback bind."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from cli.test_serve import CLI, PV, ROOT, body, env, http_server
from helpers import Driver, headers_for, rpc
from mcp_stateless import App
from mcp_stateless.protocol.headers import accepted_media, repeated_header
from services import free_port, unavailable


def exchange(port: int, lines: list[str], payload: bytes, host: str = "127.0.0.1") -> tuple[int, str, bytes]:
    """One HTTP/1.1 request with exactly these header lines; (status, response head, body)."""
    head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{line}\r\n" for line in lines)
    head += f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n"
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(head.encode() + payload)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    rhead, _, rbody = got.partition(b"\r\n\r\n")
    return int(rhead.split()[1]), rhead.decode("latin-1").lower(), rbody


def standard(port: int, msg: dict[str, Any], *, accept: str = "application/json, text/event-stream") -> list[str]:
    lines = [f"host: 127.0.0.1:{port}", "content-type: application/json", f"accept: {accept}",
             f"mcp-protocol-version: {PV}", f"mcp-method: {msg['method']}"]
    if "name" in msg["params"]:
        lines.append(f"mcp-name: {msg['params']['name']}")
    return lines


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with http_server() as (url, _proc):
        yield int(url.split(":")[2].split("/")[0])


ECHO = body(5, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})


def error_of(payload: bytes) -> dict[str, Any]:
    err: dict[str, Any] = orjson.loads(payload)["error"]
    return err


# ------------------------------------------------------------------------------- repeated header lines
@pytest.mark.slow
def test_two_host_lines_are_400(port: int) -> None:
    lines = [*standard(port, ECHO), f"host: 127.0.0.1:{port}"]
    status, _, payload = exchange(port, lines, orjson.dumps(ECHO))
    assert status == 400
    assert error_of(payload) == {"code": -32600, "message": "Host header appears more than once"}


@pytest.mark.slow
@pytest.mark.parametrize(("extra", "name"), [
    ("mcp-method: tools/list", "mcp-method"),
    ("mcp-name: add", "mcp-name"),
    ("mcp-protocol-version: 2025-11-25", "mcp-protocol-version"),
    ("origin: http://localhost:3000", "origin"),
])
def test_contradicting_copies_of_a_routing_header_are_rejected(port: int, extra: str, name: str) -> None:
    lines = standard(port, ECHO)
    if name == "origin":
        lines.append("origin: http://localhost:5173")
    lines.append(extra)
    status, _, payload = exchange(port, lines, orjson.dumps(ECHO))
    assert status == 400
    assert error_of(payload) == {"code": -32020, "message": f"{name} header appears twice with different values"}


@pytest.mark.slow
def test_equal_copies_of_a_routing_header_are_tolerated(port: int) -> None:
    lines = [*standard(port, ECHO), "mcp-method: tools/call", "x-other: a", "x-other: b"]
    status, _, payload = exchange(port, lines, orjson.dumps(ECHO))
    assert status == 200 and orjson.loads(payload)["result"]["content"][0]["text"] == "hi"


def test_repeated_header_rules() -> None:
    assert repeated_header([(b"host", b"a"), (b"accept", b"x"), (b"accept", b"y")]) is None
    assert repeated_header([(b"mcp-param-region", b"eu"), (b"mcp-param-region", b"us")]) is not None
    assert repeated_header([(b"mcp-name", b"add"), (b"mcp-name", b" add ")]) is None


# ------------------------------------------------------------------------------- Accept q-values
@pytest.mark.slow
@pytest.mark.parametrize(("accept", "status", "ctype"), [
    ("application/json;q=0, text/html", 406, "application/json"),
    ("application/json; q=0.0, text/event-stream", 200, "text/event-stream"),
    ("*/*;q=0", 406, "application/json"),
    ("application/*;q=0, */*", 200, "text/event-stream"),  # the more specific application/* refuses JSON
    ("application/json;q=0.5, text/event-stream;q=0", 200, "application/json"),
    ("text/plain;q=1, application/json;q=0.001", 200, "application/json"),
])
def test_accept_q_values_are_honoured(port: int, accept: str, status: int, ctype: str) -> None:
    got, head, payload = exchange(port, standard(port, ECHO, accept=accept), orjson.dumps(ECHO))
    assert got == status, payload
    assert f"content-type: {ctype}" in head
    if status == 406:
        assert error_of(payload)["code"] == -32600


def test_accepted_media_rules() -> None:
    assert accepted_media("application/json, text/event-stream") == (True, True)
    assert accepted_media("application/json;q=0, text/html") == (False, False)
    # */* with q=0 still lets a listed type through; a more specific range overrides a broader one
    assert accepted_media("*/*;q=0, text/event-stream") == (False, True)
    assert accepted_media("text/*;q=0, text/event-stream;q=0.2, application/json") == (True, True)
    assert accepted_media("application/json;q=banana, text/event-stream") == (False, True)
    assert accepted_media("application/json;q=2") == (False, False)


# ------------------------------------------------------------------------------- Origin on every bind
@pytest.fixture(scope="module")
def public_port() -> Iterator[int]:
    """A bind that is not one of the loopback names (127.0.0.2 is still only reachable locally)."""
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.2", 0))
    except OSError:
        unavailable("127.0.0.2 is not bindable here")
    p = free_port()
    proc = subprocess.Popen([CLI, "serve", "examples/echo.py:app", "--http", f"127.0.0.2:{p}",
                             "--allowed-origin", "https://app.example.com"], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env())
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                socket.create_connection(("127.0.0.2", p), 0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        yield p
    finally:
        proc.terminate()
        proc.wait(15)


@pytest.mark.slow
@pytest.mark.parametrize(("host", "origin", "status"), [
    ("evil.example.com", "http://evil.example.com", 403),  # a DNS-rebinding page
    ("127.0.0.2:{p}", "http://127.0.0.2:{p}", 403),  # no host is named, so no Origin is same-host
    ("evil.example.com", None, 200),  # not a browser: any Host on a public bind
    ("mcp.example.com", "https://app.example.com", 200),  # opened explicitly
])
def test_a_non_loopback_bind_refuses_foreign_origins(public_port: int, host: str, origin: str | None,
                                                     status: int) -> None:
    lines = [f"host: {host.format(p=public_port)}", *standard(public_port, ECHO)[1:]]
    if origin is not None:
        lines.append(f"origin: {origin.format(p=public_port)}")
    got, _, payload = exchange(public_port, lines, orjson.dumps(ECHO), host="127.0.0.2")
    assert got == status, payload
    if status == 403:
        assert error_of(payload) == {"code": -32600, "message": "Origin is not allowed"}


async def test_the_transports_default_on_a_non_loopback_address_refuses_origins() -> None:
    """HttpTransport without a policy, reached on a LAN address: Origins refused, plain clients served."""
    d = Driver(App("t"), base_url="http://10.0.0.5:8000")
    try:
        msg = rpc("server/discover", id=1)
        r = await d.send(msg, headers_for(msg, host="evil.example.com", origin="http://evil.example.com"))
        assert r.status == 403
        r = await d.send(msg, headers_for(msg, host="evil.example.com"))
        assert r.status == 200
    finally:
        await d.aclose()
