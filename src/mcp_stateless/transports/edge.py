"""Connection limits at the edge when uvicorn serves directly (no proxy in front): idle, header and body
timeouts and a cap on open connections.

uvicorn (0.3x–0.5x) bounds only the idle time between keep-alive requests (`timeout_keep_alive`);
nothing bounds a fresh connection that never sends a byte, a request head trickling in at 1 byte/s, or a
body shorter than its Content-Length, and `limit_concurrency` answers 503 to *every* new request once
the cap is reached (so idle sockets lock real clients out). `GuardedHttpToolsProtocol` is uvicorn's
httptools protocol with those gaps closed:

- a connection that sends nothing within `idle_timeout`, and a keep-alive connection idle for as long,
  is closed (uvicorn's own keep-alive timer, armed on connect as well);
- a request head not complete within `header_timeout` of its first byte gets 408 and is closed;
- a body not complete within `body_timeout` of the end of its head gets 408 (if nothing was answered
  yet) and the connection is closed; the application sees `http.disconnect`;
- a request head larger than `max_head_bytes` or with more than `max_header_count` header lines gets 431
  and is closed, counted on the raw bytes before the parser sees them: httptools joins a header value
  split over many reads by concatenation (quadratic in its size, on the event loop), so an unbounded head
  would stall every other client;
- at `max_connections` open connections, a new one evicts the connection that has waited longest
  without a complete request (idle or still sending its head); when every connection is busy with a
  request, the newcomer gets 503 and is closed. Real requests are served while idle sockets pile up.

perf: a request whose head and body arrive in one read (the usual case) arms no timer at all: the
phase watchdog is armed only when a `data_received` call ends with a request still incomplete.

Each cut-off is logged at debug level only: a flood of hostile connections must not flood the log.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..protocol import errors
from ..protocol.errors import McpError
from .limits import LIMITS_ATTR, EdgeLimits

log = logging.getLogger("mcp_stateless.http")

# What a connection is waiting for (ints: compared on every read).
_IDLE = 0  # nothing: no request in progress, or the application is answering one
_HEAD = 1  # the rest of a request head
_BODY = 2  # the rest of a request body
_LINGER = 2.0  # seconds a refused connection's further bytes are read and dropped before it is closed


def _refusal(status: int, reason: bytes, message: str) -> bytes:
    body = orjson.dumps(errors.error_response(None, McpError(errors.INVALID_REQUEST, message)))
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, reason, len(body), body))


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol plus the limits above (see the module docstring).

    perf: no parser callback is overridden; what the connection waits for is read off uvicorn's own
    request cycle after each read, and the clock is read only when a request is still incomplete."""

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        limits: EdgeLimits = getattr(config, LIMITS_ATTR, None) or EdgeLimits()
        self._limits = limits
        self.timeout_keep_alive = limits.idle_timeout  # type: ignore[assignment]  # a float works
        self._armed = _IDLE  # what `_since` is the start of
        self._since = 0.0  # loop time: when the connection began waiting for `_armed` (or connected)
        self._watchdog: asyncio.TimerHandle | None = None
        # The head being received: True from the connection's start and after each complete message until
        # the parser reports the headers complete (parser callbacks below); bytes and line breaks so far.
        self._in_head = True
        self._head_bytes = 0
        self._head_lines = 0
        self._head_tail = b""  # the last 3 bytes of the head so far: a blank line split across reads
        self._discarding = False  # refused: what still arrives is dropped until the lingering close

    def _waiting_for(self) -> int:
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            return _BODY if cycle.more_body and not cycle.disconnected else _IDLE
        # Bytes after the last response (or the first bytes) that made no complete request: a head.
        return _HEAD

    # -- connection -------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._since = self.loop.time()
        if len(self.connections) > self._limits.max_connections and not self._evict_one():
            log.debug("refusing a connection: %d connections open, every one busy with a request",
                      len(self.connections) - 1)
            transport.write(_refusal(503, b"Service Unavailable", "Too many connections; retry shortly"))
            transport.close()
            return
        # A connection that never sends a byte is idle too: uvicorn arms this timer only after a response.
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                            self.timeout_keep_alive_handler)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        super().connection_lost(exc)

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest without a complete request; False if none."""
        victim: GuardedHttpToolsProtocol | None = None
        for conn in self.connections:
            if (conn is not self and isinstance(conn, GuardedHttpToolsProtocol)
                    and (conn.cycle is None or conn.cycle.response_complete)  # idle, or a head arriving
                    and not conn.pipeline and not conn.transport.is_closing()
                    and (victim is None or conn._since < victim._since)):
                victim = conn
        if victim is None:
            return False
        log.debug("connection cap (%d) reached: closing the longest-waiting idle connection",
                  self._limits.max_connections)
        victim.transport.close()
        self.connections.discard(victim)  # its connection_lost follows; it no longer counts
        return True

    def data_received(self, data: bytes) -> None:
        if self._in_head and not self._head_within_limits(data):
            return
        if self._discarding:
            return
        super().data_received(data)
        waiting = self._waiting_for()
        if waiting == self._armed:
            return
        self._armed = waiting
        if waiting == _IDLE:  # the request is complete: its watchdog, if any, finds nothing to do
            return
        self._since = self.loop.time()
        if self._watchdog is None:
            self._watchdog = self.loop.call_at(self._deadline(), self._expire)
        # else: the armed watchdog fires at its old deadline and re-arms for this one

    # -- the head's size ----------------------------------------------------------------------------
    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = self._head_lines = 0
        self._head_tail = b""
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True  # what follows is the next request's head (pipelined or keep-alive)

    def _lines_crossed_first(self, counted: bytes) -> bool:
        """Whether the head went past the header-line limit before it went past the byte limit, when this
        read (`counted`, already added) crossed both: the refusal names the limit the client hit first."""
        limits = self._limits
        over = self._head_lines - (limits.max_header_count + 2)  # newlines of this read past the limit
        if over <= 0:
            return False
        at = -1
        for _ in range(counted.count(b"\n") - over + 1):
            at = counted.index(b"\n", at + 1)
        return self._head_bytes - len(counted) + at + 1 <= limits.max_head_bytes

    def _head_within_limits(self, data: bytes) -> bool:
        """Count `data` into the head so far (only up to its end: a body may follow in the same read);
        past a limit answer 431, close, and return False so the parser never sees it."""
        joined = self._head_tail + data
        end = joined.find(b"\r\n\r\n")
        # When the head ends in this read, count no byte of what follows it (a body).
        counted = data if end < 0 else data[:max(0, end + 4 - len(self._head_tail))]
        self._head_tail = joined[-3:]
        self._head_bytes += len(counted)
        self._head_lines += counted.count(b"\n")
        limits = self._limits
        # Line breaks: the request line and the blank line are not header fields.
        if self._head_bytes <= limits.max_head_bytes and self._head_lines <= limits.max_header_count + 2:
            return True
        if self._head_bytes > limits.max_head_bytes and not self._lines_crossed_first(counted):
            message = f"Request head larger than {limits.max_head_bytes} bytes"
        else:
            message = f"More than {limits.max_header_count} request header fields"
        log.debug("closing %s: %s", self._peer(), message)
        self._in_head = False
        self.transport.write(_refusal(431, b"Request Header Fields Too Large", message))
        # Lingering close (as nginx does): closing with the client's bytes still unread sends a TCP reset,
        # and the reset destroys the 431 before the client reads it. Half-close, drop what still arrives
        # (costs nothing) and close for good a moment later.
        self._discarding = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(_LINGER, self.transport.close)
        return False

    def _peer(self) -> str:
        return f"{self.client[0]}:{self.client[1]}" if self.client else "a client"

    # -- the watchdog -----------------------------------------------------------------------------
    def _deadline(self) -> float:
        limit = self._limits.header_timeout if self._armed == _HEAD else self._limits.body_timeout
        return self._since + limit

    def _expire(self) -> None:
        self._watchdog = None
        if self.transport.is_closing():
            return
        waiting = self._waiting_for()
        if waiting == _IDLE:  # the request completed: the next incomplete read arms afresh
            self._armed = _IDLE
            return
        if waiting != self._armed:  # a later request or phase that no read has noted yet
            self._armed = waiting
            self._since = self.loop.time()
            self._watchdog = self.loop.call_at(self._deadline(), self._expire)
            return
        deadline = self._deadline()
        if deadline > self.loop.time():  # armed for an earlier request, or a later phase: not yet
            self._watchdog = self.loop.call_at(deadline, self._expire)
            return
        peer = self._peer()
        if waiting == _HEAD:
            log.debug("closing %s: request head not complete within %g s", peer, self._limits.header_timeout)
            self.transport.write(_refusal(408, b"Request Timeout",
                                          f"Request head not received within {self._limits.header_timeout:g} s"))
        else:
            log.debug("closing %s: request body not complete within %g s", peer, self._limits.body_timeout)
            cycle = self.cycle
            if not cycle.response_started:
                cycle.disconnected = True  # the app's receive() says http.disconnect; its sends are dropped
                self.transport.write(_refusal(
                    408, b"Request Timeout", f"Request body not received within {self._limits.body_timeout:g} s"))
        self.transport.close()
