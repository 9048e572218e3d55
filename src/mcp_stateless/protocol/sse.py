"""Server-Sent Events framing. JSON from orjson never contains a raw newline, so one `data:` line is enough."""

from __future__ import annotations

HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]

KEEPALIVE = b": keep-alive\n\n"


def event(data: bytes) -> bytes:
    return b"event: message\ndata: " + data + b"\n\n"
