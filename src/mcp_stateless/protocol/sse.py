"""Server-Sent Events, both directions: the writer the server streams with, and the incremental parser
(bytes in, events out) a client reads with. JSON from orjson never contains a raw newline, so the writer
needs one `data:` line; the parser accepts what any server may send (CRLF, multi-line data, comments)."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson

HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]

KEEPALIVE = b": keep-alive\n\n"


def event(data: bytes) -> bytes:
    return b"event: message\ndata: " + data + b"\n\n"


@dataclass(frozen=True, slots=True)
class Event:
    event: str
    data: str
    id: str | None = None


class SSEParser:
    """Feed raw bytes; get complete events. Handles CRLF or LF line ends, multi-line data, `:` comments."""

    __slots__ = ("_buf", "_data", "_event", "_id", "retry")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self.retry: int | None = None  # the reconnection delay the stream asked for, in ms

    @property
    def last_event_id(self) -> str | None:
        """What a reconnection sends as `Last-Event-ID`: set by any `id` field, an event without data too."""
        return self._id

    def feed(self, chunk: bytes) -> list[Event]:
        buf = self._buf + chunk if self._buf else chunk
        end = buf.rfind(b"\n")
        if end < 0:
            self._buf = buf
            return []
        # Decoded once for all its complete lines: a UTF-8 sequence never holds a newline byte, so the last
        # one cuts no character in two.
        text = buf[:end].decode("utf-8", "replace")
        self._buf = buf[end + 1:]
        out: list[Event] = []
        for line in text.split("\n"):
            ev = self._line(line[:-1] if line.endswith("\r") else line)
            if ev is not None:
                out.append(ev)
        return out

    def _line(self, line: str) -> Event | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            ev = Event(self._event or "message", "\n".join(self._data), self._id)
            self._data = []
            self._event = ""
            return ev
        if line[0] == ":":
            return None  # comment / keep-alive
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value  # the last event id persists until the stream sets another
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)
        return None  # unknown fields ignored

    def close(self) -> list[Event]:
        """End of stream: a final event without its blank line is dispatched (lenient)."""
        out = self.feed(b"\n") if self._buf else []
        if self._data:
            ev = self._line("")
            if ev is not None:
                out.append(ev)
        return out


async def iter_events(chunks: AsyncIterable[bytes]) -> AsyncIterator[Event]:
    """Every event of a byte stream, the unterminated last one included."""
    parser = SSEParser()
    async for chunk in chunks:
        for ev in parser.feed(chunk):
            yield ev
    for ev in parser.close():
        yield ev


def decode_messages(data: str | bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages in one `message` event's data (an object, or a batch of them). Data that is not
    JSON, or JSON that is not an object, carries no message."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return []
    if isinstance(obj, list):
        return [m for m in obj if isinstance(m, dict)]
    return [obj] if isinstance(obj, dict) else []


async def iter_messages(
    chunks: AsyncIterable[bytes], *, other: Callable[[Event], None] | None = None
) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE byte stream, in order. Events of another type (e.g. the 2024-11-05
    transport's `endpoint`) go to `other`; comments and empty events are skipped."""
    async for ev in iter_events(chunks):
        if ev.event != "message":
            if other is not None:
                other(ev)
            continue
        if ev.data:
            for m in decode_messages(ev.data):
                yield m


__all__ = [
    "HEADERS",
    "KEEPALIVE",
    "Event",
    "SSEParser",
    "decode_messages",
    "event",
    "iter_events",
    "iter_messages",
]
