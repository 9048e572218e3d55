"""stdio (2026-07-28): newline-delimited JSON on stdin/stdout, many requests in flight.

The process is a delivery channel, not a conversation: each line is classified on its own by the same
sans-IO core as HTTP, requests run concurrently and are answered as each finishes, and
`notifications/cancelled` stops the named request (nothing more is written for it). Only MCP messages
reach the real stdout: file descriptor 1 is pointed at stderr, so a stray `print()` cannot corrupt it.

The caller is authenticated once, before the first line is read, from the process environment: the
value of `MCP_STATELESS_AUTHORIZATION` (if set) is presented to the authenticator as the header
``authorization`` (e.g. ``Bearer <token>``). A refusal ends the process before any request is read:
the launching client sees the process exit (status 1) and the reason on stderr.

Flow control: what waits to be written is bounded. When more than `write_high_water` bytes wait for a
client that does not read its stdout, stdin is not read either (the client's writes block, as on a
socket) until the backlog drains, and at most `max_inflight` requests run at once (each may hold its
result until it is written): memory stays about `write_high_water + max_inflight x result size`. Meanwhile
each request's notifications wait in its bounded outbox (`protocol/outbox.py`: progress coalesced, logs
beyond the bound dropped and counted), not in the pipe's buffer. When
stdout is closed (the client went away), every request still running is cancelled, nothing more is read,
and the process ends (status 0) instead of working for no one.

A line longer than `max_line` (64 MiB) is answered with "Message too large" and skipped up to its
newline; the line after it is read normally.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..protocol import envelope, errors
from ..protocol.encoding import encode_message
from ..protocol.endpoint import Call, Endpoint, LegacyEndpoint, ListenEnd, ListenEvent, StdioSession, authenticator_for
from ..protocol.envelope import Rejection, Request
from ..protocol.errors import McpError
from ..protocol.inbound import Cancel, Inbound
from ..protocol.jsonrpc import RequestId
from ..protocol.legacy import request_id, requested_version, stdio_era
from ..protocol.outbox import LineOutbox
from ..protocol.principal import ANONYMOUS, Authenticator, Challenge, Credentials
from ..protocol.retirement import Retirement
from .heap import settle_heap

log = logging.getLogger("mcp_stateless.stdio")

MAX_LINE = 64 * 1024 * 1024
DEFAULT_MAX_INFLIGHT = 32
DEFAULT_WRITE_HIGH_WATER = 1024 * 1024
AUTHORIZATION_ENV = "MCP_STATELESS_AUTHORIZATION"
_CHUNK = 1 << 16


async def read_lines(reader: asyncio.StreamReader, max_line: int) -> AsyncGenerator[bytes | None, None]:
    """The lines (without their newline) of `reader`; None for a line longer than `max_line`, whose
    bytes are dropped as they arrive (never buffered whole) up to and including its newline. A final
    line without a newline counts too."""
    buf = bytearray()
    skipping = False
    while chunk := await reader.read(_CHUNK):
        start = 0
        while (nl := chunk.find(b"\n", start)) != -1:
            if skipping:
                skipping = False
            elif buf:
                buf += chunk[start:nl]
                line = bytes(buf)
                buf.clear()
                yield line if len(line) <= max_line else None
            else:
                yield chunk[start:nl] if nl - start <= max_line else None
            start = nl + 1
        if not skipping and start < len(chunk):
            buf += chunk[start:]
            if len(buf) > max_line:
                buf.clear()
                skipping = True
                yield None  # answered now: the rest of this line is discarded as it comes
    if buf and not skipping:
        yield bytes(buf)


class _StdoutProtocol(asyncio.Protocol):
    """Tells the server when stdout's buffer is over its high-water mark, and when stdout is gone."""

    def __init__(self, server: StdioServer) -> None:
        self.server = server

    def pause_writing(self) -> None:
        self.server._writable.clear()

    def resume_writing(self) -> None:
        self.server._writable.set()
        self.server.release()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.stdout_gone()


def credentials_from_env(environ: Mapping[str, str]) -> Credentials:
    """The credentials a stdio process presents: `MCP_STATELESS_AUTHORIZATION` as ``authorization``."""
    value = environ.get(AUTHORIZATION_ENV)
    return Credentials("stdio", {"authorization": value} if value else {})


_Entry = tuple[asyncio.Task[None], LineOutbox | None]  # a request's task and outbox (None: a listen stream)


class StdioServer:
    """Serves one endpoint over a pair of byte streams (stdin/stdout of this process by default).

    `authenticator` defaults to the endpoint's own (see `authenticator_for`); `environ` is where the
    credentials come from (this process's environment by default). `legacy`: the 2025-era branch, which
    gets the whole process when its first message is `initialize`; `legacy_until`: when that era retires
    (from then on such a process gets `-32022` for every request, as an HTTP client would get 410)."""

    def __init__(self, endpoint: Endpoint, *, authenticator: Authenticator | None = None,
                 environ: Mapping[str, str] | None = None, drain_timeout: float = 1.0,
                 max_line: int = MAX_LINE, max_inflight: int = DEFAULT_MAX_INFLIGHT,
                 legacy: LegacyEndpoint | None = None, legacy_until: Retirement | None = None) -> None:
        self.endpoint = endpoint
        self.legacy = legacy
        self.legacy_until = legacy_until
        self._retired: Retirement | None = None  # set when this process spoke legacy after the date
        self._first = True
        self._legacy_session: StdioSession | None = None
        self.authenticator = authenticator_for(endpoint, authenticator)
        self.environ = environ if environ is not None else os.environ
        self.drain_timeout = drain_timeout
        self.max_line = max_line
        self.max_inflight = max_inflight
        self._out: asyncio.WriteTransport | None = None
        self._out_fd: int | None = None
        # the one in-flight table and id rule (protocol/inbound.py); a listen stream has no outbox
        self._inbound: Inbound[_Entry] = Inbound(endpoint.table, endpoint.supported_versions)
        self._requests = 0  # entries of _inflight that are requests (listen streams are not capped)
        self._call = Call(ANONYMOUS, "stdio")  # replaced by `authenticate()`, once per process
        self._writable = asyncio.Event()  # stdout's backlog is under its high-water mark
        self._writable.set()
        self._held: set[LineOutbox] = set()  # outboxes waiting for stdout to drain
        self._room = asyncio.Event()  # fewer than max_inflight requests run
        self._room.set()
        self._gone = asyncio.Event()  # stdout is closed: stop

    def attach_stdout(self, transport: asyncio.WriteTransport, high_water: int = DEFAULT_WRITE_HIGH_WATER) -> None:
        transport.set_write_buffer_limits(high=high_water)
        self._out = transport

    def stop(self, signum: int) -> None:
        """A stop signal: end as on stdin EOF (listen streams end, running requests get the drain)."""
        log.info("stdio: signal %d: stopping", signum)
        self._gone.set()

    def stdout_gone(self) -> None:
        """The reader of stdout went away: nothing written can arrive, so stop all work."""
        if self._gone.is_set():
            return
        # A client that simply went away (nothing running) is a normal end; lost work is worth a warning.
        inflight = self._inbound.inflight
        log.log(logging.WARNING if inflight else logging.DEBUG,
                "stdio: stdout was closed; cancelling %d request(s) and stopping", len(inflight))
        self._gone.set()
        self._out = None
        self._out_fd = None
        for task, outbox in inflight:
            if outbox is not None:
                outbox.close()
            task.cancel()

    # -- output ---------------------------------------------------------------------
    def _hold(self, outbox: LineOutbox) -> bool:
        """While stdout is over its high-water mark, requests' notifications wait in their outboxes
        (bounded there: progress coalesces, logs beyond the bound are dropped) instead of in the pipe."""
        if self._writable.is_set():
            return False
        self._held.add(outbox)
        return True

    def release(self) -> None:
        """stdout drained: write what the outboxes held."""
        held, self._held = self._held, set()
        for outbox in held:
            outbox.flush()

    def write(self, message: Any) -> None:
        line = encode_message(message) + b"\n"
        try:
            if self._out is not None:
                self._out.write(line)
            elif self._out_fd is not None:
                os.write(self._out_fd, line)
        except (OSError, RuntimeError):  # a closed pipe: report once, stop
            self.stdout_gone()

    # -- input ----------------------------------------------------------------------
    def handle_line(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        try:
            message = envelope.parse(line)
        except McpError as e:
            self.write(errors.error_response(None, e))
            return
        if self._first:  # the first message picks the process's era
            self._first = False
            if self.legacy is not None and stdio_era(message) == "legacy":
                until = self.legacy_until
                if until is not None and until.retired(time.time()):
                    self._retired = until
                else:
                    self._legacy_session = self.legacy.stdio_session(self._call.principal, self.write)
        if self._retired is not None:
            rid = request_id(message)
            if rid is not None and isinstance(message, dict) and "method" in message:
                body = self._retired.refusal(rid, self.endpoint.supported_versions,
                                             requested_version(message, None)).body()
                self.write(body)
            return
        if self._legacy_session is not None:
            self._legacy_session.receive(message)
            return
        decision = self._inbound.receive(message)
        if isinstance(decision, Request):
            self._start(decision)
        elif isinstance(decision, Rejection):
            body = decision.body()
            if body is not None:
                self.write(body)
        elif isinstance(decision, Cancel) and decision.entry is not None:
            task, outbox = decision.entry
            if outbox is not None:
                outbox.close()
            task.cancel()  # nothing more is written for it
        # any other notification: nothing a client may send is defined for the modern era

    def _start(self, req: Request) -> None:
        loop = asyncio.get_running_loop()
        if req.method == "subscriptions/listen":
            entry: _Entry = (loop.create_task(self._listen(req)), None)
            self._inbound.inflight.start(req.id, entry)
            entry[0].add_done_callback(functools.partial(self._forget, req.id, entry))
            return
        outbox = LineOutbox(self.write, self._hold)  # the one bound and drop policy (protocol/outbox.py)
        entry = (loop.create_task(self._request(req, outbox)), outbox)
        self._inbound.inflight.start(req.id, entry)
        self._requests += 1
        if self._requests >= self.max_inflight:
            self._room.clear()
        entry[0].add_done_callback(functools.partial(self._forget, req.id, entry))

    def _forget(self, rid: RequestId, entry: _Entry, task: asyncio.Task[None]) -> None:
        self._inbound.inflight.finish(rid, entry)  # not a later request that reused a cancelled id
        if entry[1] is not None:  # a request (listen streams are not capped)
            self._requests -= 1
            if self._requests < self.max_inflight:
                self._room.set()
        if not task.cancelled() and (failure := task.exception()) is not None:
            log.error("stdio: request %r failed in the transport", rid, exc_info=failure)

    async def _request(self, req: Request, outbox: LineOutbox) -> None:
        reply = await self.endpoint.handle(req, Call(self._call.principal, "stdio", outbox))
        if outbox.live and req.id in self._inbound.inflight:
            outbox.flush(force=True)  # what the handler emitted goes before its response
            outbox.close()
            self.write(reply.message)

    async def _listen(self, req: Request) -> None:
        stream = self.endpoint.listen(req, self._call)
        try:
            async for item in stream:
                if not isinstance(item, ListenEvent | ListenEnd) or req.id not in self._inbound.inflight:
                    continue  # a keep-alive has no line on stdio
                self.write(item.message)
        except McpError as e:
            self.write(errors.error_response(req.id, e))
        finally:
            await stream.aclose()

    async def authenticate(self) -> Challenge | None:
        """Find this process's principal from its environment; the refusal, if any."""
        who = await self.authenticator.authenticate(credentials_from_env(self.environ))
        if isinstance(who, Challenge):
            return who
        self._call = Call(who, "stdio")
        return None

    async def serve(self, reader: asyncio.StreamReader) -> bool:
        """Answer lines until EOF. False (nothing read, nothing answered) when authentication was refused
        or the endpoint failed to start."""
        refusal = await self.authenticate()
        if refusal is not None:
            log.error("stdio: credentials refused (%d): %s", refusal.status, refusal.message)
            return False
        try:
            await self.endpoint.startup()
        except Exception:  # e.g. the app's lifespan could not open its database: nothing is served
            log.exception("stdio: startup failed")
            return False
        lines = read_lines(reader, self.max_line)
        reading = asyncio.get_running_loop().create_task(self._read(lines))
        gone = asyncio.get_running_loop().create_task(self._gone.wait())
        try:
            await asyncio.wait((reading, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not reading.done():
                reading.cancel()
                await asyncio.wait((reading,))
            await lines.aclose()
        if not reading.cancelled() and (failure := reading.exception()) is not None:
            raise failure
        await self.shutdown()
        return True

    async def _read(self, lines: AsyncIterator[bytes | None]) -> None:
        async for line in lines:
            if line is None:
                self.write(errors.error_response(None, McpError(errors.INVALID_REQUEST, "Message too large")))
            else:
                self.handle_line(line)
            # flow control: read on only when the output keeps up and there is room for another request
            if not self._writable.is_set():
                await self._writable.wait()
            if not self._room.is_set():
                await self._room.wait()

    async def shutdown(self) -> None:
        if self._legacy_session is not None:
            await self._legacy_session.aclose()
        await self.endpoint.drain()
        pending = [t for t, _ in self._inbound.inflight]
        if pending:
            _done, still = await asyncio.wait(pending, timeout=self.drain_timeout)
            for t in still:
                t.cancel()
            if still:
                await asyncio.wait(still, timeout=0.5)
        await self.endpoint.aclose()  # after the drain: what the lifespan opened outlives every request


def protect_stdout() -> int:
    """Keep the real stdout for MCP messages only: returns a duplicate of it and points fd 1 (and
    sys.stdout) at stderr, so a stray print() or os.write(1, ...) anywhere in the process cannot corrupt
    the stream. Call it before importing application code (import-time prints count too)."""
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto_fd


def _is_stream(fd: int) -> bool:
    """A pipe, socket or terminal (what the event loop's pipe transports take; not /dev/null)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


def _feed_from_thread(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, fd: int) -> None:
    """Fallback reader for a stdin that is a regular file (no pipe transport): a daemon thread."""
    try:
        while chunk := os.read(fd, 1 << 16):
            loop.call_soon_threadsafe(reader.feed_data, chunk)
    except OSError:
        pass
    with contextlib.suppress(RuntimeError):  # the loop may already be closed
        loop.call_soon_threadsafe(reader.feed_eof)


async def _amain(endpoint: Endpoint, out_fd: int, tool_threads: int, authenticator: Authenticator | None,
                 max_inflight: int, legacy: LegacyEndpoint | None = None,
                 legacy_until: Retirement | None = None, stop_signals: tuple[int, ...] = ()) -> bool:
    loop = asyncio.get_running_loop()
    # Sync tools run in the default executor: size it so that blocking calls do not queue behind each other.
    loop.set_default_executor(ThreadPoolExecutor(max_workers=tool_threads, thread_name_prefix="mcp-tool"))
    server = StdioServer(endpoint, authenticator=authenticator, max_inflight=max_inflight, legacy=legacy,
                         legacy_until=legacy_until)
    for sig in stop_signals:
        loop.add_signal_handler(sig, server.stop, sig)
    # read() in chunks (lines are framed by read_lines): the limit only sets when the pipe is paused
    reader = asyncio.StreamReader(limit=_CHUNK)
    in_fd = sys.stdin.fileno()
    if _is_stream(in_fd):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    else:  # stdin redirected from a regular file (no pipe transport for those; uvloop aborts on them)
        threading.Thread(target=_feed_from_thread, args=(loop, reader, in_fd), daemon=True,
                         name="mcp-stdin").start()
    if _is_stream(out_fd):
        transport, _ = await loop.connect_write_pipe(lambda: _StdoutProtocol(server),
                                                     os.fdopen(out_fd, "wb", buffering=0))
        server.attach_stdout(transport)
    else:  # a regular file as stdout: plain blocking writes
        server._out_fd = out_fd
    settle_heap()
    served = await server.serve(reader)
    if server._out is not None:
        server._out.close()
    return served


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def serve_stdio(endpoint: Endpoint, out_fd: int | None = None, *, tool_threads: int = 64,
                authenticator: Authenticator | None = None, max_inflight: int = DEFAULT_MAX_INFLIGHT,
                legacy: LegacyEndpoint | None = None, legacy_until: Retirement | None = None,
                stop_signals: tuple[int, ...] = ()) -> int:
    """Serve `endpoint` on this process's stdin/stdout until stdin reaches EOF; the process is the server's.
    Returns the exit status: 0, or 1 when the environment's credentials were refused or the endpoint failed to start.

    `out_fd` is the protocol output (from `protect_stdout()`, called here when not given). On EOF, open
    listen streams get their final result, requests still running get `drain_timeout` to finish, and the
    process then exits even if a sync tool is still blocked in its thread. `stop_signals` (e.g. SIGTERM)
    end the serve the same way instead of killing the process: for an endpoint whose `aclose` must run,
    such as a bridge whose upstream processes would otherwise outlive it.
    """
    if out_fd is None:
        out_fd = protect_stdout()
    loop = _new_loop()
    try:
        served = loop.run_until_complete(_amain(endpoint, out_fd, tool_threads, authenticator, max_inflight,
                                                legacy, legacy_until, stop_signals))
    finally:
        rest = asyncio.all_tasks(loop)
        for t in rest:
            t.cancel()
        if rest:
            loop.run_until_complete(asyncio.wait(rest, timeout=0.5))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()  # does not wait for the tool threads
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        # A sync tool is still blocked: don't let interpreter shutdown join its thread.
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(0 if served else 1)
    return 0 if served else 1
