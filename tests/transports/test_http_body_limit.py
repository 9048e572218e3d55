"""The request-body limit over real sockets, under both uvicorn HTTP parsers: a chunked body (no Content-Length,
so only the running count can refuse it) over the limit is 413 with a JSON-RPC error and the tool never runs, and
a body that stops short of its Content-Length is never handled as a request; a Content-Length over the limit (by one
byte or by a gigabyte) is 413 from the head alone, and one exactly at it is served."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import h11
import orjson
import pytest

from helpers import headers_for, rpc
from mcp_stateless import App

LIMIT = 1024


def counting_app() -> tuple[App, list[str]]:
    app = App("body-limit")
    seen: list[str] = []

    @app.tool()
    def echo(text: str) -> str:
        seen.append(text)
        return f"{len(text)} chars"

    return app, seen


@pytest.fixture(params=["h11", "httptools"])
def server(request: pytest.FixtureRequest, served: Callable[..., Any]) -> Iterator[tuple[Any, list[str]]]:
    app, seen = counting_app()
    yield served(app, http=request.param, max_body=LIMIT), seen


def exchange(port: int, events: list[h11.Event], *, half_close: bool = False) -> tuple[int, bytes] | None:
    """Send `events` on a fresh connection; the response's status and body, or None if the server closed the
    connection without answering."""
    conn = h11.Connection(our_role=h11.CLIENT)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for event in events:
            sock.sendall(conn.send(event) or b"")
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        status = 0
        body: list[bytes] = []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = sock.recv(65536)
                if not data and status == 0:
                    return None
                conn.receive_data(data)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return status, b"".join(body)


def chunked_post(port: int, msg: dict[str, Any], chunk_size: int) -> tuple[int, dict[str, Any]]:
    body = orjson.dumps(msg)
    hdrs = [("host", f"127.0.0.1:{port}"), ("transfer-encoding", "chunked"), *headers_for(msg).items()]
    events: list[h11.Event] = [h11.Request(method="POST", target="/mcp", headers=hdrs)]
    events += [h11.Data(data=body[i : i + chunk_size]) for i in range(0, len(body), chunk_size)]
    events.append(h11.EndOfMessage())
    answer = exchange(port, events)
    assert answer is not None
    return answer[0], orjson.loads(answer[1])


def test_a_chunked_body_over_the_limit_is_413(server: tuple[Any, list[str]]) -> None:
    s, seen = server
    big = rpc("tools/call", {"name": "echo", "arguments": {"text": "x" * 3000}}, id=7)
    assert len(orjson.dumps(big)) > 3 * LIMIT
    status, reply = chunked_post(s.port, big, chunk_size=256)
    assert status == 413
    assert reply == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": f"Request body exceeds {LIMIT} bytes"},
    }
    assert seen == []


def test_a_chunked_body_one_byte_over_the_limit_is_413(server: tuple[Any, list[str]]) -> None:
    s, seen = server
    pad = "x" * 200
    msg = rpc("tools/call", {"name": "echo", "arguments": {"text": pad}}, id=8)
    # grow the text until the encoded message is exactly one byte over the limit
    msg["params"]["arguments"]["text"] = pad + "x" * (LIMIT + 1 - len(orjson.dumps(msg)))
    assert len(orjson.dumps(msg)) == LIMIT + 1
    status, reply = chunked_post(s.port, msg, chunk_size=100)
    assert (status, reply["error"]["code"]) == (413, -32600)
    assert seen == []


def test_a_chunked_body_exactly_at_the_limit_is_served(server: tuple[Any, list[str]]) -> None:
    s, seen = server
    msg = rpc("tools/call", {"name": "echo", "arguments": {"text": ""}}, id=9)
    msg["params"]["arguments"]["text"] = "y" * (LIMIT - len(orjson.dumps(msg)))
    assert len(orjson.dumps(msg)) == LIMIT
    status, reply = chunked_post(s.port, msg, chunk_size=100)
    assert status == 200
    text = msg["params"]["arguments"]["text"]
    assert reply["result"]["content"] == [{"type": "text", "text": f"{len(text)} chars"}]
    assert seen == [text]


def test_a_body_shorter_than_its_content_length_is_never_handled(server: tuple[Any, list[str]]) -> None:
    s, seen = server
    msg = rpc("tools/call", {"name": "echo", "arguments": {"text": "short"}}, id=10)
    body = orjson.dumps(msg)  # a complete, valid message: only the framing says more is coming
    hdrs = [("host", f"127.0.0.1:{s.port}"), ("content-length", str(len(body) + 50)), *headers_for(msg).items()]
    request = h11.Request(method="POST", target="/mcp", headers=hdrs)
    assert exchange(s.port, [request, h11.Data(data=body)], half_close=True) is None
    assert seen == []
    # the server is unharmed: the same message, framed honestly, is served
    hdrs = [("host", f"127.0.0.1:{s.port}"), ("content-length", str(len(body))), *headers_for(msg).items()]
    answer = exchange(s.port, [h11.Request(method="POST", target="/mcp", headers=hdrs), h11.Data(data=body),
                               h11.EndOfMessage()])
    assert answer is not None and answer[0] == 200
    assert seen == ["short"]


def head_only(port: int, msg: dict[str, Any], declared: int) -> tuple[int, bytes]:
    """Send only the head of a POST that declares `declared` body bytes; the answer that arrives within 2 s
    (far below any body timeout: only an answer given without waiting for the body comes in time)."""
    hdrs = [("host", f"127.0.0.1:{port}"), ("content-length", str(declared)), *headers_for(msg).items()]
    conn = h11.Connection(our_role=h11.CLIENT)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(conn.send(h11.Request(method="POST", target="/mcp", headers=hdrs)) or b"")
        sock.settimeout(2)
        status, body = 0, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(sock.recv(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return status, body


@pytest.mark.parametrize("declared", [LIMIT + 1, LIMIT * 1_000_000], ids=["one-over", "a-gigabyte"])
def test_a_content_length_over_the_limit_is_413_before_any_body_arrives(server: tuple[Any, list[str]],
                                                                         declared: int) -> None:
    """The declared length alone refuses it: the server answers without waiting for (or reading) a byte of
    the body, so a client that announces 1 GB and sends nothing is told at once, not after a timeout; and
    one byte over is already over."""
    s, seen = server
    msg = rpc("tools/call", {"name": "echo", "arguments": {"text": "never sent"}}, id=11)
    status, body = head_only(s.port, msg, declared)
    assert status == 413
    assert orjson.loads(body) == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": f"Request body exceeds {LIMIT} bytes"},
    }
    assert seen == []


def test_a_content_length_exactly_at_the_limit_is_served(server: tuple[Any, list[str]]) -> None:
    s, seen = server
    msg = rpc("tools/call", {"name": "echo", "arguments": {"text": ""}}, id=12)
    msg["params"]["arguments"]["text"] = "z" * (LIMIT - len(orjson.dumps(msg)))
    body = orjson.dumps(msg)
    assert len(body) == LIMIT
    hdrs = [("host", f"127.0.0.1:{s.port}"), ("content-length", str(LIMIT)), *headers_for(msg).items()]
    answer = exchange(s.port, [h11.Request(method="POST", target="/mcp", headers=hdrs), h11.Data(data=body),
                               h11.EndOfMessage()])
    assert answer is not None and answer[0] == 200, answer
    text = msg["params"]["arguments"]["text"]
    assert orjson.loads(answer[1])["result"]["content"] == [{"type": "text", "text": f"{len(text)} chars"}]
    assert seen == [text]
