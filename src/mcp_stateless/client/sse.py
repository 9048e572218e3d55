"""Incremental Server-Sent Events parser (sans-IO): bytes in, (event, data) out; comment lines ignored."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Event:
    event: str
    data: str
    id: str | None = None


class SSEParser:
    """Feed raw bytes; get complete events. Handles CRLF or LF line ends, multi-line data, `:` comments."""

    __slots__ = ("_buf", "_data", "_event", "_id")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        buf = self._buf + chunk if self._buf else chunk
        out: list[Event] = []
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            ev = self._line(line.decode("utf-8", "replace"))
            if ev is not None:
                out.append(ev)
        self._buf = buf[start:]
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
            self._id = value
        return None  # `retry` and unknown fields ignored

    def close(self) -> list[Event]:
        """End of stream: a final event without its blank line is dispatched (lenient)."""
        out = self.feed(b"\n") if self._buf else []
        if self._data:
            ev = self._line("")
            if ev is not None:
                out.append(ev)
        return out


__all__ = ["Event", "SSEParser"]
